#!/usr/bin/env python3
"""What reads a Dequantize, in ONNX Runtime: the lowered model with and without the Flatten/Reshape pair
the lowering puts after a DequantizeLinear, timed side by side.

    python scripts/bench_readers.py                       # the held-out cases below, one thread
    python scripts/bench_readers.py --rounds 3 --json readers.json

Two sets of held-out graphs:
- ``CASES``, a node read by several nodes. ONNX Runtime 1.32 gives each reader of a DequantizeLinear its
  own copy and runs each; the pair (``lowering/run_once.py``) has it run once. Each case is lowered by the
  planner, then the pair is toggled: removed where ``run_once`` added it, added where it did not (so that a
  refusal is measured too). ``ratio``: the model with the pair over the one without; the planner's choice
  is marked ``*``.
- ``HAZARDS``, a node whose DequantizeLinear ORT's QDQ propagation or Transpose optimizer would break (an
  int8 one with a zero point at opset 21+, an int32 one with ``wrap_int32``, read by Reshape or Transpose:
  ``strategies/dql.py``, ``ort_pass_hazard``). The pair keeps them off it (``with``); before it, the
  lowering took the cheapest form without a DequantizeLinear, which ``without`` times (the planner among
  the other forms), as it still does for a constant input (ORT folds that form). ``ratio``: with over
  without; the planner's choice is marked ``*``.

For both models the script prints the DequantizeLinear nodes in ORT's optimized graph and the time per
run (medians of interleaved samples, outputs bound to preallocated buffers). For ``CASES`` it also
prints ``graph``, the issue's graph measure on these held-out graphs: the planner's model over the same
graph with ORT's own per-tensor DequantizeLinear (whose copies ORT runs too), over the node's bytes floor.
Exit 1 when a lowered model's outputs differ from the reference.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "scripts"))

import bench_sweep as bs  # noqa: E402
from ort_facts import optimized_dqls  # noqa: E402

import onnx_dequant as odq  # noqa: E402
from onnx_dequant import dtypes  # noqa: E402
from onnx_dequant.compare import ulp_distance  # noqa: E402
from onnx_dequant.lowering import LowerOptions, lower_model, pipeline  # noqa: E402
from onnx_dequant.lowering.strategies import dql  # noqa: E402
from onnx_dequant.lowering.strategies.base import Refusal  # noqa: E402
from onnx_dequant.lowering.strategies.blocked import Blocked  # noqa: E402
from onnx_dequant.schema import opset_import  # noqa: E402


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    in_type: str
    readers: tuple[str, ...]  # ops reading the node's output ("Mul": by itself; "output": the graph returns it)
    opset: int = 21
    wrap_int32: bool = False
    x_const: bool = False  # the input an initializer (a weight), not fed
    symbolic: bool = False  # the fed inputs' dims declared by name (quantized ones excepted), sizes known at run time

    @property
    def name(self) -> str:
        wrap = (" wrap_int32" if self.wrap_int32 else "") + (" constant" if self.x_const else "")
        wrap += " symbolic" if self.symbolic else ""
        return (
            f"{self.shape} {{{','.join(map(str, self.axes))}}} {self.in_type}{wrap} opset {self.opset}"
            f" -> {'+'.join(self.readers)}"
        )


CASES = (
    Case((16, 64, 56, 56), (1,), "u8", ("Relu", "Sigmoid")),
    Case((16, 64, 56, 56), (), "i8", ("Relu", "Sigmoid", "Neg")),
    Case((4096, 1024), (1,), "i8", ("Relu", "Neg")),
    Case((256, 4096), (0,), "i16", ("Relu", "Relu")),
    Case((1024, 1024), (), "u8", ("Mul",)),
    Case((262144, 8), (0,), "i8", ("Relu", "Sigmoid")),
    Case((4096, 14), (1,), "i16", ("Relu", "output")),
    Case((16, 64, 56, 56), (), "i8", ("Relu", "output")),
    Case((1024, 1024), (), "u8", ("Relu", "Transpose")),
    Case((128, 128), (), "i8", ("Relu", "Neg")),
    Case((32, 32), (), "i8", ("Relu", "Neg")),
    Case((8, 16, 256, 512), (1, 2), "i8", ("Relu", "Neg")),
)
"""Held-out graphs: per tensor, per channel, per row, blocked, a Mul by itself, returned and read, small
(the pair's fixed cost against the runs it saves), read by a Transpose ORT moves the DequantizeLinear past
(no pair) and a form ending in a Reshape (no pair applies)."""

HAZARDS = (
    Case((1024, 1024), (), "i8", ("Reshape",)),
    Case((16, 64, 56, 56), (), "i8", ("Transpose",)),
    Case((16, 64, 56, 56), (), "u8", ("Transpose",), opset=25),  # a control: no hazard, the same model twice
    Case((1024, 1024), (), "i32", ("Reshape",), wrap_int32=True),
    Case((1024, 1024), (1,), "i32", ("Transpose",), wrap_int32=True),
    Case((4096, 256), (), "i32", ("Relu", "Reshape"), wrap_int32=True),
    Case((1024, 1024), (), "i8", ("Reshape",), x_const=True),  # ORT folds the form without a DQL: no pair
)
"""Graphs whose bare DequantizeLinear ORT 1.32 breaks (a model it cannot load, or clamped values)."""

READ = {
    "Relu": lambda y: np.maximum(y, 0),
    "Sigmoid": None,
    "Neg": np.negative,
    "Mul": lambda y: y * y,
    "Reshape": lambda y: y.reshape(-1),
    "Transpose": lambda y: y.transpose(),
}
IDS = np.random.default_rng(1).integers(0, 1 << 30, (1, 16))
"""A Gather reader's 16 ids (modulo the rows), as a tokenizer's output would be."""
SLICED = 128
"""The rows a Slice reader takes."""

GATHERS = (
    Case((32000, 512), (), "i8", ("Gather",), x_const=True),
    Case((32000, 512), (1,), "i8", ("Gather",), x_const=True),
    Case((32000, 512), (1,), "u8", ("Gather",)),
    Case((32000, 512), (0,), "i8", ("Gather",), x_const=True),
    Case((32000, 512), (0,), "u8", ("Gather",), x_const=True, symbolic=True),
    Case((32000, 512), (0, 1), "i8", ("Gather",), x_const=True),
    Case((32000, 512), (1,), "i8", ("Gather",), x_const=True, symbolic=True),
    Case((32000, 512), (0,), "i8", ("Gather", "Gemm"), x_const=True),
    Case((32000, 512), (0,), "i8", ("Gather", "Gemm")),
    Case((32000, 512), (1,), "u8", ("Gather", "Neg"), x_const=True),
    Case((4096, 768), (1,), "i8", ("Slice",), x_const=True),
    Case((4096, 768), (0,), "u8", ("Slice",), x_const=True),
)
"""Quantized embedding tables read by a Gather of 16 rows: per tensor, a scale per column, a fed table, a
scale per row (the usual embedding: gathered with the rows), one as large as the table, ids of dims known
at run time; a table also read whole (tied embeddings: by the Gemm of a language model's head; by a Neg); a table of
positions (4096, 768) cut to a run's first 128 rows by a Slice whose end is fed, with a scale per column
and per row."""

OPENS = (
    Case((8, 512, 768), (2,), "i8", ("Relu",), symbolic=True),
    Case((4096, 1024), (1,), "u8", ("Relu",), symbolic=True),
    Case((16, 3, 1024, 64), (1, 3), "i8", ("Relu",), symbolic=True),
)
"""A scale per channel over dims of sizes known at run time (a batch, a sequence): one open block, against
the forms that do not block along such a dim."""


def floor(case: Case) -> float:
    """The node's bytes floor: (input + scale + zero point + output bytes) / (input + output bytes)."""
    n, s = int(np.prod(case.shape)), int(np.prod([case.shape[a] for a in case.axes]))
    ib = dtypes.parse(case.in_type).bits / 8
    return (n * (ib + 4) + s * (4 + ib)) / (n * (ib + 4))


def native(m: onnx.ModelProto, case: Case) -> onnx.ModelProto:
    """``m`` with ORT's per-tensor DequantizeLinear (a scalar scale and zero point) for the node: the graph
    measure's baseline, with the same readers (which ORT gives a copy each too)."""
    out = onnx.ModelProto.FromString(m.SerializeToString())
    q = dtypes.parse(case.in_type)
    out.graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0.05, np.float32), "s_n"),
            numpy_helper.from_array(np.array(3, q.numpy), "z_n"),
        ]
    )
    out.graph.node[0].CopyFrom(helper.make_node("DequantizeLinear", ["x", "s_n", "z_n"], ["y"]))
    return out


