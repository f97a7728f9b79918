"""Row switch: over dims known only at run time in the rows the kernels walk (``NodeInfo.row_axes``, after
the first quantization axis), the form planned for long rows (each such dim ``UNKNOWN_DIM``) and the form
planned for narrow ones (``NARROW_DIM``), an ``If`` choosing between them when the model runs
(``branches.py``). Its condition is the narrow form's cost less the long one's, fitted to the cost model as
a function of the input's elements and its rows' length (the product of the unknown row dims, read from its
Shape): a narrow form that expands its scale when the model runs pays that per scale element, where the
long form pays per row, so a small batch of narrow rows keeps the long form. Its cost is the long form's:
the bytes model leaves out the ``If`` and its dozen scalar nodes (4-7 microseconds a run in ORT 1.32), as
it leaves out every Shape; the rule set lists it first, so that it wins its tie with the long form."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from onnx import TensorProto

from ...errors import DequantizeError
from ...graphs import FreshNames
from ..emitter import Emitter
from ..facts import UNKNOWN_DIM, NodeInfo, Reads
from .base import Plan, Refusal, Strategy
from .branches import as_branch, emit_if, reshape_after_cost
from .cast_sub_mul import CastSubMul
from .costs import kernel_cost
from .dql import DQLStrategy
from .shapes import shape_tensor

__all__ = ["RowSwitch", "Switch", "NARROW_DIM", "SWITCH_GAIN"]

NARROW_DIM = 8
"""The size each unknown dim in a row is planned at for the narrow branch."""

SWITCH_GAIN = 1.25
"""How much cheaper than the long form the narrow one must be over rows of ``NARROW_DIM`` (other unknown
dims ``UNKNOWN_DIM``) for the ``If`` to be worth its nodes."""

_SIZES = tuple(1 << k for k in range(UNKNOWN_DIM.bit_length()))
"""The sizes the unknown dims are priced at to fit the condition (1, 2, 4, ... ``UNKNOWN_DIM``)."""


@dataclasses.dataclass(frozen=True)
class Switch:
    """The two forms, and the condition: the narrow form runs where ``weights`` . (n, n / rows, rows, 1) < 0,
    n the input's elements and rows its unknown row dim (``narrow_at``)."""

    long: Plan
    narrow: Plan
    weights: tuple[float, float, float, float]

    def narrow_at(self, others: float, rows: float) -> bool:
        """Whether the narrow form runs for an input whose unknown row dim is ``rows`` and whose other dims make
        ``others`` (n / rows, as the emitted condition computes it)."""
        u, v, w, z = self.weights
        return u * others * rows + v * others + w * rows + z < 0


def _branch(info: NodeInfo, row_dim: int, lead_dim: int = UNKNOWN_DIM) -> NodeInfo:
    """The node as a branch computes it, planned with unknown row dims of ``row_dim`` (the others
    ``lead_dim``). Its readers stay the node's own: where ORT learns the input's dims (a shape it folds, a
    free dimension override), it folds the condition and inlines the branch next to them."""
    return as_branch(info, row_dim=row_dim, lead_dim=lead_dim, reads=Reads())


def run_nodes(info: NodeInfo, plan: Plan, branch: NodeInfo) -> int:
    """How many of ``plan``'s nodes run with the model (those reading the input, or a scale or zero point
    that is not a constant, however indirectly: ORT folds the others when it loads the model)."""
    em = Emitter("count", FreshNames(set()))
    plan.emit(dataclasses.replace(branch, output="y"), em)
    live = {info.x} | {
        t for t, const in ((info.scale, info.scale_const), (info.zero_point, info.zp_const)) if not const
    }
    count = 0
    for node in em.nodes:
        if live.intersection(node.input):
            live.update(node.output)
            count += 1
    return count


def _grid(info: NodeInfo) -> list[tuple[NodeInfo, int]]:
    """The node priced with the row dim and the other unknown dims at each of ``_SIZES``, and the row dim."""
    return [(_branch(info, row, lead), row) for lead in _SIZES for row in _SIZES]


def _fit(info: NodeInfo, long: Plan, narrow: Plan, fixed: float) -> tuple[float, float, float, float]:
    """The narrow form's cost (and ``fixed``, its extra nodes' cost) less the long one's as ``u n + v n / rows
    + w rows + z`` (the forms' bytes are per element, per row walked and per scale element expanded), fitted
    by least squares to the cost model over ``_grid``, each feature scaled to its largest value."""
    features, diffs = [], []
    for at, row in _grid(info):
        n = float(at.size())
        features.append((n, n / row, float(row), 1.0))
        diffs.append(narrow.strategy.cost(at, narrow.choice) - long.strategy.cost(at, long.choice) + fixed)
    a, b = np.array(features), np.array(diffs)
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    coef = np.linalg.lstsq(a / scale, b / max(np.abs(b).max(), 1.0), rcond=None)[0] / scale
    return (float(coef[0]), float(coef[1]), float(coef[2]), float(coef[3]))


