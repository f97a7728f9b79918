"""Merged axes: adjacent quantization axes and adjacent broadcast axes merged by Reshape, so that one
run of quantization axes becomes one ``DequantizeLinear`` axis: ``Reshape -> DQL(axis) -> Reshape``."""

from __future__ import annotations

from .base import Emitter, NodeInfo, Strategy
from .dql import Layout, dql_reason, emit_layout, layout_cost, ort_bug_reason
from .shapes import groups

__all__ = ["Merged"]


class Merged(Strategy):
    name = "dql-merged-axes"

    def _layout(self, info: NodeInfo) -> Layout:
        gs = groups(info.rank or 0, info.axes)
        view = tuple(g for _, g in gs)
        quant = tuple(q for q, _ in gs)
        if len(view) == 1:  # every axis is a quantization axis: one flat axis
            return Layout(view, quant, "axis", 0)
        return Layout(view, quant, "axis", quant.index(True))

    def check(self, info: NodeInfo) -> str | None:
        if not info.axes:
            return "the node has no quantization axes"
        if info.rank is None:
            return "the input's rank is unknown"
        gs = groups(info.rank, info.axes)
        if sum(q for q, _ in gs) != 1:
            return "the quantization axes are not adjacent"
        layout = self._layout(info)
        if not layout.reshapes:
            return "nothing to merge (the per-axis form)"
        if info.in_type.bits < 8:
            return "ORT has no Reshape for 4-bit types"
        return dql_reason(info) or ort_bug_reason(info, info.scale_size, reshape_after=True)

    def cost(self, info: NodeInfo) -> float:
        return layout_cost(info, self._layout(info))

    def emit(self, info: NodeInfo, em: Emitter) -> None:
        emit_layout(info, em, self._layout(info))