def model(case: Case) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray], np.ndarray]:
    """The model, its feed, the expected outputs (None: not checked) and the reference's output."""
    rng = np.random.default_rng(0)
    q = dtypes.parse(case.in_type)
    lo, hi = (-(2**20), 2**20) if q.name == "i32" else (int(q.min), int(q.max) + 1)  # (i32: ORT's int32 exact)
    x = rng.integers(lo, hi, case.shape).astype(q.numpy)
    ss = tuple(case.shape[a] for a in case.axes)
    s = rng.uniform(0.001, 0.1, ss).astype(np.float32)
    z = rng.integers(lo, hi, ss).astype(q.numpy)
    ref = odq.dequantize(x, s, z, axes=case.axes)
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    fed: dict[str, np.ndarray] = {}
    nodes = [odq.make_node(["x", "s", "z"], ["y"], axes=list(case.axes), name="dq")]
    outs, want = [], []
    for i, op in enumerate(case.readers):
        if op == "output":
            outs.append(helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, list(case.shape)))
            want.append(ref)
            continue
        ins, attrs = ["y"], {}
        if op == "Mul":
            ins.append("y")
        elif op == "Reshape":
            inits.append(numpy_helper.from_array(np.array([-1], np.int64), f"flat{i}"))
            ins.append(f"flat{i}")
        elif op == "Transpose":
            attrs["perm"] = list(range(len(case.shape)))[::-1]
        elif op == "Gather":
            fed[f"ids{i}"] = IDS % case.shape[0]  # fed: a constant one ORT would gather when it loads the model
            ins.append(f"ids{i}")
        elif op == "Gemm":  # a language model's head: one hidden state by the table's rows
            fed[f"h{i}"] = np.random.default_rng(2).standard_normal((1, case.shape[1])).astype(np.float32)
            ins.insert(0, f"h{i}")
            attrs["transB"] = 1
        elif op == "Slice":  # the first SLICED rows, the end fed (a run's length)
            inits.append(numpy_helper.from_array(np.array([0], np.int64), f"start{i}"))
            fed[f"end{i}"] = np.array([SLICED], np.int64)
            ins += [f"start{i}", f"end{i}"]
        nodes.append(helper.make_node(op, ins, [f"r{i}"], **attrs))
        if op == "Gather":
            wanted = np.take(ref, IDS % case.shape[0], axis=0)
        elif op == "Slice":
            wanted = ref[:SLICED]
        elif op == "Gemm":
            wanted = None  # (its sums' order is ORT's)
        else:
            wanted = None if READ[op] is None else READ[op](ref)
        dims = None if case.symbolic else list(ref.shape if wanted is None else wanted.shape)
        dims = [1, case.shape[0]] if op == "Gemm" else dims
        outs.append(helper.make_tensor_value_info(f"r{i}", onnx.TensorProto.FLOAT, dims))
        want.append(wanted)
    if case.x_const:
        inits.append(numpy_helper.from_array(x, "x"))
    else:
        fed = {"x": x, **fed}
    ins = [helper.make_tensor_value_info(k, dtypes.parse(v.dtype).onnx, _dims(case, k, v)) for k, v in fed.items()]
    g = helper.make_graph(nodes, "readers", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", case.opset), opset_import()])
    m.ir_version = 10 if case.opset >= 21 else 8
    return m, fed, want, ref


def _dims(case: Case, name: str, value: np.ndarray) -> list:
    """A fed input's declared dims: by name where ``case.symbolic`` (the quantized ones of ``x`` excepted)."""
    if not case.symbolic:
        return list(value.shape)
    return [d if name == "x" and i in case.axes else f"{name}{i}" for i, d in enumerate(value.shape)]


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


def _exact(runner: bs.Runner, want: list) -> bool:
    runner()
    return all(w is None or np.max(ulp_distance(got, w), initial=0) == 0 for got, w in zip(runner.outs, want))


def _refused_as_before(info, layout):
    """The rule before the pair: a DequantizeLinear ORT's passes would break is refused."""
    hazard = dql.ort_pass_hazard(info, layout)
    return layout if hazard is None else Refusal(hazard)


def _pair_always(info, layout):
    """The pair wherever ORT's passes would break the DequantizeLinear, a constant input's too."""
    hazard = dql.ort_pass_hazard(info, layout)
    return layout if hazard is None else dataclasses.replace(layout, barrier=hazard)


def _known_blocks_only(self, info):
    """The blocked layouts before open blocks: only along an axis of a size known when lowering."""
    return [lay for lay in LAYOUTS(self, info) if lay.quant[lay.axis] or isinstance(lay.view_dims(info)[lay.axis], int)]


LAYOUTS = Blocked.layouts


def measure(case: Case, repeat: int, mode: str) -> dict:
    """One case's two models side by side: ``readers``, the pair toggled; ``hazards``, the pair against the
    last round's rule; ``gathers``, the Gather moved before the node against the node lowered where it is;
    ``opens``, the planner's form against its choice without open blocks, and against the same node over
    known dims."""
    hazard = mode == "hazards"
    m, feed, want, _ = model(case)
    options = LowerOptions(wrap_int32=case.wrap_int32)
    result = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), options)
    lowered, node = result.model, result.nodes[0]
    row = {"case": case.name, "strategy": node.strategy, "runs_saved": node.runs_saved, "barrier": node.barrier}
    if mode in ("gathers", "opens"):
        if mode == "gathers":
            with mock.patch.object(pipeline, "gather_first", lambda *a: {}):
                before = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), options)
        else:
            with mock.patch.object(Blocked, "layouts", _known_blocks_only):
                before = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), options)
        runners = {"with": bs.Runner(lowered, feed), "without": bs.Runner(before.model, feed)}
        if mode == "opens":
            known, *_ = model(dataclasses.replace(case, symbolic=False))
            runners["known"] = bs.Runner(lower_model(known, options).model, feed)
        row["exact"] = all(_exact(r, want) for r in runners.values())
        t = bs.timed(runners, repeat)
        moved = next((n for n in result.nodes if n.gather_moved), node)
        row |= {"before": before.nodes[0].strategy, "moved": moved.gather_moved, "strategy": moved.strategy}
        row |= {"ms_known": t["known"] * 1e3} if mode == "opens" else {}
        row |= {"ms_with": t["with"] * 1e3, "ms_without": t["without"] * 1e3, "ratio": t["with"] / t["without"]}
        return row
    if hazard:
        with mock.patch.object(dql, "ort_pass_barrier", _refused_as_before):
            before = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), options)
        with mock.patch.object(dql, "ort_pass_barrier", _pair_always):
            paired = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), options)
        row["before"] = before.nodes[0].strategy
        with_pair, without, planner_pair = paired.model, before.model, bool(node.barrier)
    else:
        other = toggled(lowered, "y")
        if other is None:
            runners = {"lowered": bs.Runner(lowered, feed), "native": bs.Runner(native(m, case), feed)}
            t = bs.timed(runners, repeat)
            row |= {"exact": _exact(runners["lowered"], want), "note": "ends in a Reshape: no pair applies"}
            row["graph"] = t["lowered"] / t["native"] / floor(case)
            return row
        planner_pair = node.runs_saved > 0
        with_pair, without = (lowered, other) if planner_pair else (other, lowered)
    runners = {"with": bs.Runner(with_pair, feed), "without": bs.Runner(without, feed)}
    row["exact"] = all(_exact(r, want) for r in runners.values())
    if not hazard:
        runners["native"] = bs.Runner(native(m, case), feed)
    t = bs.timed(runners, repeat)
    if not hazard:  # the graph measure: the planner's model over ORT's per-tensor DQL, over the floor
        row["graph"] = t["with" if planner_pair else "without"] / t["native"] / floor(case)
    row |= {
        "planner_pair": planner_pair,
        "dqls_with": optimized_dqls(with_pair),
        "dqls_without": optimized_dqls(without),
        "ms_with": t["with"] * 1e3,
        "ms_without": t["without"] * 1e3,
        "ratio": t["with"] / t["without"],
    }
    return row


