"""Per-tensor: ``Dequantize(x, s, zp, axes={})`` -> ``DequantizeLinear(x, s, zp)`` (+ Cast for f16/bf16)."""

from __future__ import annotations

from .base import Emitter, NodeInfo, Strategy
from .dql import Layout, dql_reason, emit_layout, layout_cost, ort_bug_reason

__all__ = ["PerTensor"]


class PerTensor(Strategy):
    name = "dql-per-tensor"
    plain = True  # the form ORT's MatMul/Conv fusions read

    def _layout(self, info: NodeInfo) -> Layout:
        rank = info.rank or 0
        return Layout(tuple((i,) for i in range(rank)), (False,) * rank, "tensor")

    def check(self, info: NodeInfo) -> str | None:
        if info.axes:
            return "the node has quantization axes"
        return dql_reason(info) or ort_bug_reason(info, 1)

    def cost(self, info: NodeInfo) -> float:
        return layout_cost(info, self._layout(info))

    def emit(self, info: NodeInfo, em: Emitter) -> None:
        emit_layout(info, em, self._layout(info))
