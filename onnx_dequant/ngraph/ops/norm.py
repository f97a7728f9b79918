"""BatchNormInference: nGraph's formula step by step, ``(x - mean) / sqrt(var + eps) * gamma + beta``.

The file's inputs are ``gamma, beta, input, mean, variance`` (nGraph's order kept for old files), the
channel axis 1. ``eps`` is cast to the element type first, as nGraph's reference does. ONNX's
BatchNormalization would be free to fold the constants (ONNX Runtime precomputes a scale), so the ops
are written out in nGraph's order. nGraph 0.26's build contracts ``normalized * gamma + beta`` into one
fused multiply-add on f32 (measured against its INTERPRETER): for f32 that last step is computed in f64
(the product exact, the sum rounded twice: equal to the fused result except in rare double-rounding
cases); other types use a plain Mul and Add.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register

_F32, _F64 = dtypes.parse("f32"), dtypes.parse("f64")


@register("BatchNormInference")
def batch_norm_inference(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(5)
    gamma, beta, x, mean, var = range(5)
    t = ctx.types[x]
    dt = t.elem_type
    if not dt.is_real:
        raise ctx.error(f"Input element type must be a floating point type (got {dt})")
    rank = ctx.rank(x)
    if rank < 2:
        raise ctx.error(f"Input argument must have rank of at least 2 (input argument shape: {shape_str(t.shape)})")
    channels = t.shape[1]  # type: ignore[index]
    for i, what in ((gamma, "Gamma"), (beta, "Beta"), (mean, "Mean"), (var, "Variance")):
        ti = ctx.types[i]
        if ti.elem_type is not dt:
            raise ctx.error(f"{what} element type ({ti.elem_type}) does not match input element type ({dt})")
        s = ti.shape
        mismatch = s is not None and (
            len(s) != 1 or (isinstance(s[0], int) and isinstance(channels, int) and s[0] != channels)
        )
        if mismatch:
            raise ctx.error(
                f"Shape for {what.lower()} ({shape_str(s)}) does not match the channel count {channels} "
                f"of the input (shape: {shape_str(t.shape)})"
            )
    eps = ctx.raw("eps")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise ctx.error(f"'eps' must be a number, got {eps!r:.40}")
    ctx.require_onnx(dt, "Sub", "Add", "Sqrt", "Div", "Mul")
    tail = ctx.int64s(list(range(1, rank - 1)))

    def per_channel(i: int) -> str:
        return ctx.emit("Unsqueeze", [ctx.inputs[i], tail]) if rank > 2 else ctx.inputs[i]

    with np.errstate(over="ignore"):
        e = ctx.scalar(np.array(float(eps)).astype(dt.numpy), dt)
    denom = ctx.emit("Sqrt", [ctx.emit("Add", [per_channel(var), e])])
    normalized = ctx.emit("Div", [ctx.emit("Sub", [ctx.inputs[x], per_channel(mean)]), denom])
    if dt is _F32:  # nGraph's build fuses normalized * gamma + beta (one rounding): f64 is exact up to the add
        wide = [ctx.emit("Cast", [v], to=_F64.onnx) for v in (normalized, per_channel(gamma), per_channel(beta))]
        y = ctx.emit("Add", [ctx.emit("Mul", wide[:2]), wide[2]])
        ctx.emit("Cast", [y], ctx.out(), to=dt.onnx)
    else:
        scaled = ctx.emit("Mul", [normalized, per_channel(gamma)])
        ctx.emit("Add", [scaled, per_channel(beta)], ctx.out())
    return [t]
