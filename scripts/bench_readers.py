#!/usr/bin/env python3
"""A Dequantize read by several nodes: the lowered model with and without the Flatten/Reshape pair that
has ONNX Runtime run its DequantizeLinear once (``lowering/run_once.py``), timed side by side.

    python scripts/bench_readers.py                       # the held-out cases below, one thread
    python scripts/bench_readers.py --rounds 3 --json readers.json

ONNX Runtime 1.32 gives each reader of a DequantizeLinear its own copy and runs each. Each case is lowered
by the planner, then the pair is toggled: removed where ``run_once`` added it, added where it did not (so
that a refusal is measured too). For both models the script prints the DequantizeLinear nodes in ORT's
optimized graph and the time per run (medians of interleaved samples, outputs bound to preallocated
buffers); ``ratio`` is the model with the pair over the one without. The planner's choice is marked ``*``.
Exit 1 when the lowered model's outputs differ from the reference.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "scripts"))

import bench_sweep as bs  # noqa: E402

import onnx_dequant as odq  # noqa: E402
from onnx_dequant import dtypes  # noqa: E402
from onnx_dequant.compare import ulp_distance  # noqa: E402
from onnx_dequant.lowering import lower_model  # noqa: E402
from onnx_dequant.schema import opset_import  # noqa: E402


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    in_type: str
    readers: tuple[str, ...]  # ops reading the node's output ("Mul": by itself; "output": the graph returns it)

    @property
    def name(self) -> str:
        return f"{self.shape} {{{','.join(map(str, self.axes))}}} {self.in_type} -> {'+'.join(self.readers)}"


CASES = (
    Case((16, 64, 56, 56), (1,), "u8", ("Relu", "Sigmoid")),
    Case((16, 64, 56, 56), (), "i8", ("Relu", "Sigmoid", "Neg")),
    Case((4096, 1024), (1,), "i8", ("Relu", "Neg")),
    Case((256, 4096), (0,), "i16", ("Relu", "Relu")),
    Case((1024, 1024), (), "u8", ("Mul",)),
    Case((262144, 8), (0,), "i8", ("Relu", "Sigmoid")),
    Case((4096, 14), (1,), "i16", ("Relu", "output")),
    Case((16, 64, 56, 56), (), "i8", ("Relu", "output")),
    Case((128, 128), (), "i8", ("Relu", "Neg")),
    Case((32, 32), (), "i8", ("Relu", "Neg")),
    Case((8, 16, 256, 512), (1, 2), "i8", ("Relu", "Neg")),
)
"""Held-out graphs: per tensor, per channel, per row, blocked, a Mul by itself, returned and read, small
(the pair's fixed cost against the runs it saves) and a form ending in a Reshape (no pair applies)."""

READ = {"Relu": lambda y: np.maximum(y, 0), "Sigmoid": None, "Neg": np.negative, "Mul": lambda y: y * y}


def model(case: Case) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray], np.ndarray]:
    """The model, its feed, the expected outputs (None: not checked) and the reference's output."""
    rng = np.random.default_rng(0)
    q = dtypes.parse(case.in_type)
    x = rng.integers(int(q.min), int(q.max) + 1, case.shape).astype(q.numpy)
    ss = tuple(case.shape[a] for a in case.axes)
    s = rng.uniform(0.001, 0.1, ss).astype(np.float32)
    z = rng.integers(int(q.min), int(q.max) + 1, ss).astype(q.numpy)
    ref = odq.dequantize(x, s, z, axes=case.axes)
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    nodes = [odq.make_node(["x", "s", "z"], ["y"], axes=list(case.axes), name="dq")]
    outs, want = [], []
    for i, op in enumerate(case.readers):
        if op == "output":
            outs.append(helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, list(case.shape)))
            want.append(ref)
            continue
        nodes.append(helper.make_node(op, ["y", "y"] if op == "Mul" else ["y"], [f"r{i}"]))
        outs.append(helper.make_tensor_value_info(f"r{i}", onnx.TensorProto.FLOAT, list(case.shape)))
        want.append(None if READ[op] is None else READ[op](ref))
    g = helper.make_graph(nodes, "readers", [helper.make_tensor_value_info("x", q.onnx, list(case.shape))], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), opset_import()])
    m.ir_version = 10
    return m, {"x": x}, want, ref


