"""Folded weight: ``Dequantize(W, s, zp)`` of constants -> one float constant ``W'`` computed by the exact
reference (``lower(weights="float")``): no dequantization at run time, exact in every runtime, four
times the bytes of an 8-bit weight (and no integer MatMul/Conv fusion)."""

from __future__ import annotations

from ...errors import DequantizeError
from ...reference import dequantize
from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal, Strategy

__all__ = ["Folded"]


class Folded(Strategy[None]):
    """No choice to make."""

    name = "fold-weight"

    def check(self, info: NodeInfo) -> Refusal | None:
        if not info.fold:
            return Refusal("weights are kept quantized (weights='float' folds constant weights)")
        if not info.scale_const or (info.zero_point is not None and not info.zp_const):
            return Refusal("the scale or zero point is not a constant")
        if info.read is None or info.known_shape is None:
            return Refusal("the weight's shape or data is unknown")
        return None

    def cost(self, info: NodeInfo, choice: None) -> float:
        return 0.0  # nothing is computed at run time

    def emit(self, info: NodeInfo, choice: None, em: Emitter) -> None:
        assert info.read is not None
        values = [info.read(n) for n in (info.x, info.scale, info.zero_point) if n is not None]
        if any(v is None for v in values):
            raise DequantizeError("cannot read the constant weight's data to fold it", node=info.name)
        x, s, *z = values
        y = dequantize(x, s, z[0] if z else None, axes=info.axes, dtype=info.out_type.numpy)
        em.constant_output(y, info.output)
