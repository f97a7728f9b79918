#!/usr/bin/env python
"""Importer speed: converting a 10,000-op nGraph graph against reading its JSON and writing its ONNX.

The graph is a chain of quantized layers (per-channel i8 weights -> Dequantize -> Dot -> Add -> Relu ...,
eleven ops a layer, nGraph v0.26 format). Baseline: ``json.load`` of the file plus ``onnx.save`` of the
converted model. Target: ``convert(path)`` in at most 3x the baseline; also shown, stricter, ``convert(path)``
plus the same ``onnx.save`` (what ``onnx-dequant convert`` does) against the same 3x.

Usage: ``python scripts/bench_import.py [--ops 10000] [--repeat 7] [--quick] [--json FILE]``
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib import Bench  # noqa: E402

from onnx_dequant.ngraph import convert  # noqa: E402
from onnx_dequant.ngraph.writer import FunctionWriter, dumps  # noqa: E402

WIDTH = 8
OPS_PER_LAYER = 11


def big_graph(n_ops: int, seed: int = 0) -> str:
    """A chain of layers with about ``n_ops`` ops, as nGraph v0.26 JSON text."""
    rng = np.random.default_rng(seed)
    w = FunctionWriter("bench", era="v0.26")
    x = w.parameter("f32", [None, WIDTH])
    for _ in range(max(1, (n_ops - 2) // OPS_PER_LAYER)):
        q = w.constant(rng.integers(-127, 128, (WIDTH, WIDTH), dtype=np.int8))
        s = w.constant(rng.uniform(0.001, 0.01, WIDTH).astype(np.float32))
        z = w.constant(rng.integers(-3, 4, WIDTH, dtype=np.int8))
        wf = w.op("Dequantize", q, s, z, type="f32", axes=[1])
        y = w.op("Dot", x, wf, reduction_axes_count=1)
        y = w.binary("Add", y, w.constant(rng.uniform(-0.1, 0.1, WIDTH).astype(np.float32)))
        y = w.op("Relu", y)
        y = w.binary("Multiply", y, w.constant(np.float32(0.5)))
        x = w.binary("Subtract", y, x)
    w.result(x)
    return dumps([w])


def main() -> int:
    bench = Bench("nGraph JSON import: convert vs json.load + onnx.save", default_repeat=11)
    bench.parser.add_argument("--ops", type=int, default=10_000, help="ops in the graph (default 10000)")
    args = bench.args
    n_ops = 1_000 if args.quick else args.ops
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "graph.json"
        text = big_graph(n_ops)
        src.write_text(text)
        ops = len(json.loads(text)[0]["ops"])
        model = convert(src)
        onnx.checker.check_model(model)
        out = Path(tmp) / "model.onnx"
        print(f"graph: {ops} ops, {len(text) / 1e6:.2f} MB of JSON; model: {len(model.graph.node)} nodes, "
              f"{model.ByteSize() / 1e6:.2f} MB", flush=True)

        def baseline() -> None:
            with open(src) as f:
                json.load(f)
            onnx.save(model, out)

        def convert_and_save() -> None:
            onnx.save(convert(src), out)

        def convert_only() -> None:
            convert(src)

        bench.case(
            f"{ops} ops",
            {"json.load + onnx.save": baseline, "convert + onnx.save": convert_and_save, "convert": convert_only},
            baseline="json.load + onnx.save",
            targets={
                "convert": ("<= 3x json.load + onnx.save (the target)", 3.0),
                "convert + onnx.save": ("<= 3x (stricter: the command's work)", 3.0),
            },
        )
    return bench.finish()


if __name__ == "__main__":
    sys.exit(main())