def toggled(lowered: onnx.ModelProto, output: str) -> onnx.ModelProto | None:
    """``lowered`` with the Flatten/Reshape pair after the DequantizeLinear computing ``output`` removed, or
    added where there is none; None where ``output`` does not come from a DequantizeLinear or the pair."""
    m = onnx.ModelProto.FromString(lowered.SerializeToString())
    nodes = list(m.graph.node)
    by_output = {o: n for n in nodes for o in n.output}
    last = by_output[output]
    if last.op_type == "Reshape" and by_output.get(last.input[0], last).op_type == "Flatten":
        flat = by_output[last.input[0]]
        dql = by_output[flat.input[0]]
        dql.output[0] = output
        keep = [n for n in nodes if n is not flat and n is not last]
    elif last.op_type == "DequantizeLinear":
        last.output[0] = output + "__dql"
        shape = numpy_helper.from_array(np.array(lowered_shape(lowered, output), np.int64), output + "__shape")
        m.graph.initializer.append(shape)
        at = nodes.index(last) + 1
        pair = [
            helper.make_node("Flatten", [output + "__dql"], [output + "__flat"], axis=0),
            helper.make_node("Reshape", [output + "__flat", shape.name], [output], allowzero=1),
        ]
        keep = nodes[:at] + pair + nodes[at:]
    else:
        return None
    del m.graph.node[:]
    m.graph.node.extend(keep)
    return m


def lowered_shape(m: onnx.ModelProto, name: str) -> list[int]:
    inferred = onnx.shape_inference.infer_shapes(m)
    for v in [*inferred.graph.value_info, *inferred.graph.output]:
        if v.name == name:
            return [d.dim_value for d in v.type.tensor_type.shape.dim]
    raise KeyError(name)


def ort_dqls(m: onnx.ModelProto) -> int:
    """DequantizeLinear nodes in ORT's optimized graph (its default level)."""
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.optimized_model_filepath = str(Path(d) / "opt.onnx")
        so.log_severity_level = 3
        ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return sum(n.op_type == "DequantizeLinear" for n in onnx.load(so.optimized_model_filepath).graph.node)


class Runner:
    """One ORT session, its input and every output bound to preallocated buffers."""

    def __init__(self, m: onnx.ModelProto, feed: dict[str, np.ndarray], threads: int) -> None:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads = threads
        self.sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self.b = self.sess.io_binding()
        for k, v in feed.items():
            self.b.bind_cpu_input(k, v)
        self.outs = []
        for o in self.sess.get_outputs():
            y = np.empty(feed["x"].shape, np.float32)
            self.b.bind_output(o.name, "cpu", 0, y.dtype, y.shape, y.ctypes.data)
            self.outs.append(y)

    def __call__(self) -> None:
        self.sess.run_with_iobinding(self.b)


def measure(case: Case, repeat: int, threads: int) -> dict:
    m, feed, want, _ = model(case)
    result = lower_model(onnx.ModelProto.FromString(m.SerializeToString()))
    lowered, node = result.model, result.nodes[0]
    other = toggled(lowered, "y")
    has_pair = node.runs_saved > 0
    row = {"case": case.name, "strategy": node.strategy, "planner_pair": has_pair, "runs_saved": node.runs_saved}
    run = Runner(lowered, feed, threads)
    run()
    row["exact"] = all(
        w is None or np.max(ulp_distance(got, w), initial=0) == 0 for got, w in zip(run.outs, want, strict=True)
    )
    if other is None:
        row["note"] = "the form ends in a Reshape: no pair applies"
        return row
    with_pair, without = (lowered, other) if has_pair else (other, lowered)
    runners = {"with": Runner(with_pair, feed, threads), "without": Runner(without, feed, threads)}
    t = bs.timed(runners, repeat)
    row |= {
        "dqls_with": ort_dqls(with_pair),
        "dqls_without": ort_dqls(without),
        "ms_with": t["with"] * 1e3,
        "ms_without": t["without"] * 1e3,
        "ratio": t["with"] / t["without"],
    }
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="timed samples per model (median taken)")
    ap.add_argument("--rounds", type=int, default=1, help="measure each case this many times")
    ap.add_argument("--threads", type=int, default=1, help="ORT intra-op threads")
    ap.add_argument("--json", metavar="FILE", help="write every round's rows as JSON")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.rounds < 1 or args.threads < 1:
        ap.error("--repeat, --rounds and --threads must be at least 1")
    print(f"# ONNX Runtime {ort.__version__}, {args.threads} thread(s); ratio: with the pair / without")
    rows, wrong = [], 0
    for case in CASES:
        for _ in range(args.rounds):
            r = measure(case, args.repeat, args.threads)
            rows.append(r)
            wrong += not r["exact"]
            if "ratio" not in r:
                print(f"{r['case']}: {r['strategy']}: {r['note']}", flush=True)
                continue
            mark = ("*", "") if r["planner_pair"] else ("", "*")
            print(
                f"{r['case']}: {r['strategy']}: with{mark[0]} {r['ms_with']:.3f} ms ({r['dqls_with']} DQL), "
                f"without{mark[1]} {r['ms_without']:.3f} ms ({r['dqls_without']} DQL), ratio {r['ratio']:.2f}"
                f"{'' if r['exact'] else '  WRONG VALUES'}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
