"""Sum (over ``reduction_axes``) and Softmax (over ``softmax_axes``; op_version 1: one ``axis``).

Sum on 8/16-bit integers accumulates in 64 bits and casts back, which wraps exactly as nGraph's
accumulation in the element type does. Float sums agree with nGraph up to rounding: nGraph adds in
order (later versions with Kahan compensation), ONNX Runtime in its own order.
Softmax over one axis is ONNX Softmax; over several it is exp(x - max) / sum, reduced over all of them.
"""

from __future__ import annotations

from ...contract import TensorType
from ..context import OpContext, accumulator, shape_str
from . import register


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
        ctx.require_onnx(dt, "Identity")
        ctx.emit("Identity", [x], ctx.out())
        return [t]
    wide = accumulator(dt)
    ctx.require_onnx(wide or dt, "ReduceSum")
    if wide is None:
        ctx.emit("ReduceSum", [x, ctx.int64s(axes)], ctx.out(), keepdims=0)
    else:
        ctx.require_onnx(dt, "Cast")
        x = ctx.emit("Cast", [x], to=wide.onnx)
        s = ctx.emit("ReduceSum", [x, ctx.int64s(axes)], keepdims=0)
        ctx.emit("Cast", [s], ctx.out(), to=dt.onnx)
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
