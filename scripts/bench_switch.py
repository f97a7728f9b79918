#!/usr/bin/env python3
"""Dims known only at run time in a node's rows, in ONNX Runtime: the planner's ``row-switch`` (an ``If`` on
the rows' length choosing the form planned for long rows or the one for narrow rows) against the planner
without it, and against the same node lowered over the run's dims declared, timed side by side.

    python scripts/bench_switch.py                      # the held-out cases below, one thread
    python scripts/bench_switch.py --rounds 3 --json switch.json
    python scripts/bench_switch.py --kernels            # the ORT facts it rests on

Each case is a node declared over symbolic dims (its quantization axes excepted) -> Relu, run at several
sizes of those dims: long ones (the sizes real batches, sequences and images have) and narrow ones (a
decoding step's sequence of 1, a late layer's 2x2 image). ``with``: the planner's model; ``without``: the
planner with ``row-switch`` left out (the long form, as lowered before it); ``declared``: the node lowered
over the run's own dims (the form the planner picks knowing them). The three must agree bit for bit, and with
the reference; exit 1 when they do not.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "scripts"))

import bench_sweep as bs  # noqa: E402

from onnx_dequant import reference  # noqa: E402
from onnx_dequant.lowering import LowerOptions, lower_model  # noqa: E402
from onnx_dequant.lowering.planner import STRATEGIES  # noqa: E402

WITHOUT = tuple(s.name for s in STRATEGIES if s.name != "row-switch")


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]  # as declared: the quantization axes' sizes hold at every run
    axes: tuple[int, ...]
    in_type: str
    runs: tuple[tuple[int, ...], ...]  # the input's shape at each run
    zero_point: bool = True
    scale_input: bool = False

    def at(self, run: tuple[int, ...]) -> bs.Case:
        return bs.Case(run, self.axes, "held-out", self.in_type, "f32", self.zero_point, self.scale_input)

    def name(self, run: tuple[int, ...]) -> str:
        zp = " zp" if self.zero_point else ""
        fed = " scale fed" if self.scale_input else ""
        return f"{run} {{{','.join(map(str, self.axes))}}} {self.in_type}{zp}{fed}"


CASES = (
    Case((8, 512, 1000), (1,), "i8", ((8, 512, 1000), (8, 512, 16), (8, 512, 4), (8, 512, 1))),
    Case((16, 64, 56, 56), (1,), "u8", ((16, 64, 56, 56), (16, 64, 7, 7), (16, 64, 2, 2), (16, 64, 1, 1))),
    Case((4, 12, 512, 64), (1,), "i8", ((4, 12, 512, 64), (4, 12, 1, 64)), zero_point=False),
    Case((32, 256, 4096), (1,), "i16", ((32, 256, 4096), (32, 256, 3)), scale_input=True),
    Case((64, 3, 224, 224), (1,), "u8", ((64, 3, 224, 224), (1024, 3, 2, 2))),
    Case((8, 16, 256, 512), (1, 2), "i8", ((8, 16, 256, 512), (8, 16, 256, 2))),
)
"""Held-out graphs: a 1-D convolution's channels over a sequence, an image's channels over its space, a
scale per head over a sequence of keys, a fed scale over a point cloud, an RGB batch, and the issue's
blocked case, each at long and narrow run-time sizes."""


def _session_of(nodes: list, inputs: list, inits: list) -> onnx.ModelProto:
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(
        helper.make_graph(nodes, "g", inputs, [y], inits), opset_imports=[helper.make_opsetid("", 21)]
    )
    m.ir_version = 10
    return m


def kernels(repeat: int) -> list[dict]:
    """The ORT facts the form rests on, each pair side by side: a scale expanded along an inner axis by one
    Expand, or along an outer one and transposed; a branch ending in a Reshape of its DequantizeLinear's
    output, or in the DequantizeLinear; and the If's own cost, against the DequantizeLinear alone."""
    rows = []
    for c, t in ((512, 4), (512, 16), (4096, 4), (65536, 4)):
        s = np.linspace(0.1, 1, c, dtype=np.float32)
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["t"])
        inits = [
            numpy_helper.from_array(s.reshape(c, 1), "column"),
            numpy_helper.from_array(s.reshape(1, c), "row"),
            numpy_helper.from_array(np.array([c], np.int64), "c"),
        ]
        shape = helper.make_node("Shape", ["x"], ["t"])
        inner = [
            shape,
            helper.make_node("Concat", ["c", "t"], ["to"], axis=0),
            helper.make_node("Expand", ["column", "to"], ["y"]),
        ]
        outer = [
            shape,
            helper.make_node("Concat", ["t", "c"], ["to"], axis=0),
            helper.make_node("Expand", ["row", "to"], ["e"]),
            helper.make_node("Transpose", ["e"], ["y"], perm=[1, 0]),
        ]
        feed = {"x": np.zeros(t, np.float32)}
        runners = {k: bs.Runner(_session_of(n, [x], inits), feed) for k, n in (("inner", inner), ("outer", outer))}
        t_ = bs.timed(runners, repeat)
        rows.append({"fact": f"a ({c},) scale expanded to ({c},{t})", "us": {k: v * 1e6 for k, v in t_.items()}})
    for shape in ((8, 64, 64), (8, 64, 1024), (64, 64, 1024)):
        x = helper.make_tensor_value_info("x", TensorProto.INT8, ["n", 64, "t"])
        inits = [numpy_helper.from_array(np.linspace(0.01, 1, 64, dtype=np.float32), "s")]
        cond = [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("ReduceProd", ["shape"], ["n"], keepdims=0),
        ]
        cond += [helper.make_node("Less", ["n", "zero"], ["never"])]
        inits.append(numpy_helper.from_array(np.array(0, np.int64), "zero"))

        def branch(key: str, reshaped: bool) -> onnx.GraphProto:
            out = key + ("_dql" if reshaped else "")
            nodes = [helper.make_node("DequantizeLinear", ["x", "s"], [out], axis=1)]
            if reshaped:
                nodes.append(helper.make_node("Reshape", [out, "shape"], [key]))
            return helper.make_graph(nodes, key, [], [helper.make_tensor_value_info(key, TensorProto.FLOAT, None)])

        forms = {"alone": [helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=1)]}
        for name, reshaped in (("if", False), ("if_reshape", True)):
            branches = {
                "then_branch": branch(name + "_then", reshaped),
                "else_branch": branch(name + "_else", reshaped),
            }
            forms[name] = [*cond, helper.make_node("If", ["never"], ["y"], **branches)]
        feed = {"x": np.zeros(shape, np.int8)}
        runners = {k: bs.Runner(_session_of(n, [x], inits), feed) for k, n in forms.items()}
        t_ = bs.timed(runners, repeat)
        rows.append(
            {"fact": f"a per-axis DequantizeLinear of {shape} in an If", "us": {k: v * 1e6 for k, v in t_.items()}}
        )
    return rows


