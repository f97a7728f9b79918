#!/usr/bin/env python3
"""ONNX Runtime's per-axis and blocked DequantizeLinear by the length of the rows its loop walks, over its
per-tensor DequantizeLinear on the same input, side by side.

    python scripts/bench_rows.py                          # int8 and uint16 inputs, rows of 1-33 and 4096
    python scripts/bench_rows.py --types i8 --rows 8,15,16,17 --rounds 3 --json rows.json

Each case is an input of ``--elements`` viewed as ``(R, 8, r)``: per axis along axis 1 (a scale of 8, so
rows of ``r`` elements after it), and blocked along axis 1 in blocks of 8 (a scale of ``(R, 1, r)``, rows of
``r`` after the reduced axis), a zero point with each. ORT 1.32's loops over a row run 16-byte vectors of
the input and the row's rest one element at a time: rows of whole vectors (``r`` a multiple of 16 for 8-bit
inputs, 8 for 16-bit ones, 4 for int32) cost what long rows do per element, the others several times more
(``strategies/dql.py``, ``vector_elements``; docs/lowering.md). The times are medians of interleaved samples
(``bench_sweep.timed``), inputs and outputs bound to buffers (``bench_sweep.Runner``), at ``--threads``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_sweep as bs  # noqa: E402

from onnx_dequant import dtypes  # noqa: E402

BLOCK = 8
"""The dim before the rows: the per-axis scale's length, and the blocked form's block."""


def model(in_type: str, shape: tuple[int, ...], s_shape: tuple[int, ...], **attrs) -> onnx.ModelProto:
    """One DequantizeLinear over ``in_type`` to f32 with a scale and zero point of ``s_shape``."""
    t = dtypes.parse(in_type)
    rng = np.random.default_rng(0)
    s = rng.uniform(0.01, 0.1, s_shape).astype(np.float32)
    z = rng.integers(0, 100, s_shape).astype(t.numpy)
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], **attrs)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", t.onnx, list(shape))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, list(shape))],
        [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def measure(in_type: str, r: int, n: int, repeat: int) -> dict[str, float]:
    """Per-axis and blocked over rows of ``r``: each one's time over the per-tensor DequantizeLinear's."""
    rows = n // (BLOCK * r)
    shape = (rows, BLOCK, r)
    x = np.random.default_rng(1).integers(0, 100, shape).astype(dtypes.parse(in_type).numpy)
    runners = {
        "tensor": bs.Runner(model(in_type, shape, ()), {"x": x}),
        "axis": bs.Runner(model(in_type, shape, (BLOCK,), axis=1), {"x": x}),
        "blocked": bs.Runner(model(in_type, shape, (rows, 1, r), axis=1, block_size=BLOCK), {"x": x}),
    }
    t = bs.timed(runners, repeat)
    return {"axis": t["axis"] / t["tensor"], "blocked": t["blocked"] / t["tensor"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default="i8,u16", help="comma-separated input types (8, 16 or 32 bits)")
    ap.add_argument("--rows", default=",".join(map(str, [*range(1, 34), 4096])), help="row lengths")
    ap.add_argument("--elements", type=bs.parse_size, default=4 << 20, help="elements per input (e.g. 4M)")
    ap.add_argument("--repeat", type=bs.count, default=9, help="timed samples per form (median taken)")
    ap.add_argument("--rounds", type=bs.count, default=1, help="measure each case this many times (median kept)")
    ap.add_argument("--threads", type=bs.count, default=1, help="ORT intra-op threads")
    ap.add_argument("--json", metavar="FILE", help="write every case's ratios as JSON")
    args = ap.parse_args(argv)
    types = [t for t in args.types.split(",") if t]
    known = [t.name for t in dtypes.QUANTIZED if t.bits >= 8]  # ORT's Python API takes no 4-bit input
    if bad := [t for t in types if t not in known]:
        ap.error(f"--types: among {', '.join(known)}, not {', '.join(bad)}")
    bs.THREADS = args.threads
    out = []
    print(f"{'type':>5} {'row':>5}  {'per axis':>9} {'blocked':>9}  (over ORT's per-tensor DequantizeLinear)")
    for t in types:
        for r in (int(v) for v in args.rows.split(",") if v):
            runs = [measure(t, r, args.elements, args.repeat) for _ in range(args.rounds)]
            got = {k: statistics.median(run[k] for run in runs) for k in ("axis", "blocked")}
            out.append({"type": t, "row": r, **got})
            print(f"{t:>5} {r:>5}  {got['axis']:>8.2f}x {got['blocked']:>8.2f}x", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
