"""Activations nGraph 0.26 defines by decomposition (fused ops), written out node for node so ONNX
Runtime computes what nGraph's INTERPRETER computes: Elu, Selu, HardSigmoid, PRelu, Gelu, ScaleShift, Gemm.

nGraph's Maximum / Minimum inside them are ``a > b ? a : b`` / ``a < b ? a : b`` (Where here, as the
Maximum / Minimum converters). Constants (``alpha``, ``beta``) are cast to the element type first, as
nGraph's Constant does. PRelu's 1-D slope broadcasts along the first data axis of its length (nGraph's
rule), otherwise NumPy-style. Gemm transposes by reversing the axes, flattens to 2-D and computes
``alpha * (A . B) + beta * C``.
"""

from __future__ import annotations

import math

import numpy as np

from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register
from .elementwise import broadcast_shapes, no_boolean, unary_input


def _real(ctx: OpContext, key: str) -> float:
    v = ctx.raw(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ctx.error(f"'{key}' must be a number, got {v!r:.40}")
    return float(v)


def _const(ctx: OpContext, value: float, t: TensorType) -> str:
    with np.errstate(over="ignore"):
        return ctx.scalar(np.array(value).astype(t.elem_type.numpy), t.elem_type)


def _reals_only(ctx: OpContext, t: TensorType) -> None:
    if not t.elem_type.is_real:
        raise ctx.error(f"{ctx.op.op} on {t.elem_type} is not supported (real types only)")


def _maximum(ctx: OpContext, a: str, b: str, out: str | None = None) -> str:
    return ctx.emit("Where", [ctx.emit("Greater", [a, b]), a, b], out)


def _minimum(ctx: OpContext, a: str, b: str, out: str | None = None) -> str:
    return ctx.emit("Where", [ctx.emit("Less", [a, b]), a, b], out)


@register("Elu")
def elu(ctx: OpContext) -> list[TensorType]:
    """max(x, 0) + alpha * exp(min(x, 0)) - alpha."""
    t = unary_input(ctx)
    _reals_only(ctx, t)
    ctx.require_onnx(t.elem_type, "Exp", "Where", "Greater")
    x = ctx.inputs[0]
    zero, alpha = _const(ctx, 0.0, t), _const(ctx, _real(ctx, "alpha"), t)
    e = ctx.emit("Mul", [alpha, ctx.emit("Exp", [_minimum(ctx, x, zero)])])
    ctx.emit("Sub", [ctx.emit("Add", [_maximum(ctx, x, zero), e]), alpha], ctx.out())
    return [t]


@register("Selu")
def selu(ctx: OpContext) -> list[TensorType]:
    """nGraph's decomposition, ``lambda * (max(x, 0) + (alpha * exp(min(x, 0)) - alpha))``, alpha and lambda
    tensors (inputs 1 and 2), numpy broadcasting."""
    ctx.expect_inputs(3)
    t = ctx.types[0]
    _reals_only(ctx, t)
    shape = t.shape
    for other in ctx.types[1:]:
        if other.elem_type is not t.elem_type:
            raise ctx.error(
                f"Selu's alpha and lambda must have the data's element type ({t.elem_type}, {other.elem_type})"
            )
        shape = broadcast_shapes(shape, other.shape)
        if shape is False:
            raise ctx.error("Selu's data, alpha and lambda shapes do not broadcast")
    ctx.require_onnx(t.elem_type, "Exp", "Where", "Greater", "Less", "Mul", "Add", "Sub")
    x, alpha, lam = ctx.inputs
    zero = _const(ctx, 0.0, t)
    e = ctx.emit("Sub", [ctx.emit("Mul", [alpha, ctx.emit("Exp", [_minimum(ctx, x, zero)])]), alpha])
    ctx.emit("Mul", [lam, ctx.emit("Add", [_maximum(ctx, x, zero), e])], ctx.out())
    return [TensorType(t.elem_type, shape)]


@register("HardSigmoid")
def hard_sigmoid(ctx: OpContext) -> list[TensorType]:
    """min(max(alpha * x + beta, 0), 1), alpha and beta read as float."""
    t = unary_input(ctx)
    _reals_only(ctx, t)
    ctx.require_onnx(t.elem_type, "Mul", "Add", "Where", "Greater")
    emit_hard_sigmoid(ctx, ctx.inputs[0], t, _real(ctx, "alpha"), _real(ctx, "beta"), ctx.out())
    return [t]


def emit_hard_sigmoid(ctx: OpContext, x: str, t: TensorType, alpha: float, beta: float, out: str | None = None) -> str:
    """nGraph's HardSigmoid of ``x``: min(max(alpha * x + beta, 0), 1), alpha and beta rounded to float first."""
    a, b = (_const(ctx, float(np.float32(v)), t) for v in (alpha, beta))
    y = ctx.emit("Add", [ctx.emit("Mul", [a, x]), b])
    return _minimum(ctx, _maximum(ctx, y, _const(ctx, 0.0, t)), _const(ctx, 1.0, t), out)


@register("PRelu")
def prelu(ctx: OpContext) -> list[TensorType]:
    """x * (float(x < 0) * slope + float(x > 0))."""
    ctx.expect_inputs(2)
    t, ts = ctx.types
    dt = t.elem_type
    no_boolean(ctx, dt)
    if ts.elem_type is not dt:
        raise ctx.error(f"Slope element type ({ts.elem_type}) must match the data's ({dt})")
    shape = ctx.static_shape(0)
    sshape = ctx.static_shape(1, "slope")
    x, slope = ctx.inputs
    if len(sshape) == 1 and sshape[0] != 1:
        if sshape[0] not in shape:
            raise ctx.error(f"Slope length {sshape[0]} matches no axis of the data (shape {shape_str(shape)})")
        axis = shape.index(sshape[0])
        tail = list(range(1, len(shape) - axis))
        if tail:
            slope = ctx.emit("Unsqueeze", [slope, ctx.int64s(tail)])
    elif broadcast_shapes(shape, sshape) != shape:
        raise ctx.error(f"Slope shape {shape_str(sshape)} does not broadcast to the data's {shape_str(shape)}")
    ctx.require_onnx(dt, "Less", "Greater", "Cast", "Mul", "Add")
    zero = _const(ctx, 0.0, t)
    negative = ctx.emit("Cast", [ctx.emit("Less", [x, zero])], to=dt.onnx)
    positive = ctx.emit("Cast", [ctx.emit("Greater", [x, zero])], to=dt.onnx)
    factor = ctx.emit("Add", [ctx.emit("Mul", [negative, slope]), positive])
    ctx.emit("Mul", [x, factor], ctx.out())
    return [t]


@register("Gelu")
def gelu(ctx: OpContext) -> list[TensorType]:
    """0.5 * x * (1 + erf(x / sqrt(2)))."""
    t = unary_input(ctx)
    _reals_only(ctx, t)
    ctx.require_onnx(t.elem_type, "Erf", "Div", "Mul", "Add")
    x = ctx.inputs[0]
    erf = ctx.emit("Erf", [ctx.emit("Div", [x, _const(ctx, math.sqrt(2.0), t)])])
    half_x = ctx.emit("Mul", [_const(ctx, 0.5, t), x])
    ctx.emit("Mul", [half_x, ctx.emit("Add", [_const(ctx, 1.0, t), erf])], ctx.out())
    return [t]


@register("ScaleShift")
def scale_shift(ctx: OpContext) -> list[TensorType]:
    """scale * data + shift, NumPy broadcasting."""
    ctx.expect_inputs(3)
    t = ctx.types[0]
    no_boolean(ctx, t.elem_type)
    shape = t.shape
    for ti in ctx.types[1:]:
        if ti.elem_type is not t.elem_type:
            raise ctx.error(f"ScaleShift's inputs must have one element type ({t.elem_type} and {ti.elem_type})")
        shape = broadcast_shapes(shape, ti.shape)
        if shape is False:
            raise ctx.error("ScaleShift's inputs do not broadcast")
    ctx.require_onnx(t.elem_type, "Mul", "Add")
    x, scale, shift = ctx.inputs
    ctx.emit("Add", [ctx.emit("Mul", [scale, x]), shift], ctx.out())
    return [TensorType(t.elem_type, shape)]


@register("Gemm")
def gemm(ctx: OpContext) -> list[TensorType]:
    """alpha * (flatten(A') . flatten(B')) + beta * C (A', B' axis-reversed when transA / transB)."""
    ctx.expect_inputs(3)
    ta, tb, tc = ctx.types
    dt = ta.elem_type
    _reals_only(ctx, ta)
    if tb.elem_type is not dt or tc.elem_type is not dt:
        raise ctx.error(f"Gemm's inputs must have one element type ({dt}, {tb.elem_type}, {tc.elem_type})")
    a, b, c = ctx.inputs
    sa, sb = ctx.static_shape(0), ctx.static_shape(1)
    if ctx.attr_bool("transA", False) and len(sa) > 1:
        a = ctx.emit("Transpose", [a], perm=list(range(len(sa)))[::-1])
        sa = sa[::-1]
    if ctx.attr_bool("transB", False) and len(sb) > 1:
        b = ctx.emit("Transpose", [b], perm=list(range(len(sb)))[::-1])
        sb = sb[::-1]
    fa, fb = (sa[0], math.prod(sa[1:])), (sb[0], math.prod(sb[1:]))
    if fa[1] != fb[0]:
        raise ctx.error(f"Gemm: A {shape_str(sa)} and B {shape_str(sb)} do not multiply (flattened {fa} and {fb})")
    if tuple(sa) != fa:
        a = ctx.emit("Reshape", [a, ctx.int64s(list(fa))])
    if tuple(sb) != fb:
        b = ctx.emit("Reshape", [b, ctx.int64s(list(fb))])
    out = broadcast_shapes((fa[0], fb[1]), tc.shape)
    if out is False:
        raise ctx.error(f"Gemm: C {shape_str(tc.shape)} does not broadcast to ({fa[0]}, {fb[1]})")
    ctx.require_onnx(dt, "MatMul", "Mul", "Add")
    ab = ctx.emit("Mul", [_const(ctx, _real(ctx, "alpha"), ta), ctx.emit("MatMul", [a, b])])
    ctx.emit("Add", [ab, ctx.emit("Mul", [_const(ctx, _real(ctx, "beta"), ta), c])], ctx.out())
    return [TensorType(dt, out)]
