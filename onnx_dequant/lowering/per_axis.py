"""Per-axis: ``Dequantize(x, s, zp, axes={a})`` -> ``DequantizeLinear(x, s, zp, axis=a)`` (+ Cast)."""

from __future__ import annotations

from .base import Emitter, NodeInfo, Strategy
from .dql import Layout, dql_reason, emit_layout, layout_cost, ort_bug_reason

__all__ = ["PerAxis"]


class PerAxis(Strategy):
    name = "dql-per-axis"
    plain = True

    def _layout(self, info: NodeInfo) -> Layout:
        rank = info.rank or 0
        return Layout(tuple((i,) for i in range(rank)), tuple(i in info.axes for i in range(rank)), "axis", info.axes[0])

    def check(self, info: NodeInfo) -> str | None:
        if len(info.axes) != 1:
            return "needs exactly one quantization axis"
        if info.rank is None:
            return "the input's rank is unknown"
        return dql_reason(info) or ort_bug_reason(info, info.scale_size)

    def cost(self, info: NodeInfo) -> float:
        return layout_cost(info, self._layout(info))

    def emit(self, info: NodeInfo, em: Emitter) -> None:
        emit_layout(info, em, self._layout(info))