def main(argv: list[str] | None = None) -> int:
    args = bs.held_out_args(bs.held_out_parser(__doc__, "case"), argv)
    print(f"# ONNX Runtime {ort.__version__}, {args.threads} thread(s); ratio: with the pair / without")
    rows, wrong = [], 0
    sets = (
        ("several readers", CASES, "readers"),
        ("ORT's passes would break the DQL", HAZARDS, "hazards"),
        ("a Gather or Slice moved before the node (with) or not (without)", GATHERS, "gathers"),
        (
            "dims known at run time: an open block (with) or not (without); known: the same dims declared",
            OPENS,
            "opens",
        ),
    )
    for title, cases, mode in sets:
        hazard = mode == "hazards"
        print(f"\n## {title}")
        for case in (c for c in cases if args.only in c.name):
            for _ in range(args.rounds):
                r = measure(case, args.repeat, mode)
                rows.append(r | {"set": mode})
                wrong += not r["exact"]
                bad = "" if r["exact"] else "  WRONG VALUES"
                if mode in ("gathers", "opens"):
                    after = f" after {r['moved']}" if mode == "gathers" else ""
                    known = f", known {r['ms_known']:.3f} ms" if mode == "opens" else ""
                    print(
                        f"{r['case']}: {r['strategy']}{after}: with* {r['ms_with']:.3f} ms, "
                        f"without ({r['before']}) {r['ms_without']:.3f} ms, ratio {r['ratio']:.3f}{known}{bad}",
                        flush=True,
                    )
                    continue
                if "ratio" not in r:
                    print(f"{r['case']}: {r['strategy']}: {r['note']}; graph {r['graph']:.2f}{bad}", flush=True)
                    continue
                mark = ("*", "") if r["planner_pair"] else ("", "*")
                other = f" ({r['before']})" if hazard else ""
                graph = "" if hazard else f"; graph {r['graph']:.2f}"
                print(
                    f"{r['case']}: {r['strategy']}: with{mark[0]} {r['ms_with']:.3f} ms ({r['dqls_with']} DQL), "
                    f"without{mark[1]}{other} {r['ms_without']:.3f} ms ({r['dqls_without']} DQL), "
                    f"ratio {r['ratio']:.2f}{graph}{bad}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
