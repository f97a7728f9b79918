"""Per-tensor: ``Dequantize(x, s, zp, axes={})`` -> ``DequantizeLinear(x, s, zp)`` (+ Cast for f16/bf16)."""

from __future__ import annotations

from .base import NodeInfo
from .dql import DQLStrategy, Layout

__all__ = ["PerTensor"]


class PerTensor(DQLStrategy):
    name = "dql-per-tensor"
    plain = True

    def refuse(self, info: NodeInfo) -> str | None:
        return "the node has quantization axes" if info.axes else None

    def layout(self, info: NodeInfo) -> Layout:
        rank = info.rank or 0
        return Layout(tuple((i,) for i in range(rank)), (False,) * rank, "tensor")
