"""Per-tensor: ``Dequantize(x, s, zp, axes={})`` -> ``DequantizeLinear(x, s, zp)`` (+ Cast for f16/bf16)."""

from __future__ import annotations

from ..facts import NodeInfo
from .base import Refusal
from .dql import DQLStrategy, Layout

__all__ = ["PerTensor"]


class PerTensor(DQLStrategy):
    name = "dql-per-tensor"
    ort_fuses = True

    def layout(self, info: NodeInfo) -> Layout | Refusal:
        if info.axes:
            return Refusal("the node has quantization axes")
        rank = info.rank or 0
        return Layout(tuple((i,) for i in range(rank)), (False,) * rank, "tensor")