class RowSwitch(Strategy[Switch]):
    """``plan_any`` plans a branch among the other strategies (the planner builds this one)."""

    name = "row-switch"
    portable = False  # measured with ONNX Runtime only

    def __init__(self, plan_any: Callable[[NodeInfo], Plan]) -> None:
        self.plan_any = plan_any

    def check(self, info: NodeInfo) -> Switch | Refusal:
        if not info.row_axes:
            return Refusal("no dim known only at run time after a quantization axis")
        if len(info.row_axes) > 1:
            return Refusal("several dims known only at run time in the rows (which is the narrow one is not known)")
        if info.in_type.bits < 8:
            return Refusal("ORT has no Shape kernel for 4-bit types")
        if info.out_type.name == "bf16" and info.opset < 16:
            return Refusal("If has no bf16 output before opset 16")
        if info.reads.fusing:
            return Refusal("a reader may fuse with the DequantizeLinear, which an If would hide from ORT")
        try:
            long = self.plan_any(_branch(info, UNKNOWN_DIM))
            narrow = self.plan_any(_branch(info, NARROW_DIM))
        except DequantizeError as e:
            return Refusal(f"no form for a branch ({e.rule})")
        for plan in (long, narrow):
            if not isinstance(plan.strategy, (DQLStrategy, CastSubMul)):
                return Refusal(f"a branch would take {plan.strategy.name}, not a DequantizeLinear or Cast/Sub/Mul")
        if (long.strategy, long.choice) == (narrow.strategy, narrow.choice):
            return Refusal(f"rows of {NARROW_DIM} take the same form ({long.strategy.name})")
        nodes = run_nodes(info, narrow, _branch(info, NARROW_DIM)) - run_nodes(info, long, _branch(info, UNKNOWN_DIM))
        fixed = nodes * kernel_cost("node")  # the narrow form's extra nodes, each run
        at = _branch(info, NARROW_DIM)
        gain = long.strategy.cost(at, long.choice) / max(narrow.strategy.cost(at, narrow.choice) + fixed, 1.0)
        if gain < SWITCH_GAIN:
            return Refusal(f"over rows of {NARROW_DIM} the long form costs only {gain:.2f}x the narrow one")
        switch = Switch(long, narrow, _fit(info, long, narrow, fixed))
        if not any(switch.narrow_at(at.size() / row, row) for at, row in _grid(info)):
            return Refusal("the fitted condition never takes the narrow form")
        return switch

    def cost(self, info: NodeInfo, choice: Switch) -> float:
        return choice.long.cost + reshape_after_cost(info, self._branches(info, choice))

    def emit(self, info: NodeInfo, choice: Switch, em: Emitter) -> None:
        emit_if(info, em, _condition(info, choice, em), *self._branches(info, choice))

    @staticmethod
    def _branches(info: NodeInfo, choice: Switch) -> list[tuple[Plan, NodeInfo]]:
        """Each form with the facts it was planned with (the then branch first)."""
        return [(choice.narrow, _branch(info, NARROW_DIM)), (choice.long, _branch(info, UNKNOWN_DIM))]


def _condition(info: NodeInfo, choice: Switch, em: Emitter) -> str:
    """``choice``'s condition in few scalar nodes (each costs ORT about half a microsecond): with ``K`` the
    known dims' product, ``P`` the other unknown dims' and ``R`` the row dim, ``n = K P R`` and the
    difference is ``u K P R + v K P + w R + z``, the quadratic form ``[P, R] A [P, R] + b . [P, R] + z``, the
    pair gathered from the input's Shape by one Gather (a 1 appended to it where ``P`` is not one dim)."""
    shape = info.shape or ()
    known = math.prod(d for d in shape if isinstance(d, int))
    (row,) = info.row_axes
    lead = [a for a in range(len(shape)) if not isinstance(shape[a], int) and a != row] or [len(shape)]
    u, v, w, z = choice.weights
    f32 = np.float32
    dims = em.node("Cast", [shape_tensor(em, info.x, shape, info.opset)], hint="dims", to=TensorProto.FLOAT)
    index = np.array([lead, [row] + [len(shape)] * (len(lead) - 1)], np.int64)
    if index.max() == len(shape):
        dims = em.node("Concat", [dims, em.const(np.ones(1, f32), hint="one")], hint="dims", axis=0)
    pr = em.node("Gather", [dims, em.const(index[:, 0] if len(lead) == 1 else index, hint="dim_index")], hint="pr")
    if len(lead) > 1:  # each row of the index's product
        axes = [em.i64([1], "axes")] if info.opset >= 18 else []
        pr = em.node("ReduceProd", [pr, *axes], hint="pr", keepdims=0, **({} if axes else {"axes": [1]}))
    quad = em.const(np.array([[0, u * known / 2], [u * known / 2, 0]], f32), hint="weights")
    lin = em.node("Add", [em.node("MatMul", [pr, quad], hint="quad"), em.const(np.array([v * known, w], f32))])
    diff = em.node("MatMul", [lin, pr], hint="diff")
    return em.node("Less", [diff, em.const(np.array(-z, f32), hint="weight")], hint="narrow")
