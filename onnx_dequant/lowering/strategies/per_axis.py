"""Per-axis: ``Dequantize(x, s, zp, axes={a})`` -> ``DequantizeLinear(x, s, zp, axis=a)`` (+ Cast)."""

from __future__ import annotations

from .base import NodeInfo
from .dql import DQLStrategy, Layout

__all__ = ["PerAxis"]


class PerAxis(DQLStrategy):
    name = "dql-per-axis"
    plain = True

    def refuse(self, info: NodeInfo) -> str | None:
        if len(info.axes) != 1:
            return "needs exactly one quantization axis"
        return "the input's rank is unknown" if info.rank is None else None

    def layout(self, info: NodeInfo) -> Layout:
        rank = info.rank or 0
        return Layout(
            tuple((i,) for i in range(rank)), tuple(i in info.axes for i in range(rank)), "axis", info.axes[0]
        )
