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
from .elementwise import broadcast_shapes

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


def _eps(ctx: OpContext, key: str) -> float:
    v = ctx.raw(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ctx.error(f"'{key}' must be a number, got {v!r:.40}")
    return float(np.float32(v))  # nGraph reads these as float


def _square_sum(ctx: OpContext, x: str, axes: list[int], keep: bool) -> str:
    sq = ctx.emit("Mul", [x, x])
    if not axes:
        return sq
    return ctx.emit("ReduceSum", [sq, ctx.int64s(axes)], keepdims=int(keep))


@register("NormalizeL2")
def normalize_l2(ctx: OpContext) -> list[TensorType]:
    """x / sqrt(sum(x * x) + eps), or sqrt(max(sum, eps)) for ``eps_mode`` MAX; the norm broadcast NumPy-style
    against x, as nGraph's decomposition (which is why only leading reduction axes are valid there)."""
    ctx.expect_inputs(2)
    t = ctx.real_input(0)
    dt = t.elem_type
    rank = ctx.rank(0)
    axes = sorted(set(ctx.constant_ints(1, "axes", lo=0, hi=max(rank - 1, 0))))
    eps = _eps(ctx, "eps")
    mode = ctx.raw("eps_mode", 0)
    mode = {0: "add", 1: "max", "add": "add", "max": "max", "ADD": "add", "MAX": "max"}.get(mode)
    if mode is None:
        raise ctx.error(f"'eps_mode' must be ADD or MAX (0, 1), got {ctx.raw('eps_mode')!r:.40}")
    norm_shape = tuple(d for i, d in enumerate(t.shape) if i not in axes)  # type: ignore[union-attr]
    if broadcast_shapes(t.shape, norm_shape) != t.shape:
        raise ctx.error(
            f"the norm over axes {axes} has shape {shape_str(norm_shape)}, which does not broadcast to the data's "
            f"{shape_str(t.shape)} (nGraph divides with NumPy broadcasting)"
        )
    ctx.require_onnx(dt, "ReduceSum", "Sqrt", "Div")
    x = ctx.inputs[0]
    s = _square_sum(ctx, x, axes, False)
    e = ctx.scalar(np.array(eps).astype(dt.numpy), dt)
    if mode == "max":
        s = ctx.emit("Where", [ctx.emit("Greater", [s, e]), s, e])
    else:
        s = ctx.emit("Add", [s, e])
    ctx.emit("Div", [x, ctx.emit("Sqrt", [s])], ctx.out())
    return [t]


@register("GRN")
def grn(ctx: OpContext) -> list[TensorType]:
    """x / sqrt(sum over axis 1 of x * x + bias), the data viewed as 4-D with leading ones (nGraph's rule)."""
    ctx.expect_inputs(1)
    t = ctx.real_input(0)
    dt = t.elem_type
    rank = ctx.rank(0)
    if not 2 <= rank <= 4:
        raise ctx.error(f"Input tensor rank must be 2, 3 or 4 dimensional (actual input shape: {shape_str(t.shape)})")
    bias = _eps(ctx, "bias")
    x = ctx.inputs[0]
    axis = 1 - (4 - rank)  # axis 1 of the 4-D view; a leading one (no reduction) when negative
    ctx.require_onnx(dt, "ReduceSum", "Sqrt", "Div")
    s = _square_sum(ctx, x, [axis] if axis >= 0 else [], True)
    norm = ctx.emit("Sqrt", [ctx.emit("Add", [s, ctx.scalar(np.array(bias).astype(dt.numpy), dt)])])
    ctx.emit("Div", [x, norm], ctx.out())
    return [t]


@register("LRN")
def lrn(ctx: OpContext) -> list[TensorType]:
    """x / (bias + alpha / size * sum of squares in the window) ^ beta: ONNX LRN, across the channel axis."""
    ctx.expect_inputs(1, 2)
    t = ctx.real_input(0)
    dt = t.elem_type
    rank = ctx.rank(0)
    axes = sorted(set(ctx.constant_ints(1, "axes", lo=0, hi=max(rank - 1, 0)))) if len(ctx.inputs) == 2 else [1]
    size = ctx.attr_int("nsize", lo=1)
    if axes != [1] or rank < 3 or size % 2 == 0:
        raise ctx.error(
            f"LRN over axes {axes} with size {size} on rank {rank} has no ONNX counterpart (ONNX LRN: the channel "
            "axis of a rank >= 3 input; an even size centres the window differently)"
        )
    values = {k: ctx.raw(k) for k in ("alpha", "beta", "bias")}
    for k, v in values.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ctx.error(f"'{k}' must be a number, got {v!r:.40}")
    ctx.require_onnx(dt, "LRN")
    ctx.emit("LRN", [ctx.inputs[0]], ctx.out(), size=size, **{k: float(v) for k, v in values.items()})
    return [t]
