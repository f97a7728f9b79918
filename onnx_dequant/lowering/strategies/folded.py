"""Folded weight: ``Dequantize(W, s, zp)`` of constants -> one float constant ``W'`` computed by the exact
reference (``lower(weights="float")``): no dequantization at run time, exact in every runtime, four
times the bytes of an 8-bit weight (and no integer MatMul/Conv fusion)."""

from __future__ import annotations

import math

import numpy as np

from ...modelio import PROTOBUF_LIMIT
from ...reference import dequantize
from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal, Strategy

__all__ = ["Folded"]

Values = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]


class Folded(Strategy[Values]):
    """The choice is the constants' values: weight, scale, zero point (read once, here)."""

    name = "fold-weight"

    def check(self, info: NodeInfo) -> Refusal | Values:
        if not info.fold:
            return Refusal("weights are kept quantized (weights='float' folds constant weights)")
        if not info.scale_const or (info.zero_point is not None and not info.zp_const):
            return Refusal("the scale or zero point is not a constant")
        if info.read is None or info.known_shape is None:
            return Refusal("the weight's shape is unknown")
        nbytes = math.prod(info.known_shape) * info.out_type.bits // 8
        if nbytes > PROTOBUF_LIMIT:  # the lowered model holds it as one protobuf message until it is saved
            return Refusal(f"folded, the weight would be {nbytes / 2**30:.1f} GiB: over protobuf's 2 GB for one tensor")
        x, s = info.read(info.x), info.read(info.scale)
        z = None if info.zero_point is None else info.read(info.zero_point)
        if x is None or s is None or (info.zero_point is not None and z is None):
            return Refusal("the weight's data cannot be read here")
        return x, s, z

    def cost(self, info: NodeInfo, choice: Values) -> float:
        return 0.0  # nothing is computed at run time

    def emit(self, info: NodeInfo, choice: Values, em: Emitter) -> None:
        x, s, z = choice
        em.constant_output(dequantize(x, s, z, axes=info.axes, dtype=info.out_type.numpy), info.output)
