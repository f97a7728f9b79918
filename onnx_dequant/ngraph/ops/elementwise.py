"""Elementwise ops with nGraph's semantics: binary arithmetic with each era's broadcasting, unary math, Convert.

Where nGraph and the nearest ONNX op differ, nGraph wins:
- Divide on integers: nGraph's ``pythondiv`` (default true) rounds the quotient toward minus infinity
  (Python's ``//``); ONNX Div truncates. Signed integer Divide becomes Div plus a correction.
- Maximum / Minimum on reals: nGraph computes ``a > b ? a : b`` (``a < b ? a : b``), so a NaN in ``b``
  wins and a NaN in ``a`` loses; ONNX Max/Min propagate NaN from either side. They become Where.
- Relu on reals: ``x > 0 ? x : 0`` maps NaN and -0 to +0; ONNX Relu keeps both. It becomes Where.
- Abs on reals: ``x < 0 ? -x : x`` keeps -0; ONNX Abs gives +0. It becomes Where (which selects -0 from
  its third input, so ONNX Runtime's Where keeps it).
- Convert from real to integer truncates toward zero (C++ ``static_cast``), as ONNX Cast does in ORT.
"""

from __future__ import annotations

from typing import Any

from ... import dtypes
from ...contract import Dim, Shape, TensorType, merge_shapes
from ..builder import tensor_type
from ..context import OpContext, shape_str
from . import register

__all__ = [
    "binary_inputs",
    "broadcast_shapes",
    "emit_abs",
    "emit_convert",
    "emit_real_relu",
    "no_boolean",
    "read_autob",
    "unary_input",
]


def broadcast_shapes(a: Shape, b: Shape) -> Shape | bool:
    """NumPy broadcasting of two partial shapes; False when they cannot broadcast."""
    if a == b:
        return a
    if a is None or b is None:
        return None
    if len(b) < len(a) and a[len(a) - len(b) :] == b:  # b's dims end a's: a bias, a per-channel factor
        return a
    n = max(len(a), len(b))
    a2 = (1,) * (n - len(a)) + tuple(a)
    b2 = (1,) * (n - len(b)) + tuple(b)
    out: list[Dim] = []
    for x, y in zip(a2, b2):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            if x != y:
                return False
            out.append(x)
        else:
            out.append(x if isinstance(x, int) else y if isinstance(y, int) else (x if x == y else None))
    return tuple(out)


_AUTOB_NAMES = {"none": "none", "explicit": "none", "numpy": "numpy", "pdpd": "pdpd"}
_AUTOB_INTS = {0: "none", 1: "numpy", 2: "pdpd"}
_AUTOB_OBJECTS = {(t, a): (k, a) for t, k in _AUTOB_INTS.items() for a in range(-1, 8)}


def read_autob(ctx: OpContext) -> tuple[str, int]:
    """The op's broadcast rule ``(kind, axis)`` from ``autob`` (to v0.25), ``auto_broadcast`` as an object
    (v0.26-v0.29) or as a string (op_version 1 era). Absent: none for op_version 0, numpy for 1."""
    js = ctx.js
    key = "auto_broadcast"
    v: Any = js.get(key)
    if v is None:
        key = "autob"
        v = js.get(key)
        if v is None:
            return ("numpy" if ctx.op.version >= 1 else "none"), -1
    if type(v) is dict and len(v) == 2:  # the common case: {"axis": n, "type": t}
        t, a = v.get("type"), v.get("axis")
        if type(t) is int and type(a) is int:
            cached = _AUTOB_OBJECTS.get((t, a))
            if cached is not None:
                return cached
    axis: Any = -1
    if isinstance(v, dict):
        axis = v.get("axis", -1)
        v = v.get("type", 0)
    kind = None
    if isinstance(v, str):
        kind = _AUTOB_NAMES.get(v.strip().lower())
    elif isinstance(v, int) and not isinstance(v, bool):
        kind = _AUTOB_INTS.get(v)
    if kind is None:
        raise ctx.error(f"'{key}' must be NONE, NUMPY or PDPD (0, 1, 2), got {ctx.js[key]!r:.60}")
    if not isinstance(axis, int) or isinstance(axis, bool) or axis < -1:
        raise ctx.error(f"'{key}' axis must be an integer >= -1, got {axis!r:.40}")
    return kind, axis


