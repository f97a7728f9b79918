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
from collections.abc import Callable

import numpy as np
from onnx import TensorProto

from ...errors import DequantizeError
from ..emitter import Emitter
from ..facts import UNKNOWN_DIM, NodeInfo, Reads
from .base import Plan, Refusal, Strategy
from .branches import as_branch, emit_if, reshape_after_cost
from .cast_sub_mul import CastSubMul
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
    n the input's elements and rows the product of its unknown row dims, at least 1 (``narrow_at``)."""

    long: Plan
    narrow: Plan
    weights: tuple[float, float, float, float]

    def narrow_at(self, n: float, rows: float) -> bool:
        """Whether the narrow form runs for an input of ``n`` elements whose unknown row dims make ``rows``."""
        u, v, w, z = self.weights
        return n * (u + v / max(rows, 1.0)) + (w * rows + z) < 0


def _branch(info: NodeInfo, row_dim: int, lead_dim: int = UNKNOWN_DIM) -> NodeInfo:
    """The node as a branch computes it, planned with unknown row dims of ``row_dim`` (the others
    ``lead_dim``). Its readers stay the node's own: where ORT learns the input's dims (a shape it folds, a
    free dimension override), it folds the condition and inlines the branch next to them."""
    return as_branch(info, row_dim=row_dim, lead_dim=lead_dim, reads=Reads())


def _fit(info: NodeInfo, long: Plan, narrow: Plan) -> tuple[float, float, float, float]:
    """The narrow form's cost less the long one's as ``u n + v n / rows + w rows + z`` (each form's bytes are
    per element, per row walked and per scale element expanded), fitted by least squares to the cost model
    with every unknown dim at each of ``_SIZES``, scaled to the largest difference."""
    k = len(info.row_axes)
    features, diffs = [], []
    for lead in _SIZES:
        for row in _SIZES:
            at = _branch(info, row, lead)
            n, rows = float(at.size()), float(row**k)
            features.append((n, n / rows, rows, 1.0))
            diffs.append(narrow.strategy.cost(at, narrow.choice) - long.strategy.cost(at, long.choice))
    a, b = np.array(features), np.array(diffs)
    scale = np.abs(a).max(axis=0)
    coef = np.linalg.lstsq(a / scale, b / np.abs(b).max(), rcond=None)[0] / scale
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
        at = _branch(info, NARROW_DIM)
        gain = long.strategy.cost(at, long.choice) / max(narrow.strategy.cost(at, narrow.choice), 1.0)
        if gain < SWITCH_GAIN:
            return Refusal(f"over rows of {NARROW_DIM} the long form costs only {gain:.2f}x the narrow one")
        return Switch(long, narrow, _fit(info, long, narrow))

    def cost(self, info: NodeInfo, choice: Switch) -> float:
        return choice.long.cost + reshape_after_cost(info, self._branches(info, choice))

    def emit(self, info: NodeInfo, choice: Switch, em: Emitter) -> None:
        f32 = TensorProto.FLOAT
        u, v, w, z = (em.const(np.array(c, np.float32), hint="weight") for c in choice.weights)
        n = em.node("Cast", [em.node("Size", [info.x], hint="n")], hint="n", to=f32)
        shape = shape_tensor(em, info.x, info.shape or (), info.opset)
        dims = em.node("Gather", [shape, em.i64(list(info.row_axes), "row_axes")], hint="row_dims", axis=0)
        rows = em.node("Cast", [em.node("ReduceProd", [dims], hint="rows", keepdims=0)], hint="rows", to=f32)
        one = em.const(np.array(1, np.float32), hint="one")
        per_row = em.node("Div", [v, em.node("Max", [rows, one], hint="rows")], hint="per_row")  # (an empty row: 0)
        per_element = em.node("Add", [per_row, u], hint="per_element")
        fixed = em.node("Add", [em.node("Mul", [rows, w], hint="by_rows"), z], hint="fixed")
        diff = em.node("Add", [em.node("Mul", [n, per_element], hint="by_n"), fixed], hint="diff")
        narrow = em.node("Less", [diff, em.const(np.array(0, np.float32), hint="zero")], hint="narrow")
        emit_if(info, em, narrow, *self._branches(info, choice))

    @staticmethod
    def _branches(info: NodeInfo, choice: Switch) -> list[tuple[Plan, NodeInfo]]:
        """Each form with the facts it was planned with (the then branch first)."""
        return [(choice.narrow, _branch(info, NARROW_DIM)), (choice.long, _branch(info, UNKNOWN_DIM))]
