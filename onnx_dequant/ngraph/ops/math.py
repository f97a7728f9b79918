"""Element-wise math: the trigonometric and hyperbolic family, Erf, Ceiling, Floor, Round, Sign, Power,
Mod, FloorMod, SquaredDifference.

nGraph's reference kernels call the C++ function on the element type: on an integer tensor ``std::cosh``
takes the value as a double and the result is truncated back to the integer type. ONNX's math ops take
real types only, so integer inputs are cast to f64, computed, and cast back (Cast truncates, as C++).
Ceiling, Floor and Round are identities on integers. Sign is ``x < 0 ? -1 : (x > 0 ? 1 : 0)``: NaN and
-0 give +0 (ONNX Sign keeps both), so on reals it becomes two Where. Round (v0 in later files) rounds
half to even, as ONNX Round.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext
from . import register
from .elementwise import binary_inputs, emit_abs, no_boolean, unary_input

_F64 = dtypes.parse("f64")
_I64 = dtypes.parse("i64")


def _transcendental(onnx_op: str):
    def convert(ctx: OpContext) -> list[TensorType]:
        t = unary_input(ctx)
        dt = t.elem_type
        no_boolean(ctx, dt)
        x = ctx.inputs[0]
        if dt.is_real:
            ctx.require_onnx(dt, onnx_op)
            ctx.emit(onnx_op, [x], ctx.out())
        else:  # C++ computes in double and truncates back
            ctx.require_onnx(dt, "Cast")
            y = ctx.emit(onnx_op, [ctx.emit("Cast", [x], to=_F64.onnx)])
            ctx.emit("Cast", [y], ctx.out(), to=dt.onnx)
        return [t]

    return convert


for _ng, _onnx in (
    ("Sin", "Sin"),
    ("Cos", "Cos"),
    ("Tan", "Tan"),
    ("Asin", "Asin"),
    ("Acos", "Acos"),
    ("Atan", "Atan"),
    ("Sinh", "Sinh"),
    ("Cosh", "Cosh"),
    ("Erf", "Erf"),
):
    register(_ng)(_transcendental(_onnx))


def _integral(onnx_op: str):
    def convert(ctx: OpContext) -> list[TensorType]:
        t = unary_input(ctx)
        dt = t.elem_type
        no_boolean(ctx, dt)
        op = onnx_op if dt.is_real else "Identity"
        ctx.require_onnx(dt, op)
        ctx.emit(op, ctx.inputs, ctx.out())
        return [t]

    return convert


register("Ceiling")(_integral("Ceil"))
register("Floor")(_integral("Floor"))
register("Round")(_integral("Round"))


def _emit_sign(ctx: OpContext, x: str, dt: dtypes.DType, out: str | None = None) -> str:
    if not dt.is_real:
        ctx.require_onnx(dt, "Sign")
        return ctx.emit("Sign", [x], out)
    ctx.require_onnx(dt, "Less", "Greater", "Where")
    zero = ctx.scalar(0, dt)
    positive = ctx.emit("Where", [ctx.emit("Greater", [x, zero]), ctx.scalar(1, dt), zero])
    return ctx.emit("Where", [ctx.emit("Less", [x, zero]), ctx.scalar(-1, dt), positive], out)


@register("Sign")
def sign(ctx: OpContext) -> list[TensorType]:
    t = unary_input(ctx)
    no_boolean(ctx, t.elem_type)
    _emit_sign(ctx, ctx.inputs[0], t.elem_type, ctx.out())
    return [t]


@register("Power", versions=(0, 1))
def power(ctx: OpContext) -> list[TensorType]:
    a, b, t = binary_inputs(ctx)
    no_boolean(ctx, t.elem_type)
    ctx.require_onnx(t.elem_type, "Pow")
    ctx.emit("Pow", [a, b], ctx.out())
    return [t]


@register("Mod", versions=(0, 1))
def mod(ctx: OpContext) -> list[TensorType]:
    """nGraph's decomposition, ``sign(a) * (|a| - T(i64(|a| / |b|)) * |b|)``: the remainder takes the
    dividend's sign (C's ``fmod``), but on reals ``|a| / |b|`` is rounded to T before it is truncated, so a
    large quotient can differ from ``fmod``; a quotient outside int64 (or NaN, or b = 0 on integers) is C++
    undefined behaviour."""
    a, b, t = binary_inputs(ctx)
    dt = t.elem_type
    no_boolean(ctx, dt)
    ctx.require_onnx(dt, "Div", "Mul", "Sub", "Cast")
    abs_a, abs_b = emit_abs(ctx, a, dt), emit_abs(ctx, b, dt)
    q = ctx.emit("Div", [abs_a, abs_b])
    if dt.is_real:  # truncation toward zero through int64
        q = ctx.emit("Cast", [ctx.emit("Cast", [q], to=_I64.onnx)], to=dt.onnx)
    r = ctx.emit("Sub", [abs_a, ctx.emit("Mul", [q, abs_b])])
    ctx.emit("Mul", [_emit_sign(ctx, a, dt), r], ctx.out())
    return [t]


@register("FloorMod", versions=(1,))
def floor_mod(ctx: OpContext) -> list[TensorType]:
    """The remainder of floor division, with the divisor's sign (Python's ``%``). nGraph never computed
    FloorMod (no kernel, no decomposition, and 0.26 cannot read it), so this is the op's definition:
    integers are ONNX Mod; reals are ``fmod`` plus ``b`` where the remainder is non-zero and its sign is
    not ``b``'s. b = 0 on integers is undefined."""
    a, b, t = binary_inputs(ctx)
    dt = t.elem_type
    no_boolean(ctx, dt)
    if not dt.is_real:
        ctx.require_onnx(dt, "Mod")
        ctx.emit("Mod", [a, b], ctx.out(), fmod=0)
        return [t]
    ctx.require_onnx(dt, "Mod", "Add", "Less", "Equal", "Where")
    r = ctx.emit("Mod", [a, b], fmod=1)
    zero = ctx.scalar(0, dt)
    signs = ctx.emit("Xor", [ctx.emit("Less", [r, zero]), ctx.emit("Less", [b, zero])])
    fix = ctx.emit("And", [ctx.emit("Not", [ctx.emit("Equal", [r, zero])]), signs])
    ctx.emit("Where", [fix, ctx.emit("Add", [r, b]), r], ctx.out())
    return [t]