def binary_inputs(ctx: OpContext) -> tuple[str, str, TensorType]:
    """Check a binary op's inputs; returns the two operands (PDPD's second one unsqueezed) and the result type."""
    if len(ctx.inputs) != 2:
        ctx.expect_inputs(2)
    ta, tb = ctx.types
    if ta.elem_type is not tb.elem_type:
        raise ctx.error(f"Argument element types are inconsistent ({ta.elem_type} and {tb.elem_type})")
    kind, axis = read_autob(ctx)
    a, b = ctx.inputs
    sa, sb = ta.shape, tb.shape
    if kind == "none":
        ok, shape = merge_shapes(sa, sb)
        if not ok:
            raise ctx.error(
                f"Argument shapes are inconsistent ({shape_str(sa)} and {shape_str(sb)}; broadcasting: none)"
            )
    elif kind == "numpy":
        shape = broadcast_shapes(sa, sb)
        if shape is False:
            raise ctx.error(f"Argument shapes are inconsistent ({shape_str(sa)} and {shape_str(sb)} do not broadcast)")
    else:  # pdpd: b's shape matches a's from ``axis`` on; b broadcasts into a
        ra, rb = ctx.rank(0), ctx.rank(1)
        sb_t = tuple(sb)  # type: ignore[arg-type]
        while sb_t and sb_t[-1] == 1:  # trailing ones of b are ignored
            sb_t = sb_t[:-1]
        rb = len(sb_t)
        start = ra - rb if axis == -1 else axis
        if start < 0 or start + rb > ra:
            raise ctx.error(f"PDPD broadcast axis {axis} does not fit shapes {shape_str(sa)} and {shape_str(sb)}")
        for i, d in enumerate(sb_t):
            da = sa[start + i]  # type: ignore[index]
            if isinstance(d, int) and isinstance(da, int) and d not in (1, da):
                raise ctx.error(
                    f"Argument shapes are inconsistent ({shape_str(sa)} and {shape_str(sb)}; PDPD axis {axis})"
                )
        shape = sa
        tail = list(range(start + rb, ra))
        if len(sb) != rb:  # drop the ignored trailing ones first
            b = ctx.emit("Squeeze", [b, ctx.int64s(list(range(rb, len(sb))))])  # type: ignore[arg-type]
        axes = list(range(start)) + tail
        if axes:
            b = ctx.emit("Unsqueeze", [b, ctx.int64s(axes)])
    return a, b, tensor_type((ta.elem_type, shape))


def no_boolean(ctx: OpContext, t: dtypes.DType) -> None:
    if t.kind == "boolean":
        raise ctx.error(f"Arguments cannot have boolean element type (argument element type: {t})")


def _simple(onnx_op: str):
    def convert(ctx: OpContext) -> list[TensorType]:
        a, b, t = binary_inputs(ctx)
        no_boolean(ctx, t.elem_type)
        ctx.require_onnx(t.elem_type, onnx_op)
        ctx.emit(onnx_op, [a, b], ctx.out())
        return [t]

    return convert


register("Add", versions=(0, 1))(_simple("Add"))
register("Subtract", versions=(0, 1))(_simple("Sub"))
register("Multiply", versions=(0, 1))(_simple("Mul"))


@register("Divide", versions=(0, 1))
def divide(ctx: OpContext) -> list[TensorType]:
    a, b, t = binary_inputs(ctx)
    dt = t.elem_type
    no_boolean(ctx, dt)
    pythondiv = ctx.attr_bool("pythondiv", True)
    if dt.is_real or not dt.signed or not pythondiv:
        ctx.require_onnx(dt, "Div")
        ctx.emit("Div", [a, b], ctx.out())
        return [t]
    ctx.require_onnx(dt, "Div", "Mul", "Sub", "Equal", "Less")
    # floor division: q = trunc(a / b); q - 1 where the remainder is non-zero and the signs differ
    q = ctx.emit("Div", [a, b])
    r = ctx.emit("Sub", [a, ctx.emit("Mul", [q, b])])
    zero = ctx.scalar(0, dt)
    inexact = ctx.emit("Not", [ctx.emit("Equal", [r, zero])])
    signs = ctx.emit("Xor", [ctx.emit("Less", [a, zero]), ctx.emit("Less", [b, zero])])
    fix = ctx.emit("Cast", [ctx.emit("And", [inexact, signs])], to=dt.onnx)
    ctx.emit("Sub", [q, fix], ctx.out())
    return [t]


def _select(compare: str, fallback: str):
    def convert(ctx: OpContext) -> list[TensorType]:
        a, b, t = binary_inputs(ctx)
        no_boolean(ctx, t.elem_type)
        if t.elem_type.is_real:  # a > b ? a : b exactly, NaN and signed zeros included
            ctx.require_onnx(t.elem_type, compare, "Where")
            ctx.emit("Where", [ctx.emit(compare, [a, b]), a, b], ctx.out())
        else:
            ctx.require_onnx(t.elem_type, fallback)
            ctx.emit(fallback, [a, b], ctx.out())
        return [t]

    return convert


