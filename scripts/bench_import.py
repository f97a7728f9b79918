#!/usr/bin/env python
"""Importer speed: converting a 10,000-op nGraph graph against reading its JSON and writing its ONNX.

The graph is a chain of quantized layers (per-channel i8 weights -> Dequantize -> Dot -> Add -> Relu ...,
eleven ops a layer, nGraph v0.26 format) with 8-wide tensors, so the time goes to the ops, not the
values: the importer's hardest case. Baseline: ``json.load`` of the file plus ``onnx.save`` of the
converted model (both with Python's defaults, the garbage collector on). Target: ``convert(path)`` in at
most 3x the baseline; also shown, stricter, ``convert(path)`` plus the same ``onnx.save`` (what
``onnx-dequant convert`` does) against the same 3x. A second case, 1,000 ops with 128-wide weights
(the time goes to parsing values), shows the other end.

Folder conversion (``--only graphs``, also part of the default run): 100 graphs of 1,000 ops each (the same
layers, each graph its own seed) converted with ``convert_tree(jobs=2)`` against ``convert_tree(jobs=1)``
(one by one in the process), both writing every model; target at most 0.6x.

Usage: ``python scripts/bench_import.py [--ops 10000] [--graphs 100] [--repeat 11] [--quick] [--json FILE]``
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

from benchlib import Bench

from onnx_dequant.ngraph import convert, convert_tree
from onnx_dequant.ngraph.writer import FunctionWriter, dumps

WIDTH = 8
OPS_PER_LAYER = 11


def big_graph(n_ops: int, seed: int = 0, width: int = WIDTH) -> str:
    """A chain of layers, at least ``n_ops`` ops, ``width``-wide tensors, as nGraph v0.26 JSON text."""
    rng = np.random.default_rng(seed)
    w = FunctionWriter("bench", era="v0.26")
    x = w.parameter("f32", [None, width])
    for _ in range(max(1, -(-(n_ops - 2) // OPS_PER_LAYER))):  # at least n_ops ops
        q = w.constant(rng.integers(-127, 128, (width, width), dtype=np.int8))
        s = w.constant(rng.uniform(0.001, 0.01, width).astype(np.float32))
        z = w.constant(rng.integers(-3, 4, width, dtype=np.int8))
        wf = w.op("Dequantize", q, s, z, type="f32", axes=[1])
        y = w.op("Dot", x, wf, reduction_axes_count=1)
        y = w.binary("Add", y, w.constant(rng.uniform(-0.1, 0.1, width).astype(np.float32)))
        y = w.op("Relu", y)
        y = w.binary("Multiply", y, w.constant(np.float32(0.5)))
        x = w.binary("Subtract", y, x)
    w.result(x)
    return dumps([w])


def run_case(bench: Bench, tmp: Path, n_ops: int, width: int) -> None:
    src = tmp / f"graph_{n_ops}_{width}.json"
    text = big_graph(n_ops, width=width)
    src.write_text(text)
    ops = len(json.loads(text)[0]["ops"])
    model = convert(src)
    onnx.checker.check_model(model)
    out = tmp / "model.onnx"
    print(
        f"graph: {ops} ops, {width}-wide, {len(text) / 1e6:.2f} MB of JSON; model: {len(model.graph.node)} nodes, "
        f"{model.ByteSize() / 1e6:.2f} MB",
        flush=True,
    )

    def baseline() -> None:
        with open(src) as f:
            json.load(f)
        onnx.save(model, out)

    def convert_and_save() -> None:
        onnx.save(convert(src), out)

    def convert_only() -> None:
        convert(src)

    bench.case(
        f"{ops} ops, {width}-wide",
        {"json.load + onnx.save": baseline, "convert + onnx.save": convert_and_save, "convert": convert_only},
        baseline="json.load + onnx.save",
        targets={
            "convert": ("<= 3x json.load + onnx.save (the target)", 3.0),
            "convert + onnx.save": ("<= 3x (stricter: the command's work)", 3.0),
        },
    )


def run_tree(bench: Bench, tmp: Path, n_graphs: int, n_ops: int) -> None:
    if not bench.wants(f"{n_graphs} graphs of {n_ops} ops"):
        return
    src = tmp / "tree"
    for i in range(n_graphs):
        folder = src / f"part{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"graph_{i:03d}.json").write_text(big_graph(n_ops, seed=i))
    print(f"folder: {n_graphs} graphs of {n_ops} ops", flush=True)
    runs = iter(range(1 << 30))

    def tree(jobs: int):
        def go() -> None:
            report = convert_tree(src, tmp / f"out_{jobs}_{next(runs)}", jobs=jobs)
            assert report.ok, report.refused[:1]

        return go

    bench.case(
        f"{n_graphs} graphs of {n_ops} ops",
        {"convert_tree jobs=1": tree(1), "convert_tree jobs=2": tree(2)},
        baseline="convert_tree jobs=1",
        targets={"convert_tree jobs=2": ("<= 0.6x one by one (the target)", 0.6)},
    )


def main() -> int:
    bench = Bench("nGraph JSON import: convert vs json.load + onnx.save", default_repeat=11)
    bench.parser.add_argument("--ops", type=int, default=10_000, help="ops in the graph (default 10000)")
    bench.parser.add_argument("--graphs", type=int, default=100, help="graphs in the folder case (default 100)")
    args = bench.args
    n_ops = 1_000 if args.quick else args.ops
    with tempfile.TemporaryDirectory() as tmp:
        # the folder case first: its workers fork this process, which the other cases fill with models
        run_tree(bench, Path(tmp), 10 if args.quick else args.graphs, 1_000)
        run_case(bench, Path(tmp), n_ops, WIDTH)
        run_case(bench, Path(tmp), max(n_ops // 10, 100), 128)
    return bench.finish()


if __name__ == "__main__":
    sys.exit(main())
