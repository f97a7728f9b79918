"""Sum (over ``reduction_axes``) and Softmax (over ``softmax_axes``; op_version 1: one ``axis``).

Sum on integers narrower than 64 bits accumulates in int64 and casts back, which wraps exactly as nGraph's
accumulation in the element type does; 64-bit sums add their 32-bit halves apart (ONNX Runtime's int64
ReduceSum goes through double). A Sum over no axes adds each element to +0, as nGraph does (-0 becomes +0).
Float sums: nGraph 0.26 adds with Kahan compensation, nearly the correctly rounded sum; f32/f16/bf16 sums
here accumulate in f64 and round once (at most 1 ULP apart); f64 sums are ONNX Runtime's.
Softmax over one axis is ONNX Softmax; over several it is exp(x - max) / sum, reduced over all of them.
"""

from __future__ import annotations

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register

_F64, _I64 = dtypes.parse("f64"), dtypes.parse("i64")


def _check_axes(ctx: OpContext, axes: tuple[int, ...], rank: int) -> None:
    for a in axes:
        if a >= rank:
            raise ctx.error(f"Reduction axis ({a}) is out of bounds (argument shape: {shape_str(ctx.types[0].shape)})")


@register("Sum")
def sum_(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.types[0]
    axes = ctx.attr_axes("reduction_axes")
    rank = ctx.rank(0)
    _check_axes(ctx, axes, rank)
    dt = t.elem_type
    if dt.kind == "boolean":
        raise ctx.error("Argument for Sum must have a numeric element type (got boolean)")
    out_shape = tuple(d for i, d in enumerate(t.shape) if i not in axes)  # type: ignore[union-attr]
    x = ctx.inputs[0]
    if not axes:
        if dt.is_real:  # nGraph adds each element to +0: -0 becomes +0
            ctx.require_onnx(dt, "Add")
            ctx.emit("Add", [x, ctx.scalar(0, dt)], ctx.out())
        else:
            ctx.require_onnx(dt, "Identity")
            ctx.emit("Identity", [x], ctx.out())
        return [t]
    ax = ctx.int64s(axes)
    if dt.is_real:
        ctx.require_onnx(dt, "Cast")
        ctx.require_onnx(_F64, "ReduceSum")
        if dt is _F64:
            ctx.emit("ReduceSum", [x, ax], ctx.out(), keepdims=0)
        else:  # summed in f64, rounded once: what nGraph's compensated sum approaches
            s = ctx.emit("ReduceSum", [ctx.emit("Cast", [x], to=_F64.onnx), ax], keepdims=0)
            ctx.emit("Cast", [s], ctx.out(), to=dt.onnx)
        return [TensorType(dt, out_shape)]
    ctx.require_onnx(dt, "Cast")
    ctx.require_onnx(_I64, "ReduceSum", "Div", "Mul", "Sub", "Add")
    w = ctx.emit("Cast", [x], to=_I64.onnx) if dt is not _I64 else x
    if dt.bits < 64:  # exact in 64 bits; the cast back wraps as nGraph's sum in the element type
        s = ctx.emit("ReduceSum", [w, ax], keepdims=0)
        ctx.emit("Cast", [s], ctx.out(), to=dt.onnx)
        return [TensorType(dt, out_shape)]
    # 64-bit: ONNX Runtime's ReduceSum saturates and rounds (it accumulates in double), so the two 32-bit
    # halves are summed apart (each sum exact below 2^21 terms) and recombined with wrapping arithmetic
    base = ctx.scalar(2**32, _I64)
    hi = ctx.emit("Div", [w, base])
    lo = ctx.emit("Sub", [w, ctx.emit("Mul", [hi, base])])
    high = ctx.emit("Mul", [ctx.emit("ReduceSum", [hi, ax], keepdims=0), base])
    low = ctx.emit("ReduceSum", [lo, ax], keepdims=0)
    if dt is _I64:
        ctx.emit("Add", [high, low], ctx.out())
    else:
        ctx.emit("Cast", [ctx.emit("Add", [high, low])], ctx.out(), to=dt.onnx)
    return [TensorType(dt, out_shape)]


@register("Softmax", versions=(0, 1))
def softmax(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.types[0]
    rank = ctx.rank(0)
    if ctx.op.version >= 1 or (ctx.has("axis") and not ctx.has("softmax_axes")):
        axes: tuple[int, ...] = (ctx.attr_int("axis", 1),)
    else:
        axes = ctx.attr_axes("softmax_axes")
    _check_axes(ctx, axes, rank)
    if not axes:
        raise ctx.error("Softmax needs at least one axis in 'softmax_axes'")
    if not t.elem_type.is_real:
        raise ctx.error(f"Softmax on {t.elem_type} is not supported (real types only)")
    x = ctx.inputs[0]
    if len(axes) == 1:
        ctx.require_onnx(t.elem_type, "Softmax")
        ctx.emit("Softmax", [x], ctx.out(), axis=axes[0])
    else:
        ctx.require_onnx(t.elem_type, "ReduceMax", "Exp", "ReduceSum")
        ax = ctx.int64s(axes)
        m = (
            ctx.emit("ReduceMax", [x, ax], keepdims=1)
            if ctx.b.opset >= 18
            else ctx.emit("ReduceMax", [x], keepdims=1, axes=list(axes))
        )
        e = ctx.emit("Exp", [ctx.emit("Sub", [x, m])])
        s = ctx.emit("ReduceSum", [e, ax], keepdims=1)
        ctx.emit("Div", [e, s], ctx.out())
    return [t]
