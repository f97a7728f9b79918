"""Per-axis: ``Dequantize(x, s, zp, axes={a})`` -> ``DequantizeLinear(x, s, zp, axis=a)`` (+ Cast)."""

from __future__ import annotations

from ..facts import NodeInfo
from .base import Refusal
from .dql import DQLStrategy, Layout

__all__ = ["PerAxis"]


class PerAxis(DQLStrategy):
    name = "dql-per-axis"
    ort_fuses = True

    def layout(self, info: NodeInfo) -> Layout | Refusal:
        if len(info.axes) != 1:
            return Refusal("needs exactly one quantization axis")
        if info.rank is None:
            return Refusal("the input's rank is unknown")
        rank = info.rank
        return Layout(
            tuple((i,) for i in range(rank)), tuple(i in info.axes for i in range(rank)), "axis", info.axes[0]
        )