@register("SquaredDifference")
def squared_difference(ctx: OpContext) -> list[TensorType]:
    a, b, t = binary_inputs(ctx)
    no_boolean(ctx, t.elem_type)
    ctx.require_onnx(t.elem_type, "Sub", "Mul")
    d = ctx.emit("Sub", [a, b])
    ctx.emit("Mul", [d, d], ctx.out())
    return [t]


@register("Clamp")
def clamp(ctx: OpContext) -> list[TensorType]:
    """nGraph's kernel, ``x < min ? min : (x > max ? max : x)``: NaN and -0 pass through (measured on 0.26)."""
    t = unary_input(ctx)
    dt = t.elem_type
    no_boolean(ctx, dt)
    bounds = []
    for key in ("min", "max"):
        v = ctx.raw(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ctx.error(f"'{key}' must be a number, got {v!r:.40}")
        bounds.append(float(np.float32(v)))  # nGraph reads the bounds as float
    lo, hi = bounds
    if lo > hi:
        raise ctx.error(f"The 'min' parameter needs to be less than 'max' for Clamp (min {lo}, max {hi})")
    ctx.require_onnx(dt, "Greater", "Less", "Where")
    emit_clamp(ctx, ctx.inputs[0], dt, lo, hi, ctx.out())
    return [t]


def emit_clamp(ctx: OpContext, x: str, dt: dtypes.DType, lo: float, hi: float, out: str | None = None) -> str:
    """nGraph's Clamp kernel on ``x``: ``x < lo ? lo : (x > hi ? hi : x)``, the bounds cast to ``dt`` first."""
    with np.errstate(over="ignore", invalid="ignore"):
        lo_t, hi_t = (ctx.scalar(np.array(b).astype(dt.numpy), dt) for b in (lo, hi))
    y = ctx.emit("Where", [ctx.emit("Greater", [x, hi_t]), hi_t, x])
    return ctx.emit("Where", [ctx.emit("Less", [x, lo_t]), lo_t, y], out)
