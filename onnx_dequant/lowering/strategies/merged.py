"""Merged axes: adjacent quantization axes and adjacent broadcast axes merged by Reshape, so that one
run of quantization axes becomes one ``DequantizeLinear`` axis: ``Reshape -> DQL(axis) -> Reshape``."""

from __future__ import annotations

from ..facts import NodeInfo
from .base import Refusal
from .dql import DQLStrategy, Layout
from .shapes import groups

__all__ = ["Merged"]


class Merged(DQLStrategy):
    name = "dql-merged-axes"

    def layout(self, info: NodeInfo) -> Layout | Refusal:
        if not info.axes:
            return Refusal("the node has no quantization axes")
        if info.rank is None:
            return Refusal("the input's rank is unknown")
        runs = groups(info.rank, info.axes)
        if sum(q for q, _ in runs) != 1:
            return Refusal("the quantization axes are not adjacent")
        quant = tuple(q for q, _ in runs)
        layout = Layout(tuple(g for _, g in runs), quant, "axis", quant.index(True))
        if not layout.reshapes:
            return Refusal("nothing to merge (the per-axis form)")
        if info.in_type.bits < 8:
            return Refusal("ORT has no Reshape for 4-bit types")
        return layout
