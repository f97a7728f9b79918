#!/usr/bin/env python3
"""Every lowering form, forced, in the graphs it meets in the world: ORT at its default level against the reference.

    python scripts/check_forms.py                  # 1000 random nodes (about 30 s)
    python scripts/check_forms.py --seed 1 --cases 1000 --json OUT.json

Each case is one Dequantize node (ranks 1-4, some with a dim of 300-3000 so that the forms for larger inputs
apply; random axes; i8/u8/i16/u16/i32 inputs, i32 with and without ``wrap_int32``; f32 or f16 outputs; opsets
13/19/21/25; zero point or none; input, scale and zero point constant or fed, a fed input's dims other than
the quantized ones declared by name in some, their sizes known only at run time) read by one or two of Relu,
Reshape, Transpose (naming its perm), Unsqueeze, Slice, Identity, a no-op ONNX Runtime removes (Dropout, a
Cast to the same type, a Mul by one) before one of those, a Mul by itself, a Gather of two rows (a Gather and
a Slice are moved before the node where they can be), or returned as it is (where two nodes read a
DequantizeLinear, the lowering may add a Flatten/Reshape pair after it so that ONNX Runtime runs it once, and
it adds one where ONNX Runtime's QDQ passes would break the DequantizeLinear: the report counts those models);
in some, the Scan's and the i32 guard's size floors are lifted so that those forms apply to small inputs; some
nodes sit in a model-local function or in the branch of an ``If`` of a constant condition, both of which ONNX
Runtime inlines before its other passes.
The planner's form and every other form that applies are lowered in turn (``strategies=[name]``; a model
the planner also chose runs once) and run by ONNX Runtime at its default optimization level, whose graph
transformers (QDQ propagation, the Transpose optimizer, DequantizeLinear duplication) rewrite what the
lowering emitted; each output must match ``odq.dequantize`` bit for bit (1 ULP where docs/precision.md
allows it). The property test (``tests/test_lowering_property.py``) draws inputs of a few elements, where
most forms do not apply.

Prints each failure (the lowering crashed, the model failed to load, or a wrong value) with its case;
exit 0 when there is none, 1 otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

import onnx_dequant as odq  # noqa: E402
from onnx_dequant import dtypes  # noqa: E402
from onnx_dequant.compare import ulp_distance  # noqa: E402
from onnx_dequant.exactness import ort_exact  # noqa: E402
from onnx_dequant.lowering import LowerOptions, lower_model  # noqa: E402
from onnx_dequant.lowering.planner import STRATEGIES  # noqa: E402
from onnx_dequant.lowering.strategies import chunked, guarded  # noqa: E402

READERS = (
    "Relu",
    "Reshape",
    "Transpose",
    "Unsqueeze",
    "Slice",
    "Identity",
    "Dropout+Reshape",
    "Cast+Transpose",
    "Mul1+Unsqueeze",
    "Square",
    "Gather",
    "output",
)
"""What reads the node's output: an op, two in a row (the first one ONNX Runtime removes as a no-op: a
Dropout, a Cast to the same type, a Mul by one), a Mul of the output by itself (``Square``: two reads by
one node), a Gather of two rows along axis 0 (which the lowering moves before the node where it can),
or the graph's output itself. The Transpose names its
perm (the dims reversed): ORT's Transpose optimizer leaves one without it alone."""


@dataclass
class Case:
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    in_type: str
    out_type: str
    opset: int
    zero_point: bool
    x_const: bool
    params_const: bool
    wrap_int32: bool
    readers: tuple[str, ...]
    any_size: bool  # the Scan's and the i32 guard's size floors lifted, so that they apply to small inputs
    holder: str  # where the node is: "main", a model-local "function" or the "branch" of If(true)
    seed: int
    symbolic: bool = False  # a fed input's dims other than the quantized ones declared by name

    def __str__(self) -> str:
        consts = [n for n, c in (("x", self.x_const), ("scale", self.params_const)) if c]
        return (
            f"{self.shape} {{{','.join(map(str, self.axes))}}} {self.in_type}->{self.out_type} opset {self.opset}"
            f"{' zp' if self.zero_point else ''}{' wrap_int32' if self.wrap_int32 else ''}"
            f" const:{'+'.join(consts) or '-'} -> {'+'.join(self.readers)}{' any size' if self.any_size else ''}"
            f"{'' if self.holder == 'main' else ' in a ' + self.holder}{' symbolic' if self.symbolic else ''}"
            f" (seed {self.seed})"
        )


