"""Expanded per-axis DequantizeLinear: quantization axes apart, a broadcast axis between them and a wide
broadcast run after them (``(3,2,5,5,2286)`` with axes ``{0,2,3}``). The input is viewed as (the leading
broadcast run, the *span* from the first quantization axis to the last, the trailing broadcast run); the
scale (and zero point) is expanded over the broadcast axes inside the span (a new constant when it is
one, else Reshape -> Expand -> Reshape), so that one per-axis DequantizeLinear along the span computes
the node: ``Reshape -> DequantizeLinear(axis) -> Reshape``. Each span value's scale is the node's own, so
the bits are the same.

ONNX Runtime's per-axis kernel streams each row of the trailing run under one value, where a blocked
DequantizeLinear along that last run walks it one block per row (2.7x slower on the case above)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..emitter import Emitter
from ..facts import NodeInfo
from .base import DQL_TYPE, Refusal, Strategy, dql_refusal, reshape_refusal
from .costs import reshaped_output_cost
from .dql import Layout, emit_layout, layout_cost, reshape
from .shapes import groups

__all__ = ["DQLExpanded", "Span"]


@dataclasses.dataclass(frozen=True)
class Span:
    """The view of the input (leading run, span, trailing run; the runs only where present), the view axis
    of the span, and the span's axes of the input."""

    dims: tuple[int, ...]
    axis: int
    axes: tuple[int, ...]


def _span(info: NodeInfo) -> Span | Refusal:
    """The view that makes the node per-axis, or why it has none."""
    refusal = reshape_refusal(info)
    if refusal:
        return refusal
    shape = info.known_shape or ()
    if sum(q for q, _ in groups(len(shape), info.axes)) < 2:
        return Refusal("the quantization axes are adjacent (the per-axis or merged-axes form)")
    if info.out_type.name == "bf16" and not info.scale_const:
        return Refusal("ORT has no bf16 Expand (for a scale computed at run time)")
    first, last = info.axes[0], info.axes[-1]
    lead, span, trail = shape[:first], shape[first : last + 1], shape[last + 1 :]
    dims = ((math.prod(lead),) if lead else ()) + (math.prod(span),) + ((math.prod(trail),) if trail else ())
    return Span(dims, 1 if lead else 0, tuple(range(first, last + 1)))


def _param(info: NodeInfo, em: Emitter, name: str, const: bool, span: Span) -> str:
    """The scale or zero point ``name`` expanded over the span's broadcast axes, flattened to 1-D."""
    shape = info.known_shape or ()
    placed = [shape[a] if a in info.axes else 1 for a in span.axes]  # its values where the span's axes are
    value = info.read(name) if const and info.read is not None else None
    n = math.prod(shape[a] for a in span.axes)
    if value is not None and value.size == info.scale_size:
        spread = np.broadcast_to(value.reshape(placed), [shape[a] for a in span.axes]).reshape(n)
        return em.const(spread, value.dtype, hint="spread")
    p = reshape(em, info, name, em.i64(placed), hint="placed")
    p = em.node("Expand", [p, em.i64([shape[a] for a in span.axes], "span")], hint="expanded")
    return reshape(em, info, p, em.i64([n]), hint="spread")


class DQLExpanded(Strategy[Span]):
    name = "dql-expanded"

    def check(self, info: NodeInfo) -> Span | Refusal:
        return dql_refusal(info) or _span(info)

    @staticmethod
    def _viewed(info: NodeInfo, span: Span) -> tuple[NodeInfo, Layout]:
        """The node as the per-axis DequantizeLinear over the view computes it (no Reshape of its own)."""
        viewed = dataclasses.replace(info, shape=span.dims, axes=(span.axis,), graph_output=False)
        view = tuple((i,) for i in range(len(span.dims)))
        return viewed, Layout(view, tuple(i == span.axis for i in range(len(view))), "axis", span.axis)

    def cost(self, info: NodeInfo, choice: Span) -> float:
        viewed, layout = self._viewed(info, choice)
        # a fed scale (and zero point) is expanded at run time: written once, read by the kernel
        param_bytes = DQL_TYPE.bits / 8 + (max(info.in_type.bits, 8) / 8 if info.has_zp else 0)
        expand = 0.0 if info.scale_const else choice.dims[choice.axis] * param_bytes
        return layout_cost(viewed, layout) + expand + reshaped_output_cost(info)

    def emit(self, info: NodeInfo, choice: Span, em: Emitter) -> None:
        viewed, layout = self._viewed(info, choice)
        viewed = dataclasses.replace(
            viewed,
            x=reshape(em, info, info.x, em.i64(list(choice.dims)), hint="view"),
            scale=_param(info, em, info.scale, info.scale_const, choice),
            zero_point=(
                _param(info, em, info.zero_point, info.zp_const, choice)
                if info.has_zp and info.zero_point is not None
                else None
            ),
            output=em.fresh("y_view"),
            zp_zero=False,
        )
        emit_layout(viewed, em, layout)
        reshape(em, info, viewed.output, em.i64(list(info.known_shape or ())), info.output, hint="y")
