"""Reshape (v0: a transpose by ``input_order``, then a row-major reshape), Broadcast (v0), Concat, Slice."""

from __future__ import annotations

from ...contract import Dim, Shape, TensorType
from ..context import OpContext, known, numel, shape_str
from . import register


def reshape_node(ctx: OpContext, x: str, shape: list[int], out: str) -> None:
    if 0 in shape:
        if ctx.b.opset < 14:
            raise ctx.error(
                f"reshaping to a shape with a zero dimension {shape_str(tuple(shape))} needs opset 14 or later"
            )
        ctx.emit("Reshape", [x, ctx.int64s(shape)], out, allowzero=1)
    else:
        ctx.emit("Reshape", [x, ctx.int64s(shape)], out)


@register("Reshape")
def reshape(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.types[0]
    rank = ctx.rank(0)
    order = ctx.attr_ints("input_order", list(range(rank)))
    out_shape = ctx.attr_ints("output_shape")
    if sorted(order) != list(range(rank)):
        raise ctx.error(
            f"Input axis order is not a permutation of argument's axis indices "
            f"(axis order: {order}, argument shape: {shape_str(t.shape)})"
        )
    if known(t.shape) and numel(t.shape) != numel(out_shape):  # type: ignore[arg-type]
        raise ctx.error(
            f"Product of output shape dimensions does not match product of argument shape dimensions "
            f"({shape_str(tuple(out_shape))} output, {shape_str(t.shape)} input)"
        )
    x = ctx.inputs[0]
    transposed = tuple(t.shape[i] for i in order)  # type: ignore[index]
    identity_order = order == list(range(rank))
    same_shape = transposed == tuple(out_shape)
    dt = t.elem_type
    if identity_order and same_shape:
        ctx.require_onnx(dt, "Identity")
        ctx.emit("Identity", [x], ctx.out())
    elif same_shape:
        ctx.require_onnx(dt, "Transpose")
        ctx.emit("Transpose", [x], ctx.out(), perm=order)
    else:
        if not identity_order:
            ctx.require_onnx(dt, "Transpose")
            x = ctx.emit("Transpose", [x], perm=order)
        ctx.require_onnx(dt, "Reshape")
        reshape_node(ctx, x, out_shape, ctx.out())
    return [TensorType(t.elem_type, tuple(out_shape))]


def broadcast_to(ctx: OpContext, shape: list[int], axes: tuple[int, ...]) -> list[TensorType]:
    """Input 0 broadcast to ``shape`` along the new axes ``axes`` (v0 Broadcast's rule and messages)."""
    t = ctx.types[0]
    bad = next((a for a in axes if a >= len(shape)), None)
    if bad is not None:
        raise ctx.error(
            f"Broadcast axis index ({bad}) exceeds specified output shape rank (shape: {shape_str(tuple(shape))})"
        )
    kept = [d for i, d in enumerate(shape) if i not in axes]
    compatible = t.shape is None or (
        len(t.shape) == len(kept) and all(not isinstance(a, int) or a == b for a, b in zip(t.shape, kept))
    )
    if not compatible:
        raise ctx.error(
            f"Broadcast argument shape, specified output shape, and axes are incompatible "
            f"(argument shape: {shape_str(t.shape)}, output shape: {shape_str(tuple(shape))}, broadcast axes: {list(axes)})"  # noqa: E501  (nGraph's message, whole so it can be searched)
        )
    x = ctx.inputs[0]
    if not axes:
        ctx.require_onnx(t.elem_type, "Identity")
        ctx.emit("Identity", [x], ctx.out())
    else:
        ctx.require_onnx(t.elem_type, "Unsqueeze", "Expand")
        x = ctx.emit("Unsqueeze", [x, ctx.int64s(axes)])
        ctx.emit("Expand", [x, ctx.int64s(shape)], ctx.out())
    return [TensorType(t.elem_type, tuple(shape))]


@register("Broadcast")
def broadcast(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    return broadcast_to(ctx, ctx.attr_ints("shape"), ctx.attr_axes("axes"))


@register("Concat")
def concat(ctx: OpContext) -> list[TensorType]:
    if not ctx.inputs:
        raise ctx.error("At least one argument required")
    axis = ctx.attr_int("axis")
    t0 = ctx.types[0]
    rank = ctx.rank(0)
    if axis >= rank:
        raise ctx.error(f"Concatenation axis ({axis}) is out of bounds for argument rank ({rank})")
    out: list[Dim] = list(t0.shape)  # type: ignore[arg-type]
    total: Dim = 0
    for i, t in enumerate(ctx.types):
        if t.elem_type is not t0.elem_type:
            raise ctx.error(f"Argument element types are inconsistent ({t0.elem_type} and {t.elem_type} at input {i})")
        s = ctx.types[i].shape
        if s is None or len(s) != rank:
            raise ctx.error(
                f"Argument shapes are inconsistent; they must have the same rank, and must have equal dimension "
                f"everywhere except on the concatenation axis (axis {axis}; {shape_str(t0.shape)} and {shape_str(s)})"
            )
        for k, d in enumerate(s):
            if k == axis:
                total = total + d if isinstance(total, int) and isinstance(d, int) else None
            elif isinstance(d, int) and isinstance(out[k], int) and d != out[k]:
                raise ctx.error(
                    f"Argument shapes are inconsistent; they must have the same rank, and must have equal dimension "
                    f"everywhere except on the concatenation axis (axis {axis}; {shape_str(t0.shape)} and {shape_str(s)})"  # noqa: E501  (nGraph's message, whole so it can be searched)
                )
            elif not isinstance(out[k], int):
                out[k] = d
    out[axis] = total
    ctx.require_onnx(t0.elem_type, "Concat")
    ctx.emit("Concat", ctx.inputs, ctx.out(), axis=axis)
    return [TensorType(t0.elem_type, tuple(out))]


def slice_bounds(ctx: OpContext, shape: Shape) -> tuple[list[int], list[int], list[int], list[Dim]]:
    """Slice's (and ReplaceSlice's) ``lower_bounds``, ``upper_bounds``, ``strides`` checked, and the slice's shape."""
    rank = len(shape)  # type: ignore[arg-type]
    lower = ctx.attr_ints("lower_bounds", length=rank)
    upper = ctx.attr_ints("upper_bounds", length=rank)
    strides = ctx.attr_ints("strides", [1] * rank, length=rank)
    out: list[Dim] = []
    for i, (lo, hi, st, d) in enumerate(zip(lower, upper, strides, shape)):  # type: ignore[arg-type]
        if st < 1:
            raise ctx.error(f"Strides distance for axis {i} must be positive, got {st}")
        if lo > hi:
            raise ctx.error(
                f"Lower bound for slice is greater than upper bound at axis {i} (lower bounds: {lower}, upper bounds: {upper})"  # noqa: E501  (nGraph's message, whole so it can be searched)
            )
        if isinstance(d, int) and hi > d:
            raise ctx.error(
                f"Upper bound for slice at axis {i} is out of range (upper bounds: {upper}, argument shape: {shape_str(shape)})"  # noqa: E501  (nGraph's message, whole so it can be searched)
            )
        out.append(-(-(hi - lo) // st))
    return lower, upper, strides, out


@register("Slice")
def slice_(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.types[0]
    ctx.rank(0)
    lower, upper, strides, out = slice_bounds(ctx, t.shape)
    starts, ends, axes, steps = [], [], [], []
    for i, (lo, hi, st, d) in enumerate(zip(lower, upper, strides, t.shape)):  # type: ignore[arg-type]
        if not (lo == 0 and st == 1 and isinstance(d, int) and hi == d):
            starts.append(lo)
            ends.append(hi)
            axes.append(i)
            steps.append(st)
    if not axes:
        ctx.require_onnx(t.elem_type, "Identity")
        ctx.emit("Identity", ctx.inputs, ctx.out())
    else:
        ctx.require_onnx(t.elem_type, "Slice")
        ctx.emit(
            "Slice",
            [ctx.inputs[0], ctx.int64s(starts), ctx.int64s(ends), ctx.int64s(axes), ctx.int64s(steps)],
            ctx.out(),
        )
    return [TensorType(t.elem_type, tuple(out))]
