"""Merged axes: adjacent quantization axes and adjacent broadcast axes merged by Reshape, so that one
run of quantization axes becomes one ``DequantizeLinear`` axis: ``Reshape -> DQL(axis) -> Reshape``."""

from __future__ import annotations

from .base import NodeInfo
from .dql import DQLStrategy, Layout
from .shapes import groups

__all__ = ["Merged"]


class Merged(DQLStrategy):
    name = "dql-merged-axes"

    def refuse(self, info: NodeInfo) -> str | None:
        if not info.axes:
            return "the node has no quantization axes"
        if info.rank is None:
            return "the input's rank is unknown"
        if sum(q for q, _ in groups(info.rank, info.axes)) != 1:
            return "the quantization axes are not adjacent"
        if not self.layout(info).reshapes:
            return "nothing to merge (the per-axis form)"
        return "ORT has no Reshape for 4-bit types" if info.in_type.bits < 8 else None

    def layout(self, info: NodeInfo) -> Layout:
        gs = groups(info.rank or 0, info.axes)
        view = tuple(g for _, g in gs)
        quant = tuple(q for q, _ in gs)
        return Layout(view, quant, "axis", quant.index(True))