@dataclass
class Failure:
    form: str
    what: str  # "load" or "value"
    detail: str
    case: str = ""


@dataclass
class Outcome:
    runs: Counter = field(default_factory=Counter)  # models run, by form
    once: int = 0  # of those, models whose DequantizeLinear a Flatten/Reshape pair has run once
    barrier: int = 0  # of those, models whose DequantizeLinear a Flatten/Reshape pair keeps ORT's passes off
    gathered: int = 0  # of those, models whose Gather or Slice reader was moved before the node
    failures: list[Failure] = field(default_factory=list)


def draw(rng: np.random.Generator, seed: int, max_elements: int | None = None) -> Case:
    """A random case (see the module's docstring); its large dim cut so that the input holds at most
    ``max_elements`` when given."""
    rank = int(rng.integers(1, 5))
    shape = [int(d) for d in rng.integers(1, 6, rank)]
    if rng.random() < 0.4:
        big = int(rng.integers(0, rank))
        shape[big] = int(rng.integers(300, 3000))
        if max_elements is not None:
            shape[big] = max(1, min(shape[big], max_elements // max(1, math.prod(shape) // shape[big])))
    axes = tuple(sorted(int(a) for a in rng.choice(rank, int(rng.integers(0, rank + 1)), replace=False)))
    in_type = str(rng.choice(["i8", "u8", "i16", "u16", "i32", "i32"]))
    out_type = str(rng.choice(["f32", "f32", "f16"]))
    opset = int(rng.choice([13, 19, 21, 25]))
    if in_type in ("i16", "u16"):
        opset = max(opset, 21)
    readers = tuple(str(r) for r in rng.choice(READERS, int(rng.integers(1, 3)), replace=False))
    if out_type == "f16":  # ORT has no f16 Relu kernel, and its f16 Mul rounds through float32
        readers = tuple(r for r in readers if r not in ("Relu", "Square")) or ("output",)
    return Case(
        tuple(shape),
        axes,
        in_type,
        out_type,
        opset,
        zero_point=bool(rng.random() < 0.6),
        x_const=bool(rng.random() < 0.25),
        params_const=bool(rng.random() < 0.7),
        wrap_int32=in_type == "i32" and bool(rng.random() < 0.5),
        readers=readers,
        any_size=bool(rng.random() < 0.3),
        holder=str(rng.choice(["main", "main", "main", "function", "branch"])),
        seed=seed,
        symbolic=bool(rng.random() < 0.3),
    )


def values(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The case's input, scale and zero point (i32 values within +-2**22, where ORT's int32 semantics
    and the reference's agree, unless the seed says otherwise for an exact node)."""
    rng = np.random.default_rng(case.seed)
    q, r = dtypes.parse(case.in_type), dtypes.parse(case.out_type)
    ss = tuple(case.shape[a] for a in case.axes)
    x = rng.integers(int(q.min), int(q.max) + 1, size=case.shape).astype(q.numpy)
    s = np.asarray(rng.standard_normal(ss) * np.exp2(rng.integers(-8, 8, ss))).astype(r.numpy)
    z = rng.integers(int(q.min), int(q.max) + 1, size=ss).astype(q.numpy) if case.zero_point else None
    if q.name == "i32" and (case.wrap_int32 or rng.random() < 0.7):
        x >>= 9
        if z is not None:
            z >>= 9
    return x, s, z


def model(case: Case, x: np.ndarray, s: np.ndarray, z: np.ndarray | None) -> tuple[onnx.ModelProto, dict]:
    """The case's model and the feeds it takes."""
    inputs, inits, feeds = [], [], {}

    def add(name: str, arr: np.ndarray, const: bool) -> None:
        if const:
            inits.append(numpy_helper.from_array(arr, name))
        else:
            dims = [
                f"{name}{i}" if case.symbolic and name == "x" and i not in case.axes else d
                for i, d in enumerate(arr.shape)
            ]
            inputs.append(helper.make_tensor_value_info(name, dtypes.parse(arr.dtype).onnx, dims))
            feeds[name] = arr

    def i64(name: str, v: list[int]) -> str:
        inits.append(numpy_helper.from_array(np.array(v, np.int64), name))
        return name

    add("x", x, case.x_const)
    add("s", s, case.params_const)
    names = ["x", "s"]
    if z is not None:
        add("z", z, case.params_const)
        names.append("z")
    out_t = dtypes.parse(case.out_type)
    dq = odq.make_node(names, ["t"], axes=case.axes, name="dq")
    opsets = [helper.make_opsetid("", case.opset), helper.make_opsetid(odq.DOMAIN, 1)]
    functions = []
    if case.holder == "function":  # a model-local function holding the node, which ORT inlines
        functions.append(helper.make_function("local", "F", names, ["t"], [dq], opsets))
        nodes = [helper.make_node("F", names, ["t"], domain="local")]
    elif case.holder == "branch":  # the then-branch of an If whose condition is a constant true
        then = helper.make_graph([odq.make_node(names, ["u"], axes=case.axes, name="dq")], "then", [], [])
        then.output.append(helper.make_tensor_value_info("u", out_t.onnx, None))
        other = helper.make_graph([helper.make_node("Cast", ["x"], ["v"], to=out_t.onnx)], "else", [], [])
        other.output.append(helper.make_tensor_value_info("v", out_t.onnx, None))
        inits.append(numpy_helper.from_array(np.array(True), "cond"))
        nodes = [helper.make_node("If", ["cond"], ["t"], then_branch=then, else_branch=other)]
    else:
        nodes = [dq]
    outs = []
    for i, reader in enumerate(case.readers):
        if reader == "output":
            outs.append(helper.make_tensor_value_info("t", out_t.onnx, None))
            continue
        src = "t"
        for j, r in enumerate(reader.split("+")):
            o = f"y{i}_{j}"
            if r == "Reshape":
                nodes.append(helper.make_node(r, [src, i64(f"shape{i}", [-1])], [o]))
            elif r == "Unsqueeze":
                nodes.append(helper.make_node(r, [src, i64(f"axes{i}", [0])], [o]))
            elif r == "Slice":
                nodes.append(helper.make_node(r, [src, i64(f"s{i}", [0]), i64(f"e{i}", [1]), i64(f"a{i}", [0])], [o]))
            elif r == "Transpose":
                nodes.append(helper.make_node(r, [src], [o], perm=list(range(len(case.shape)))[::-1]))
            elif r == "Cast":
                nodes.append(helper.make_node(r, [src], [o], to=out_t.onnx))
            elif r == "Square":
                nodes.append(helper.make_node("Mul", [src, src], [o]))
            elif r == "Gather":
                nodes.append(helper.make_node(r, [src, i64(f"rows{i}", [case.shape[0] - 1, 0])], [o], axis=0))
            elif r == "Mul1":
                k = numpy_helper.from_array(np.array(1, out_t.numpy), f"one{i}")
                inits.append(k)
                nodes.append(helper.make_node("Mul", [src, k.name], [o]))
            else:
                nodes.append(helper.make_node(r, [src], [o]))
            src = o
        outs.append(helper.make_tensor_value_info(src, out_t.onnx, None))
    g = helper.make_graph(nodes, "g", inputs, outs, inits)
    imports = opsets + [helper.make_opsetid("local", 1)] * bool(functions)
    m = helper.make_model(g, opset_imports=imports, functions=functions)
    m.ir_version = 8 if case.opset < 21 else 10
    return m, feeds


def expected(ref: np.ndarray, reader: str) -> np.ndarray:
    """What ``reader`` makes of the node's output (the last op of a chain; the ops before it are no-ops)."""
    reader = reader.split("+")[-1]
    if reader == "Relu":
        return np.maximum(ref, 0)
    if reader == "Reshape":
        return ref.reshape(-1)
    if reader == "Transpose":
        return ref.transpose()
    if reader == "Unsqueeze":
        return ref[None]
    if reader == "Slice":
        return ref[0:1]
    if reader == "Square":
        return ref * ref
    if reader == "Gather":
        return np.take(ref, [ref.shape[0] - 1, 0], axis=0)
    return ref


@contextlib.contextmanager
def size_floors(lifted: bool) -> Iterator[None]:
    """With ``lifted``, the Scan (``CHUNK_MIN``) and the i32 guard (``GUARD_MIN``) take inputs of any size."""
    saved = chunked.CHUNK_MIN, guarded.GUARD_MIN
    if lifted:
        chunked.CHUNK_MIN, guarded.GUARD_MIN = 1, 1
    try:
        yield
    finally:
        chunked.CHUNK_MIN, guarded.GUARD_MIN = saved


def check(case: Case) -> Outcome:
    """The planner's form and each other form that applies, run by ORT at its default level."""
    x, s, z = values(case)
    ref = odq.dequantize(x, s, z, axes=case.axes)
    ulps = 0 if ort_exact(dtypes.parse(case.in_type), dtypes.parse(case.out_type))[0] else 1
    m, feeds = model(case, x, s, z)
    out = Outcome()
    planned = None
    for name in [None] + [st.name for st in STRATEGIES]:
        options = LowerOptions(wrap_int32=case.wrap_int32, strategies=None if name is None else [name])
        try:
            with size_floors(case.any_size):
                result = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), options)
        except odq.DequantizeError:
            if name is None:  # no form at all: counted, not skipped unseen
                out.runs["no form"] += 1
            continue  # the form does not apply
        except Exception as e:  # noqa: BLE001 - a crash of the lowering is a finding too
            out.failures.append(Failure(name or "planner", "lower", f"{type(e).__name__}: {e}"[:300], str(case)))
            continue
        form = result.nodes[0].strategy
        if name is None:
            planned = form
        elif form != name or form == planned:
            continue  # another form, or the planner's own (run once, as the planner's)
        label = f"planner: {form}" if name is None else form
        out.runs[label] += 1
        out.once += result.nodes[0].runs_saved > 0
        out.barrier += bool(result.nodes[0].barrier)
        out.gathered += bool(result.nodes[0].gather_moved)
        so = ort.SessionOptions()
        so.log_severity_level = 4
        try:
            got = ort.InferenceSession(result.model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
                None, feeds
            )
        except Exception as e:  # noqa: BLE001 - a model ORT cannot load or run is the finding
            out.failures.append(Failure(label, "load", str(e).splitlines()[0][:300], str(case)))
            continue
        for reader, y in zip(case.readers, got):
            want = expected(ref, reader)
            if y.shape != want.shape or np.max(ulp_distance(y, want), initial=0) > ulps:
                detail = f"{reader}: shape {y.shape}" if y.shape != want.shape else f"{reader}: over {ulps} ULP"
                out.failures.append(Failure(label, "value", detail, str(case)))
                break
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="case draw")
    p.add_argument("--cases", type=int, default=1000, help="random nodes to check")
    p.add_argument("--max-elements", type=int, metavar="N", help="cut the large dims to inputs of at most N elements")
    p.add_argument("--json", metavar="FILE", help="write the runs and failures as JSON")
    args = p.parse_args(argv)
    if args.cases < 1:
        p.error("--cases must be at least 1")
    if args.seed < 0:
        p.error("--seed must be 0 or more")
    if args.max_elements is not None and args.max_elements < 1:
        p.error("--max-elements must be at least 1")
    ort.set_default_logger_severity(4)
    rng = np.random.default_rng(args.seed)
    total = Outcome()
    t0 = time.perf_counter()
    for i in range(args.cases):
        case = draw(rng, args.seed * 1_000_003 + i, args.max_elements)
        got = check(case)
        total.runs.update(got.runs)
        total.once += got.once
        total.barrier += got.barrier
        total.gathered += got.gathered
        total.failures.extend(got.failures)
        if (i + 1) % 25 == 0 or i + 1 == args.cases:
            print(
                f"[{i + 1}/{args.cases}] {sum(total.runs.values())} models, {len(total.failures)} failures",
                file=sys.stderr,
                flush=True,
            )
    runs = sum(total.runs.values())
    print(
        f"ONNX Runtime {ort.__version__}, default optimization level: {runs} lowered models from {args.cases} "
        f"nodes in {time.perf_counter() - t0:.0f} s"
    )
    for form, n in sorted(total.runs.items()):
        print(f"  {form:30s} {n}")
    print(f"  of those, run once by a Flatten/Reshape pair after the DequantizeLinear: {total.once}")
    print(f"  of those, ORT's QDQ passes kept off the DequantizeLinear by such a pair: {total.barrier}")
    print(f"  of those, a Gather or Slice moved before the node: {total.gathered}")
    print(f"{len(total.failures)} failure(s)")
    for f in total.failures:
        print(f"  {f.form}: {f.what}: {f.detail}\n    {f.case}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "args": vars(args),
                    "ort": ort.__version__,
                    "runs": dict(total.runs),
                    "run_once": total.once,
                    "barrier": total.barrier,
                    "gathered": total.gathered,
                    "failures": [asdict(f) for f in total.failures],
                },
                fh,
                indent=1,
            )
    return 1 if total.failures else 0


if __name__ == "__main__":
    sys.exit(main())
