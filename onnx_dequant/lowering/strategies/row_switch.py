"""Row switch: over dims known only at run time in the rows the kernels walk (``NodeInfo.row_axes``, after
the first quantization axis), the form planned for long rows (each such dim ``UNKNOWN_DIM``) and the form
planned for narrow ones (``NARROW_DIM``), ``If(rows < threshold)`` choosing between them when the model
runs (``branches.py``); ``rows`` is the product of those dims, read from the input's Shape, and the
threshold the row dim from which the long form costs no more. Its cost is the long form's: the bytes model
leaves out the ``If`` and its shape arithmetic (3-4 microseconds in ORT 1.32), as it leaves out every Shape;
the rule set lists it first, so that it wins its tie with the long form."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

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
"""How much cheaper than the long form the narrow one must be over rows of ``NARROW_DIM`` for the ``If``
to be worth its nodes."""

_ROW_SIZES = tuple(1 << k for k in range(UNKNOWN_DIM.bit_length()))
"""The row dims the threshold is sought among (1, 2, 4, ... ``UNKNOWN_DIM``)."""


@dataclasses.dataclass(frozen=True)
class Switch:
    """The two forms, and the rows (the product of the unknown row dims) below which the narrow one runs."""

    long: Plan
    narrow: Plan
    threshold: int


def _branch(info: NodeInfo, row_dim: int) -> NodeInfo:
    """The node as a branch computes it, planned with unknown row dims of ``row_dim``, read by nothing ORT's
    passes see."""
    return as_branch(info, row_dim=row_dim, consumers=(), reads=Reads())


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

        def cost(plan: Plan, row_dim: int) -> float:
            return plan.strategy.cost(_branch(info, row_dim), plan.choice)

        gain = cost(long, NARROW_DIM) / cost(narrow, NARROW_DIM)
        if gain < SWITCH_GAIN:
            return Refusal(f"over rows of {NARROW_DIM} the long form costs only {gain:.2f}x the narrow one")
        at = next((r for r in _ROW_SIZES if r > NARROW_DIM and cost(long, r) <= cost(narrow, r)), UNKNOWN_DIM)
        return Switch(long, narrow, at ** len(info.row_axes))

    def cost(self, info: NodeInfo, choice: Switch) -> float:
        return choice.long.cost + reshape_after_cost(info, self._branches(info, choice))

    def emit(self, info: NodeInfo, choice: Switch, em: Emitter) -> None:
        shape = shape_tensor(em, info.x, info.shape or (), info.opset)
        dims = em.node("Gather", [shape, em.i64(list(info.row_axes), "row_axes")], hint="row_dims", axis=0)
        rows = em.node("ReduceProd", [dims], hint="rows", keepdims=0)
        threshold = em.const(np.array(choice.threshold, np.int64), hint="threshold")
        narrow = em.node("Less", [rows, threshold], hint="narrow")
        emit_if(info, em, narrow, *self._branches(info, choice))

    @staticmethod
    def _branches(info: NodeInfo, choice: Switch) -> list[tuple[Plan, NodeInfo]]:
        """Each form with the facts it was planned with (the then branch first)."""
        return [(choice.narrow, _branch(info, NARROW_DIM)), (choice.long, _branch(info, UNKNOWN_DIM))]