def measure(case: Case, run: tuple[int, ...], repeat: int) -> dict:
    c = case.at(run)
    x, s, z = bs.data(c)
    m = bs.symbolic(bs.model(case.at(case.shape), s, z, consumer="Relu"))
    feed = {"x": x} | ({"s": s} | ({"z": z} if z is not None else {}) if case.scale_input else {})
    lowered = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), LowerOptions())
    without = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), LowerOptions(strategies=WITHOUT))
    declared = lower_model(bs.model(c, s, z, consumer="Relu"), LowerOptions())
    models = {"with": lowered, "without": without, "declared": declared}
    runners = {k: bs.Runner(r.model, feed) for k, r in models.items()}
    want = np.maximum(reference.dequantize(x, s, z, axes=case.axes), np.float32(0))
    for r in runners.values():
        r()
    exact = all(np.array_equal(r.outs[0].view(np.uint32), want.view(np.uint32)) for r in runners.values())
    t = bs.timed(runners, repeat)
    return {
        "case": case.name(run),
        "declared_as": case.name(case.shape),
        "strategy": {k: r.nodes[0].strategy for k, r in models.items()},
        "ms": {k: v * 1e3 for k, v in t.items()},
        "ratio": t["with"] / t["without"],
        "to_declared": t["with"] / t["declared"],
        "exact": exact,
    }


def main(argv: list[str] | None = None) -> int:
    ap = bs.held_out_parser(__doc__, "run")
    ap.add_argument("--kernels", action="store_true", help="time the ORT facts the form rests on instead")
    args = bs.held_out_args(ap, argv)
    print(f"# ONNX Runtime {ort.__version__}, {args.threads} thread(s); ratio: with / without the row switch")
    rows, wrong = [], 0
    if args.kernels:
        print("\n## ORT kernels (microseconds per run)")
        for r in kernels(args.repeat):
            rows.append(r)
            print(f"{r['fact']}: " + ", ".join(f"{k} {v:.1f}" for k, v in r["us"].items()), flush=True)
    for case in CASES if not args.kernels else ():
        print(f"\n## declared {case.name(case.shape)} with its non-quantized dims symbolic")
        for run in case.runs:
            if args.only not in case.name(run):
                continue
            for _ in range(args.rounds):
                r = measure(case, run, args.repeat)
                rows.append(r)
                wrong += not r["exact"]
                st, ms = r["strategy"], r["ms"]
                print(
                    f"{r['case']}: with ({st['with']}) {ms['with']:.3f} ms, without ({st['without']}) "
                    f"{ms['without']:.3f} ms, ratio {r['ratio']:.2f}; declared ({st['declared']}) "
                    f"{ms['declared']:.3f} ms, with / declared {r['to_declared']:.2f}"
                    + ("" if r["exact"] else "  WRONG VALUES"),
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"ort": ort.__version__, "threads": args.threads, "rows": rows}, indent=1)
        )
    if wrong:
        print(f"\n{wrong} run(s) gave values other than the reference's", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
