"""What a strategy is, and what it answers.

A strategy is one small class, like an onnxscript rewrite rule: ``name``, a docstring that states the
form it emits, ``check(info)`` returning a ``Refusal`` (why it does not apply) or its choice (the
layout or row plan it will emit, its own type), ``cost(info, choice)`` (bytes moved, the planner's
measure) and ``emit(info, choice, em)`` that appends nodes computing ``info.output``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ... import dtypes
from ..emitter import Emitter
from ..facts import NodeInfo
from ..unit_axes import UnitAxes, reshape_unit_axes

__all__ = [
    "Refusal",
    "Strategy",
    "Plan",
    "DQL_TYPE",
    "PROPAGATING_OPS",
    "dql_refusal",
    "empty_refusal",
    "reshape_refusal",
    "openvino_refusal",
]

Choice = TypeVar("Choice")
"""What a strategy decided for one node (a ``Layout``, a row plan, a work type), read by ``cost`` and ``emit``."""


@dataclass(frozen=True)
class Refusal:
    """A strategy's no, with the reason (reports show it per node)."""

    reason: str


class Strategy(Generic[Choice]):
    """A lowering form. Subclasses set ``name`` and implement ``check``, ``cost`` and ``emit``."""

    name = "strategy"
    portable = True  # usable with targets "portable" and "openvino"
    ort_fuses = False  # the plain DequantizeLinear that ORT's MatMul/Conv fusions read

    def check(self, info: NodeInfo) -> Refusal | Choice:
        """The choice that lowers ``info`` exactly, or the ``Refusal`` saying why this form cannot."""
        raise NotImplementedError

    def cost(self, info: NodeInfo, choice: Choice) -> float:
        """Bytes the lowered form moves at run time (the planner's measure; lower is better)."""
        raise NotImplementedError

    def emit(self, info: NodeInfo, choice: Choice, em: Emitter) -> None:
        """Append nodes to ``em`` that compute ``info.output`` from the node's inputs."""
        raise NotImplementedError

    def ort_barrier(self, choice: Choice) -> str:
        """Why the form puts a Flatten/Reshape pair after its DequantizeLinear, for reports ("": none)."""
        return ""

    def __repr__(self) -> str:
        return f"<{self.name}>"


@dataclass
class Plan:
    """The chosen strategy with its choice and cost, and why each other strategy was refused or lost."""

    strategy: Strategy[Any]
    choice: Any
    cost: float
    refused: dict[str, str] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)
    unit: UnitAxes = field(default_factory=UnitAxes)  # axes of size 1 planned as the other kind (unit_axes.py)

    def emit(self, info: NodeInfo, em: Emitter) -> None:
        """The chosen form's nodes for ``info``."""
        if self.unit:
            info = reshape_unit_axes(info, self.unit, em)
        self.strategy.emit(info, self.choice, em)


DQL_TYPE = dtypes.parse("f32")
"""The scale/output type of every DequantizeLinear the lowering emits: f16 and bf16 outputs go through an
f32 DequantizeLinear and a Cast (exact for 8-bit inputs; ORT's f16 kernel is 6-10x slower, it has no bf16
kernel, and every opset and runtime reads f32)."""

PROPAGATING_OPS = frozenset({"MaxPool", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice"})
"""Ops ORT 1.32's QDQ propagation moves a per-tensor DequantizeLinear past (its ``CanNodePropagate``), by
inserting a QuantizeLinear before them (the bugs ``dql.ort_pass_hazard`` finds, docs/ort-facts.md);
Flatten, Gather, Expand, Tile, Concat, Pad, Split and DepthToSpace after one were measured to load and
compute right."""


def dql_refusal(info: NodeInfo) -> Refusal | None:
    """Why no DequantizeLinear computes ``info`` exactly (at its opset, in ORT 1.32), or None."""
    q = info.in_type
    if info.out_type.name == "f64":
        return Refusal("DequantizeLinear has no f64 scale or output")
    if q.name == "i32" and not info.int32_wrap:
        return Refusal("DequantizeLinear subtracts i32 in int32 (wraps) and rounds twice")
    if q.name in ("i16", "u16", "i4", "u4") and info.opset < 21:
        return Refusal(f"DequantizeLinear-{info.opset} has no {q.name} input (needs opset 21)")
    if info.opset > 27:
        return Refusal("ORT has no DequantizeLinear-28 kernel")
    return openvino_refusal(info)


def empty_refusal(info: NodeInfo) -> Refusal | None:
    """The refusal of a form that reshapes or expands, for an input known to hold no elements, a dim of 0
    among its known dims (ORT rejects some of them: a blocked DequantizeLinear whose scale was expanded to a
    dim of 0, at its default level), or None: such an input takes ``empty-output``, or where other dims are
    known only at run time a form that neither reshapes nor expands."""
    known = [d for d in info.shape or () if isinstance(d, int)]
    return Refusal("the input is empty (the empty-output form)") if 0 in known else None


def reshape_refusal(info: NodeInfo) -> Refusal | None:
    """Why a form that reshapes the input to dims computed when lowering (a tiling, a span) cannot: it
    needs quantization axes and a known shape, a non-empty input, and an input ORT can Reshape (not
    4-bit); or None."""
    if info.known_shape is None or not info.axes:
        return Refusal("needs quantization axes and a known shape")
    empty = empty_refusal(info)
    if empty:
        return empty
    if info.in_type.bits < 8:
        return Refusal("ORT has no Reshape for 4-bit types")
    return None


def openvino_refusal(info: NodeInfo, *, work: dtypes.DType | None = None) -> Refusal | None:
    """Why OpenVINO (2026.4, CPU) does not compute a Subtract-then-Multiply form of ``info`` exactly
    (``work``: the form's float type), or None; always None for the other targets."""
    if info.target != "openvino":
        return None
    if work is not None and work.name == "f64":
        return Refusal("OpenVINO's CPU computes f64 in f32")
    if info.has_zp and info.zp_const and info.scale_const:
        return Refusal("OpenVINO folds a constant zero point and scale into fma(x, s, -zp*s) (not exact)")
    return None
