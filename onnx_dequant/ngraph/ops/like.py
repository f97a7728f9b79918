"""The ops that take a second input only for its shape or element type: BroadcastLike (v0), ConvertLike
(v1), ScalarConstantLike (v0).

- BroadcastLike(arg, like, initial_axes) is Broadcast(arg, shape of like, axes): ``initial_axes`` when
  given, else the axes nGraph infers (those past the argument's rank, and those where the argument has
  1 and ``like`` more); the like input itself is not read.
- ConvertLike(data, like) is Convert to like's element type.
- ScalarConstantLike(like, value) is a scalar Constant of like's element type: ``static_cast<T>(value)``
  of the double nGraph reads (truncation toward zero for integers; out of range, or NaN, to an integer
  is C++ undefined behaviour, refused). nGraph writes ``value`` as its string (which 0.26's own reader
  cannot read back); a string is parsed as a Constant's value, a number cast as nGraph's reader does.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext
from . import register
from .elementwise import emit_convert
from .io import parse_values
from .shape import broadcast_to


@register("BroadcastLike")
def broadcast_like(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    like = list(ctx.static_shape(1, "like argument"))
    axes = ctx.attr_axes("initial_axes", ())
    if not axes:
        arg = ctx.types[0].shape
        if arg is None:
            raise ctx.error("BroadcastLike without initial_axes needs the rank of its argument (input 0)")
        inferred = []
        for i, d in enumerate(like):
            if i >= len(arg) or (arg[i] == 1 and d > 1):
                inferred.append(i)
        axes = tuple(inferred)
    return broadcast_to(ctx, like, axes)


@register("ConvertLike", versions=(1,))
def convert_like(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    return emit_convert(ctx, ctx.types[0], ctx.elem(1))


def _cast_double(ctx: OpContext, v: float, dt: dtypes.DType) -> np.ndarray:
    """``static_cast<T>(double)`` (as nGraph's Constant writes it), refusing C++'s undefined cases."""
    if dt.kind == "real":
        with np.errstate(over="ignore"):
            return np.array(v, np.float64).astype(dt.numpy)
    if math.isnan(v) or math.isinf(v):
        raise ctx.error(f"ScalarConstantLike value {v} has no {dt} value (C++ undefined behaviour)")
    t = math.trunc(v)
    lo, hi = (0, 1) if dt.kind == "boolean" else (dt.min, dt.max)
    if not lo <= t <= hi:
        raise ctx.error(
            f"ScalarConstantLike value {v!r} truncated to {t} is outside {dt} [{lo}, {hi}] (C++ undefined behaviour)"
        )
    return np.array(t).astype(dt.numpy)


@register("ScalarConstantLike")
def scalar_constant_like(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    dt = ctx.elem(0)
    v = ctx.raw("value")
    if isinstance(v, str):  # nGraph's writer: the value's string, in the element type
        value = parse_values(ctx, dt, ())[0].reshape(())
    elif isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e308:
        value = _cast_double(ctx, float(v), dt)
    else:
        raise ctx.error(f"'value' must be a number or its string, got {v!r:.40}")
    ctx.b.initializer(ctx.out(), value.reshape(()), dt)
    return [TensorType(dt, ())]
