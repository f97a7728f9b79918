"""The elementwise training ops: ReluBackprop, SigmoidBackprop, GeluBackpropFactor, StopGradient,
PartialSlice and PartialSliceBackprop, each as nGraph's reference kernel or decomposition computes it.

- ReluBackprop(x, delta): ``x > 0 ? delta : 0`` (NaN and -0 in ``x`` give 0).
- SigmoidBackprop(x, delta): ``f = 1 / (1 + exp(-x)); delta * f * (1 - f)``, step by step (not ONNX Sigmoid).
- GeluBackpropFactor(x): nGraph's decomposition ``0.5 * (1 + erf(x * sqrt(0.5))) + x * exp(x * x * -0.5) / sqrt(2 pi)``
  with its constants rounded to the element type, in its order of operations.
- StopGradient(x): the identity (it only stops nGraph's autodiff).
- PartialSlice: a Slice over ``axes`` whose bounds may count from the end and are clamped to the axis, then
  ``decrease_axes`` (of size 1) dropped; PartialSliceBackprop: the delta placed into zeros of the data's shape.
"""

from __future__ import annotations

import math

from ...contract import Dim, TensorType
from ..context import OpContext, shape_str
from . import register
from .elementwise import binary_inputs, no_boolean, unary_input
from .shape import reshape_node


def _real(ctx: OpContext, t: TensorType) -> None:
    if not t.elem_type.is_real:
        raise ctx.error(f"Argument element type must be f16, bf16, f32, f64 or dynamic (got {t.elem_type})")


@register("ReluBackprop")
def relu_backprop(ctx: OpContext) -> list[TensorType]:
    x, delta, t = binary_inputs(ctx)
    dt = t.elem_type
    no_boolean(ctx, dt)
    ctx.require_onnx(dt, "Greater", "Where")
    zero = ctx.scalar(0, dt)
    ctx.emit("Where", [ctx.emit("Greater", [x, zero]), delta, zero], ctx.out())
    return [t]


@register("SigmoidBackprop")
def sigmoid_backprop(ctx: OpContext) -> list[TensorType]:
    x, delta, t = binary_inputs(ctx)
    dt = t.elem_type
    _real(ctx, t)
    ctx.require_onnx(dt, "Neg", "Exp", "Add", "Div", "Sub", "Mul")
    one = ctx.scalar(1, dt)
    f = ctx.emit("Div", [one, ctx.emit("Add", [one, ctx.emit("Exp", [ctx.emit("Neg", [x])])])])
    ctx.emit("Mul", [ctx.emit("Mul", [delta, f]), ctx.emit("Sub", [one, f])], ctx.out())
    return [t]


@register("GeluBackpropFactor")
def gelu_backprop_factor(ctx: OpContext) -> list[TensorType]:
    t = unary_input(ctx)
    dt = t.elem_type
    _real(ctx, t)
    ctx.require_onnx(dt, "Mul", "Erf", "Add", "Exp")
    x = ctx.inputs[0]
    half = ctx.scalar(0.5, dt)
    e1 = ctx.emit(
        "Mul",
        [
            half,
            ctx.emit(
                "Add", [ctx.scalar(1, dt), ctx.emit("Erf", [ctx.emit("Mul", [x, ctx.scalar(math.sqrt(0.5), dt)])])]
            ),
        ],
    )
    xx = ctx.emit("Mul", [ctx.emit("Mul", [x, x]), ctx.scalar(-0.5, dt)])
    e2 = ctx.emit("Mul", [ctx.emit("Mul", [x, ctx.emit("Exp", [xx])]), ctx.scalar(1 / math.sqrt(2 * math.pi), dt)])
    ctx.emit("Add", [e1, e2], ctx.out())
    return [t]


@register("StopGradient")
def stop_gradient(ctx: OpContext) -> list[TensorType]:
    t = unary_input(ctx)
    ctx.require_onnx(t.elem_type, "Identity")
    ctx.emit("Identity", ctx.inputs, ctx.out())
    return [t]


def _partial_bounds(ctx: OpContext, shape: tuple[int, ...]) -> tuple[list[int], list[int], list[int]]:
    """The static ``(axes, starts, ends)`` of a PartialSlice(Backprop): negative bounds count from the end,
    then clamped to ``[0, axis length]``, a start past its end moved to the end (nGraph's decomposition)."""
    rank = len(shape)
    axes = ctx.attr_ints("axes", hi=max(rank - 1, 0))
    lower = ctx.attr_ints("lower_bounds", lo=-(1 << 62), hi=1 << 62, length=len(axes))
    upper = ctx.attr_ints("upper_bounds", lo=-(1 << 62), hi=1 << 62, length=len(axes))
    if rank == 0 or len(set(axes)) != len(axes):
        raise ctx.error(f"'axes' must be distinct axes of the data (shape {shape_str(shape)}), got {axes}")
    starts, ends = [], []
    for a, lo, hi in zip(axes, lower, upper):
        n = shape[a]
        s = min(max(lo + n if lo < 0 else lo, 0), n)
        e = min(max(hi + n if hi < 0 else hi, 0), n)
        starts.append(min(s, e))
        ends.append(e)
    return axes, starts, ends


@register("PartialSlice")
def partial_slice(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.types[0]
    _real(ctx, t)
    shape = ctx.static_shape(0, "data")
    axes, starts, ends = _partial_bounds(ctx, shape)
    decrease = ctx.attr_ints("decrease_axes", [], hi=max(len(shape) - 1, 0))
    sliced: list[Dim] = list(shape)
    for a, s, e in zip(axes, starts, ends):
        sliced[a] = e - s
    for a in decrease:
        if sliced[a] != 1:
            raise ctx.error(f"Decrease dim should be 1 (axis {a} of the slice {shape_str(tuple(sliced))})")
    out = sliced
    if decrease:
        out = [d for i, d in enumerate(sliced) if i not in decrease] or [1]
    ctx.require_onnx(t.elem_type, "Slice", "Reshape")
    x = ctx.emit("Slice", [ctx.inputs[0], ctx.int64s(starts), ctx.int64s(ends), ctx.int64s(axes)])
    reshape_node(ctx, x, out, ctx.out())  # a zero-length slice keeps its zero (allowzero)
    return [TensorType(t.elem_type, tuple(out))]


@register("PartialSliceBackprop")
def partial_slice_backprop(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t, td = ctx.types
    _real(ctx, t)
    if td.elem_type is not t.elem_type:
        raise ctx.error(f"Argument element types are inconsistent ({t.elem_type} and {td.elem_type})")
    shape = ctx.static_shape(0, "data")
    dshape = ctx.static_shape(1, "delta")
    axes, starts, ends = _partial_bounds(ctx, shape)
    region = list(shape)
    for a, s, e in zip(axes, starts, ends):
        region[a] = e - s
    if math.prod(region) != math.prod(dshape):
        raise ctx.error(f"the delta {shape_str(dshape)} does not fill the slice {shape_str(tuple(region))}")
    ctx.require_onnx(t.elem_type, "Reshape", "Pad")
    d = ctx.emit("Reshape", [ctx.inputs[1], ctx.int64s(region)])
    below = [0] * len(shape)
    above = [0] * len(shape)
    for a, s, e in zip(axes, starts, ends):
        below[a], above[a] = s, shape[a] - e
    ctx.emit("Pad", [d, ctx.int64s(below + above), ctx.scalar(0, t.elem_type)], ctx.out(), mode="constant")
    return [TensorType(t.elem_type, tuple(shape))]