register("Maximum", versions=(0, 1))(_select("Greater", "Max"))
register("Minimum", versions=(0, 1))(_select("Less", "Min"))


def unary_input(ctx: OpContext) -> TensorType:
    ctx.expect_inputs(1)
    return ctx.types[0]


@register("Negative")
def negative(ctx: OpContext) -> list[TensorType]:
    t = unary_input(ctx)
    no_boolean(ctx, t.elem_type)
    if t.elem_type.kind != "real" and not t.elem_type.signed:  # wraps, as C++ does
        ctx.require_onnx(t.elem_type, "Sub")
        ctx.emit("Sub", [ctx.scalar(0, t.elem_type), ctx.inputs[0]], ctx.out())
    else:
        ctx.require_onnx(t.elem_type, "Neg")
        ctx.emit("Neg", ctx.inputs, ctx.out())
    return [t]


@register("Relu")
def relu(ctx: OpContext) -> list[TensorType]:
    t = unary_input(ctx)
    dt = t.elem_type
    no_boolean(ctx, dt)
    x = ctx.inputs[0]
    if dt.is_real:
        ctx.require_onnx(dt, "Greater", "Where")
        emit_real_relu(ctx, x, dt, ctx.out())
    elif dt.signed:
        ctx.require_onnx(dt, "Max")
        ctx.emit("Max", [x, ctx.scalar(0, dt)], ctx.out())
    else:
        ctx.require_onnx(dt, "Identity")
        ctx.emit("Identity", [x], ctx.out())
    return [t]


def emit_real_relu(ctx: OpContext, x: str, dt: dtypes.DType, out: str | None = None) -> str:
    """nGraph's Relu of a real ``x``: ``x > 0 ? x : 0`` (NaN and -0 give +0)."""
    zero = ctx.scalar(0, dt)
    return ctx.emit("Where", [ctx.emit("Greater", [x, zero]), x, zero], out)


def _one_to_one(onnx_op: str, reals_only: bool = True):
    """A converter for a unary op that is one ONNX op of the same name (on real types only, by default)."""

    def convert(ctx: OpContext) -> list[TensorType]:
        t = unary_input(ctx)
        if reals_only and not t.elem_type.is_real:
            raise ctx.error(f"{ctx.op.op} on {t.elem_type} is not supported (the importer maps it for real types only)")
        no_boolean(ctx, t.elem_type)
        ctx.require_onnx(t.elem_type, onnx_op)
        ctx.emit(onnx_op, ctx.inputs, ctx.out())
        return [t]

    return convert


for _name in ("Sigmoid", "Tanh", "Exp", "Log", "Sqrt"):
    register(_name)(_one_to_one(_name))


def emit_abs(ctx: OpContext, x: str, dt: dtypes.DType, out: str | None = None) -> str:
    """nGraph's Abs of ``x``: ``x < 0 ? -x : x`` on reals (keeps -0; ONNX Abs gives +0), Abs on integers."""
    if dt.is_real:
        ctx.require_onnx(dt, "Less", "Neg", "Where")
        return ctx.emit("Where", [ctx.emit("Less", [x, ctx.scalar(0, dt)]), ctx.emit("Neg", [x]), x], out)
    ctx.require_onnx(dt, "Abs")
    return ctx.emit("Abs", [x], out)


@register("Abs")
def abs_(ctx: OpContext) -> list[TensorType]:
    t = unary_input(ctx)
    no_boolean(ctx, t.elem_type)
    emit_abs(ctx, ctx.inputs[0], t.elem_type, ctx.out())
    return [t]


def emit_convert(ctx: OpContext, t: TensorType, target: dtypes.DType) -> list[TensorType]:
    """Input 0 converted to ``target`` (C++ ``static_cast``: Cast, or Identity for the same type)."""
    if target is t.elem_type:
        ctx.require_onnx(target, "Identity")
        ctx.emit("Identity", ctx.inputs[:1], ctx.out())
    else:
        ctx.require_onnx(t.elem_type, "Cast")
        ctx.require_onnx(target, "Cast", output=True)
        ctx.emit("Cast", ctx.inputs[:1], ctx.out(), to=target.onnx)
    return [TensorType(target, t.shape)]


@register("Convert")
def convert(ctx: OpContext) -> list[TensorType]:
    t = unary_input(ctx)
    key = "target_type" if ctx.has("target_type") or not ctx.has("destination_type") else "destination_type"
    return emit_convert(ctx, t, ctx.attr_type(key))
