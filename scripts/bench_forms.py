"""Lowering forms of one case side by side: each strategy named in ``--forms`` forced on the same node,
timed in one run (interleaved, medians) against ORT's per-tensor DequantizeLinear in the same graph, as
``bench_sweep.py`` measures ``graph`` (``--standalone``: the node's output a graph output). Ratios are not
divided by the bytes floor: they compare forms, not cases. The planner's choice is printed beside them; a
form that refuses the node is shown as `-` (its reason in `--json`).

    python scripts/bench_forms.py 2048567,5:1:u8 74,7,3,8,12,3:5:i8:nozp,input --forms dql-blocked,dql-tiled
    python scripts/bench_forms.py 2048567,5:1:u8 --forms dql-blocked,dql-tiled --standalone --json f.json
    python scripts/bench_forms.py 764,14,137:0,1:u8 --forms all      # every form that applies
    python scripts/bench_forms.py 5371507::i32:nozp --forms planner --checks   # the i32 guard's two checks

A case is ``SHAPE:AXES:IN[:FLAGS]``, FLAGS a comma-separated subset of ``nozp`` (no zero point),
``input`` (scale and zero point fed as graph inputs, not initializers) and one output type (``f16``,
``bf16``, ``f64``; f32 when none is named). The baseline is ORT's per-tensor DequantizeLinear to f32
either way (it has no bf16 or f64 output). ``--forms planner`` is the planner's own choice. ``--checks``
times each form twice, its i32 guards' checks (``strategies/guarded.py``) forced to reduce the input as
int32 (``form [i32]``) and through float32 (``form [f32]``), whatever the calibrated table says.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_sweep as bs  # noqa: E402

from onnx_dequant import DequantizeError, contract, dtypes  # noqa: E402
from onnx_dequant.lowering import STRATEGIES, LowerOptions, lower_model  # noqa: E402
from onnx_dequant.lowering.strategies import guarded  # noqa: E402

OUTPUTS = ("f16", "bf16", "f64")


def parse_case(text: str) -> bs.Case:
    """``SHAPE:AXES:IN[:FLAGS]`` as a sweep case (f32 output unless FLAGS name another)."""
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise SystemExit(f"bench_forms: a case is SHAPE:AXES:IN[:FLAGS], not {text!r}")
    flags = set(parts[3].split(",")) if len(parts) == 4 else set()
    known = {"nozp", "input", *OUTPUTS}
    outs = sorted(flags & set(OUTPUTS))
    if flags - known or len(outs) > 1:
        raise SystemExit(f"bench_forms: flags must be among {sorted(known)}, one output at most, not {text!r}")
    if parts[2] in ("i4", "u4"):  # as in the sweep: ORT's Python API takes no 4-bit input
        raise SystemExit(f"bench_forms: 4-bit inputs cannot be fed to ORT from Python, not {text!r}")
    out = outs[0] if outs else "f32"
    try:  # a dim or axis that is not a number, an unknown type, axes the op's contract refuses
        shape = tuple(int(v) for v in parts[0].split(",") if v)
        axes = contract.normalize_axes(int(v) for v in parts[1].split(",") if v)
        in_type = dtypes.parse(parts[2])
        if not in_type.is_quantized or 0 in shape:
            raise ValueError(f"the input must be non-empty, of a quantized type ({in_type} {shape})")
        contract.infer((in_type, shape), (out, None), axes=axes)  # (the scale is the axes' dims)
    except (ValueError, DequantizeError) as e:
        raise SystemExit(f"bench_forms: {e}, not {text!r}") from None
    return bs.Case(shape, axes, "forms", parts[2], out, "nozp" not in flags, "input" in flags)


def spec(case: bs.Case) -> str:
    """``case`` as ``SHAPE:AXES:IN[:FLAGS]`` (what ``parse_case`` reads back)."""
    flags = [f for f, on in (("nozp", not case.zero_point), ("input", case.scale_input)) if on]
    flags += [case.out_type] if case.out_type != "f32" else []
    text = f"{','.join(map(str, case.shape))}:{','.join(map(str, case.axes))}:{case.in_type}"
    return text + (f":{','.join(flags)}" if flags else "")


def command(case: bs.Case, forms: Sequence[str], standalone: bool, rounds: int = 3, checks: bool = False) -> str:
    """The command line that times ``forms`` on ``case`` (``checks``: each with either i32 check)."""
    flags = (" --standalone" if standalone else "") + (" --checks" if checks else "")
    return f"python scripts/bench_forms.py {spec(case)} --forms {','.join(forms)}{flags} --rounds {rounds}"


@contextlib.contextmanager
def checked_as(as_f32: bool | None) -> Iterator[None]:
    """Lowering inside: the i32 guard's checks as int32 (False) or through float32 (True); None: as the
    table says."""
    table = guarded.checks_as_f32
    if as_f32 is not None:
        guarded.checks_as_f32 = lambda info: as_f32  # type: ignore[assignment]
    try:
        yield
    finally:
        guarded.checks_as_f32 = table


def measure(case: bs.Case, forms: list[str], standalone: bool, repeat: int, checks: bool = False) -> dict:
    """Each form's time over ORT's per-tensor DequantizeLinear, and the planner's own choice (``checks``:
    each form with either i32 check)."""
    x, s, z = bs.data(case)
    feed = {"x": x} | ({"s": s} | ({"z": z} if z is not None else {}) if case.scale_input else {})
    consumer = None if standalone else "Relu"
    m = bs.model(case, s, z, consumer=consumer)
    planned = lower_model(onnx.ModelProto.FromString(m.SerializeToString()), LowerOptions()).nodes[0]
    if "all" in forms:  # every form that applies to the node, in the place of "all"
        i = forms.index("all")
        forms = forms[:i] + [st.name for st in STRATEGIES if st.name not in planned.refused] + forms[i + 1 :]
    f32 = dataclasses.replace(case, out_type="f32")
    runners = {"per-tensor DQL": bs.Runner(bs.model(f32, s, z, consumer=consumer, native=True), {"x": x})}
    forms = list(dict.fromkeys(planned.strategy if f == "planner" else f for f in forms))  # each once
    refused = {name: planned.refused[name] for name in forms if name in planned.refused}
    variants = ((" [i32]", False), (" [f32]", True)) if checks else (("", None),)
    for name in (f for f in forms if f not in refused):
        for suffix, as_f32 in variants:
            copy = onnx.ModelProto.FromString(m.SerializeToString())
            with checked_as(as_f32):
                lowered = lower_model(copy, LowerOptions(strategies=[name])).model
            runners[name + suffix] = bs.Runner(lowered, feed)
    t = bs.timed(runners, repeat)
    base = t.pop("per-tensor DQL")
    return {
        "case": case.name,
        "planner": planned.strategy,
        "ratios": {name: v / base for name, v in t.items()},
        "refused": refused,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", help="SHAPE:AXES:IN[:FLAGS]")
    ap.add_argument(
        "--forms", required=True, help="comma-separated strategy names, all (every one that applies) or planner"
    )
    ap.add_argument("--checks", action="store_true", help="each form with the i32 guard's int32 and float32 checks")
    ap.add_argument("--standalone", action="store_true", help="the node's output is the graph's output")
    ap.add_argument("--repeat", type=bs.count, default=5, help="timed samples per form (median taken)")
    ap.add_argument("--rounds", type=bs.count, default=3, help="measure each case this many times")
    ap.add_argument("--json", metavar="FILE", help="write every round's ratios as JSON")
    args = ap.parse_args(argv)
    forms = [f for f in args.forms.split(",") if f]
    known = {st.name for st in STRATEGIES} | {"all", "planner"}
    if unknown := [f for f in forms if f not in known]:
        ap.error(f"--forms: unknown form(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    out = []
    for case in [parse_case(text) for text in args.cases]:  # every case read before any is timed
        for _ in range(args.rounds):
            r = measure(case, forms, args.standalone, args.repeat, args.checks)
            out.append(r)
            cells = "  ".join([f"{k} {v:.2f}" for k, v in r["ratios"].items()] + [f"{k} -" for k in r["refused"]])
            print(f"{r['case']}: {cells}  (planner: {r['planner']})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
