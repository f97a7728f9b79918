"""Guarded i32: an exact i32 input whose values (and zero point) lie within +-2**23 at run time is computed by
a DequantizeLinear as the float64 form computes it: the int32 difference then cannot wrap (|x - zp| < 2**24)
and float32 holds it, so the f32 product is rounded once from the exact one, as in the reference (f16/bf16
outputs: the Cast after it rounds again, as the float64 form's Cast does, to the same bits). ``ReduceMax``
and ``ReduceMin`` of the input (and of a fed zero point) check that when the model runs, and an ``If`` runs
the best DequantizeLinear form (then) or the best exact float64 form (else), at the cost of the
DequantizeLinear and the check where the values are small, as quantized int32 tensors (biases, accumulators)
are. The check reduces the input as it is or cast to float32, whichever the calibrated table says is cheaper
where it reads the input from: the last-level cache where that check's footprint (the input, and the float32
copy a float32 check writes) fits ``CHECKED_CACHE_BYTES`` (``check_i32_cached``, ``check_f32_cached``),
memory where it does not (``check_i32``, ``check_f32``). ORT 1.32 reduces int32 an element at a time (a loop
nearly as fast from memory as from cache) and float32 with vector instructions after a Cast that writes a
float32 copy (three passes, fast from cache, twice the traffic of the two int32 ones from memory). The Cast
rounds, but monotonically, and 2**23 is a float32: ``max(float32(x)) < 2**23`` exactly when ``max(x) <
2**23``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from onnx import TensorProto

from ...errors import DequantizeError
from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Plan, Refusal, Strategy
from .branches import as_branch, emit_if, reshape_after_cost
from .costs import kernel_cost

__all__ = [
    "Guarded",
    "Branches",
    "BOUND",
    "GUARD_MIN",
    "CHECKED_CACHE_BYTES",
    "checks_as_f32",
    "runs_in_cache",
]

BOUND = 1 << 23
"""Inputs and zero points strictly within +-BOUND take the DequantizeLinear branch."""

GUARD_MIN = 2048
"""Inputs of fewer elements keep the float64 form: there the check's six to thirteen nodes cost ORT more
than the float64 work they save (in a graph, per tensor, with the int32 check on an Intel Xeon: 512
elements 1.57x ORT's DequantizeLinear against 1.18x, 2048 even, 8192 1.97x against 2.93x; with the
float32 check on an AMD EPYC znver5: 2048 1.81x against 1.56x, 4096 even with a zero point and 1.87x
against 1.57x without, 8192 1.92x against 2.21x with and even without;
``bench_forms.py 2048::i32 --forms i32-guarded,cast-sub-mul``)."""


CHECKED_CACHE_BYTES = 16 << 20
"""The share of the last-level cache (16 MiB) a guard's passes find their data in: where a check's footprint
(the int32 input, and the float32 copy of it that a float32 check writes) fits, that check is priced by its
calibrated cost from cache, and the whole guard's passes and its DequantizeLinear read the input from
cache (``chunked.py`` then charges a Scan's rows no saving: in a graph, and standalone where the check is
the int32 one). Measured on a 2-core AMD EPYC Zen 4 with 32 MB of L3, ORT 1.32, 2026-12-06, per-tensor
int32 in a graph over ORT's DequantizeLinear: with the float32 check, the whole guard against the Scan
2.26x / 2.40x at 0.5M elements, 2.23 / 2.39 at 1M, 1.97 / 1.90 at 2M, 1.85 / 1.68 at 4M, 1.95 / 1.44 at 8M
(``bench_forms.py N,1024::i32:nozp --forms i32-guarded,scan-chunked``); with the int32 check, even at 4M in
rows of 128K-1M and 0.90-0.95x the Scan's time in rows of 64K-92K, the Scan 0.91-0.94x the whole guard's
from 8M. The int32 check's time over the float32 one's, whole or in a Scan (``bench_forms.py CASE --forms
planner --checks``): 1.0-1.2 up to 1.3M elements, 0.58-0.95 from 3M."""


def _footprint(info: NodeInfo, as_f32: bool) -> float:
    """The bytes a check's passes touch: the whole input (a Scan row's, the input it is a row of), and the
    float32 copy a float32 check writes."""
    n = info.size() if info.whole_size is None else info.whole_size
    return n * info.in_type.bits / 8 * (2 if as_f32 else 1)


def _check_costs(info: NodeInfo) -> dict[bool, float]:
    """Each check's calibrated cost per element checked (True: through float32): from cache where its own
    footprint fits ``CHECKED_CACHE_BYTES`` (``check_f32_cached``, ``check_i32_cached``), else from memory
    (``check_f32``, ``check_i32``)."""
    costs = {}
    for as_f32, name in ((True, "check_f32"), (False, "check_i32")):
        cached = _footprint(info, as_f32) <= CHECKED_CACHE_BYTES
        costs[as_f32] = kernel_cost(name + ("_cached" if cached else ""))
    return costs


def checks_as_f32(info: NodeInfo) -> bool:
    """Whether the guard of ``info`` reduces its input cast to float32: the check the calibrated table
    prices lower where each would read it from."""
    costs = _check_costs(info)
    return costs[True] < costs[False]


def runs_in_cache(info: NodeInfo) -> bool:
    """Whether the whole guard's passes read the input from cache: the footprint of the check it takes
    fits ``CHECKED_CACHE_BYTES``."""
    return _footprint(info, checks_as_f32(info)) <= CHECKED_CACHE_BYTES


@dataclasses.dataclass(frozen=True)
class Branches:
    """The If's two forms: a DequantizeLinear one (planned with ORT's int32 semantics, which are exact
    within the bound) and the exact one; whether the zero point is checked at run time; and, for a
    constant input, which form the check chose when lowering (then no If is emitted)."""

    fast: Plan
    exact: Plan
    check_zp: bool
    known: bool | None = None  # a constant input (and zero point): whether it is within, decided here


def _branch(info: NodeInfo, wrap: bool) -> NodeInfo:
    """The node as a branch computes it (``branches.as_branch``), with ORT's int32 semantics in the
    DequantizeLinear branch (``wrap``). Its readers are the branch's output, its form's view kept, unless ORT
    may fold the check and inline the branch (an input the model is not fed: one computed from constants, or
    in a function or subgraph ORT inlines with constant arguments): then they are the node's own, which
    ``dql.ort_pass_hazard`` reads, and the form reshapes its output itself."""
    fed = info.x in info.fed
    return as_branch(info, keep_view=fed, int32_wrap=wrap, consumers=() if fed else info.consumers)


class Guarded(Strategy[Branches]):
    """``plan_fast`` plans among the DequantizeLinear forms, ``plan_exact`` among the exact ones (the
    planner builds this strategy)."""

    name = "i32-guarded"
    portable = False  # ORT's int32 DequantizeLinear is what the bound makes exact

    def __init__(self, plan_fast: Callable[[NodeInfo], Plan], plan_exact: Callable[[NodeInfo], Plan]) -> None:
        self.plan_fast = plan_fast
        self.plan_exact = plan_exact

    def check(self, info: NodeInfo) -> Branches | Refusal:
        if info.in_type.name != "i32" or info.int32_wrap:
            return Refusal("only an exact i32 input (wrap_int32 takes a DequantizeLinear as it is)")
        if info.out_type.name == "f64":
            return Refusal("DequantizeLinear has no f64 output")
        if info.out_type.name == "bf16" and info.opset < 16:
            return Refusal("If has no bf16 output before opset 16")
        check_zp = info.has_zp
        if info.has_zp and info.zp_const and info.read is not None and info.zero_point is not None:
            zp = info.read(info.zero_point)
            if zp is not None:
                top = int(np.abs(zp.astype(np.int64)).max()) if zp.size else 0
                if top >= BOUND:
                    return Refusal(f"the zero point reaches 2**23 (|zp| up to {top})")
                check_zp = False
        x = info.read(info.x) if info.read is not None and not check_zp else None
        try:
            if x is not None:  # a constant input: the check is made here, and the chosen form emitted alone
                within = not x.size or int(np.abs(x.astype(np.int64)).max()) < BOUND
                plan = self.plan_fast(dataclasses.replace(info, int32_wrap=True)) if within else self.plan_exact(info)
                return Branches(plan, plan, False, within)
            if info.known_shape is not None and info.size() < GUARD_MIN:
                return Refusal(f"{info.size()} elements: below {GUARD_MIN} the check costs more than it saves")
            fast = self.plan_fast(_branch(info, True))
            exact = self.plan_exact(_branch(info, False))
        except DequantizeError as e:
            return Refusal(f"no form for a branch ({e.rule})")
        return Branches(fast, exact, check_zp)

    def cost(self, info: NodeInfo, choice: Branches) -> float:
        if choice.known is not None:
            return choice.fast.cost
        # the DequantizeLinear form, and the check: ReduceMax and ReduceMin of the input (or of it cast to f32)
        checked = info.size() + (info.scale_size if choice.check_zp else 0)
        after = reshape_after_cost(info, [(choice.fast, _branch(info, True)), (choice.exact, _branch(info, False))])
        return choice.fast.cost + after + checked * min(_check_costs(info).values())

    def ort_barrier(self, choice: Branches) -> str:
        return choice.fast.strategy.ort_barrier(choice.fast.choice)  # (the pair in its DequantizeLinear form)

    def emit(self, info: NodeInfo, choice: Branches, em: Emitter) -> None:
        if choice.known is not None:
            choice.fast.emit(dataclasses.replace(info, int32_wrap=choice.known), em)
            return
        as_f32 = checks_as_f32(info)
        bound_type = np.float32 if as_f32 else np.int32
        hi = em.const(np.array(BOUND, bound_type), hint="bound")
        lo = em.const(np.array(-BOUND, bound_type), hint="bound")
        checks = [info.x] + ([info.zero_point] if choice.check_zp and info.zero_point is not None else [])
        cond = None
        for t in checks:
            if as_f32:
                t = em.node("Cast", [t], hint="as_f32", to=TensorProto.FLOAT)
            top = em.node("Less", [em.node("ReduceMax", [t], hint="max", keepdims=0), hi], hint="below")
            bottom = em.node("Greater", [em.node("ReduceMin", [t], hint="min", keepdims=0), lo], hint="above")
            within = em.node("And", [top, bottom], hint="within")
            cond = within if cond is None else em.node("And", [cond, within], hint="within")
        emit_if(info, em, cond, (choice.fast, _branch(info, True)), (choice.exact, _branch(info, False)))
