"""Atan2(y, x) (v0): ``static_cast<T>(std::atan2(y, x))`` element-wise, with v0's broadcasting (``autob``).

ONNX has no atan2 and ONNX Runtime's Atan takes f32 only, so the whole computation is in f64 (every
input type is cast to f64 and the result cast back, which truncates toward zero for integers as C++):

- ``a, b = min(|x|, |y|), max(|x|, |y|)``; ``t = a / b`` in [0, 1] (0 for two zeros, 1 for two infinities);
- ``r = atan(t)`` by Cephes' ``atan`` (range reduction at 0.66 around pi/4, its rational approximation);
- when ``|y| > |x|``: ``pi/2 - r`` (``pi/2 + r`` for x negative or -0); else ``pi - r`` for x negative or
  -0; the result takes y's sign (-0 included); pi and pi/2 as two doubles (Cephes' MOREBITS).

So the IEEE special cases (signed zeros, infinities, NaN) come out as C's ``atan2``. The f64 result is
within a few units in the last place of the C library's (docs/ngraph.md: the budget); rounded to f32,
f16 or an integer it is within one unit of nGraph's.
"""

from __future__ import annotations

import math

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext
from . import register
from .elementwise import binary_inputs, no_boolean

_F64 = dtypes.parse("f64")

# Cephes atan.c: atan(x) = x + x * z * P(z) / Q(z), z = x^2, for |x| <= 0.66 (Q monic)
_P = (-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1)
_P += (-1.228866684490136173410e2, -6.485021904942025371773e1)
_Q = (2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2)
_Q += (4.853903996359136964868e2, 1.945506571482613964425e2)
_MOREBITS = 6.123233995736765886130e-17  # pi/2 - float(pi/2)
_PI_LO = 1.2246467991473532e-16  # pi - float(pi)


def _poly(ctx: OpContext, z: str, coefficients: tuple[float, ...], monic: bool) -> str:
    """Horner's rule in f64: ``((c0 z + c1) z + ...)``, with a leading 1 when ``monic``."""
    f = lambda v: ctx.scalar(v, _F64)  # noqa: E731
    acc = ctx.emit("Add", [z, f(coefficients[0])]) if monic else f(coefficients[0])
    for c in coefficients[1:]:
        acc = ctx.emit("Add", [ctx.emit("Mul", [acc, z]), f(c)])
    return acc


def emit_atan01(ctx: OpContext, t: str) -> str:
    """Cephes' ``atan`` of an f64 tensor with values in [0, 1]."""
    f = lambda v: ctx.scalar(v, _F64)  # noqa: E731
    big = ctx.emit("Greater", [t, f(0.66)])
    reduced = ctx.emit("Div", [ctx.emit("Sub", [t, f(1.0)]), ctx.emit("Add", [t, f(1.0)])])
    u = ctx.emit("Where", [big, reduced, t])
    z = ctx.emit("Mul", [u, u])
    ratio = ctx.emit("Div", [ctx.emit("Mul", [z, _poly(ctx, z, _P, False)]), _poly(ctx, z, _Q, True)])
    core = ctx.emit("Add", [ctx.emit("Mul", [u, ratio]), u])
    core = ctx.emit("Where", [big, ctx.emit("Add", [core, f(0.5 * _MOREBITS)]), core])
    return ctx.emit("Where", [big, ctx.emit("Add", [core, f(math.pi / 4)]), core])


def _negative_or_minus_zero(ctx: OpContext, v: str) -> str:
    """``signbit(v)`` for a non-NaN v: v < 0, or v == 0 with 1 / v = -inf."""
    zero = ctx.scalar(0.0, _F64)
    minus_zero = ctx.emit("Less", [ctx.emit("Div", [ctx.scalar(1.0, _F64), v]), zero])
    return ctx.emit("Or", [ctx.emit("Less", [v, zero]), ctx.emit("And", [ctx.emit("Equal", [v, zero]), minus_zero])])


@register("Atan2")
def atan2(ctx: OpContext) -> list[TensorType]:
    y, x, t = binary_inputs(ctx)
    dt = t.elem_type
    no_boolean(ctx, dt)
    ctx.require_onnx(dt, "Cast")
    ctx.require_onnx(dt, "Cast", output=True)
    f = lambda v: ctx.scalar(v, _F64)  # noqa: E731
    if dt is not _F64:
        y, x = (ctx.emit("Cast", [v], to=_F64.onnx) for v in (y, x))
    ay, ax = (ctx.emit("Abs", [v]) for v in (y, x))
    lo, hi = ctx.emit("Min", [ax, ay]), ctx.emit("Max", [ax, ay])
    ratio = ctx.emit("Div", [lo, hi])
    both_inf = ctx.emit("Equal", [lo, f(math.inf)])
    ratio = ctx.emit("Where", [ctx.emit("Equal", [hi, f(0.0)]), f(0.0), ratio])
    ratio = ctx.emit("Where", [both_inf, f(1.0), ratio])
    r = emit_atan01(ctx, ratio)
    steep, x_neg = ctx.emit("Greater", [ay, ax]), _negative_or_minus_zero(ctx, x)
    half = ctx.emit("Where", [x_neg, ctx.emit("Add", [f(math.pi / 2), r]), ctx.emit("Sub", [f(math.pi / 2), r])])
    back = ctx.emit("Add", [ctx.emit("Sub", [f(math.pi), r]), f(_PI_LO)])
    r = ctx.emit("Where", [steep, ctx.emit("Add", [half, f(_MOREBITS)]), ctx.emit("Where", [x_neg, back, r])])
    sign = ctx.emit("Where", [_negative_or_minus_zero(ctx, y), f(-1.0), f(1.0)])
    r = ctx.emit("Mul", [r, sign])  # not Where(r, -r): ONNX Runtime's Where gives +0 for a -0 it selects first
    nan = ctx.emit("Or", [ctx.emit("IsNaN", [y]), ctx.emit("IsNaN", [x])])
    out = ctx.out() if dt is _F64 else None
    r = ctx.emit("Where", [nan, ctx.emit("Add", [y, x]), r], out)
    if dt is not _F64:
        ctx.emit("Cast", [r], ctx.out(), to=dt.onnx)
    return [t]
