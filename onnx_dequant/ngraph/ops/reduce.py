"""Reductions and Softmax.

v0 reductions (Sum, Product, Max, Min, Any, All) take ``reduction_axes`` (later files: the axes as input 1, a
Constant); v1 ones (ReduceSum, ReduceProd, ReduceMax, ReduceMin, ReduceMean, ReduceLogicalAnd,
ReduceLogicalOr) take the axes as input 1 (negative counts from the end) and ``keep_dims``. No axes means the
input unchanged (ONNX would reduce everything).

nGraph's semantics kept: integer Sums wrap in the element type (narrower than 64 bits: accumulated in int64
and cast back; 64-bit: their 32-bit halves summed apart, as ONNX Runtime's int64 ReduceSum goes through
double); f32/f16/bf16 Sums accumulate in f64 and round once, near nGraph 0.26's compensated (Kahan) sum; a Sum
over no axes adds each element to +0 (-0 becomes +0). Product on 8/16-bit integers accumulates in 64 bits and
casts back, which wraps exactly as nGraph's arithmetic in the element type. Max / Min start from -inf / +inf
(the type's lowest / highest for integers) and take ``x > m`` / ``x < m``: a NaN never wins, so on reals NaN
becomes -inf / +inf before ONNX ReduceMax / ReduceMin (which would propagate it). Any / All of an empty set
are false / true. ReduceMean on integers is the (wrapping) sum divided by the count, truncated, as C++.
Softmax over one axis is ONNX Softmax; over several it is exp(x - max) / sum, reduced over all of them.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...contract import Dim, TensorType
from ..context import OpContext, accumulator, shape_str
from . import register
from .shape import reshape_node

_BOOL = dtypes.parse("boolean")
_I64 = dtypes.parse("i64")
_F64 = dtypes.parse("f64")


def _check_axes(ctx: OpContext, axes: tuple[int, ...], rank: int) -> None:
    for a in axes:
        if a >= rank:
            raise ctx.error(f"Reduction axis ({a}) is out of bounds (argument shape: {shape_str(ctx.types[0].shape)})")


def _reduce_node(ctx: OpContext, onnx_op: str, x: str, axes: tuple[int, ...], keep: bool, out: str | None) -> str:
    """One ONNX Reduce* node over ``axes`` (as an input from opset 18, or 13 for ReduceSum)."""
    first_with_input = 13 if onnx_op == "ReduceSum" else 18
    if ctx.b.opset >= first_with_input:
        return ctx.emit(onnx_op, [x, ctx.int64s(axes)], out, keepdims=int(keep))
    return ctx.emit(onnx_op, [x], out, keepdims=int(keep), axes=list(axes))


def _axes(ctx: OpContext, rank: int) -> tuple[tuple[int, ...], bool]:
    """The reduction axes (sorted, distinct, checked) and keep_dims, from attributes or input 1."""
    if ctx.op.version >= 1:
        ctx.expect_inputs(2)
        keep = ctx.attr_bool("keep_dims", False)
    else:
        ctx.expect_inputs(1, 2)
        keep = False
    if len(ctx.inputs) == 2:
        values = ctx.constant_ints(1, "reduction axes", lo=-rank if ctx.op.version >= 1 else 0, hi=max(rank - 1, 0))
        axes = tuple(sorted({a + rank if a < 0 else a for a in values}))
    else:
        axes = ctx.attr_axes("reduction_axes")
    _check_axes(ctx, axes, rank)
    return axes, keep


def _out_shape(t: TensorType, axes: tuple[int, ...], keep: bool) -> tuple[Dim, ...]:
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(t.shape))  # type: ignore[union-attr, arg-type]
    return tuple(d for i, d in enumerate(t.shape) if i not in axes)  # type: ignore[union-attr, arg-type]


def _identity(ctx: OpContext, t: TensorType) -> list[TensorType]:
    ctx.require_onnx(t.elem_type, "Identity")
    ctx.emit("Identity", [ctx.inputs[0]], ctx.out())
    return [t]


def _numeric_reduction(ctx: OpContext, boolean_message: str) -> tuple[TensorType, tuple[int, ...], bool]:
    """The input's type, the reduced axes and keep_dims of a reduction that refuses boolean input."""
    rank = ctx.rank(0) if ctx.inputs else 0
    axes, keep = _axes(ctx, rank)
    t = ctx.types[0]
    if t.elem_type.kind == "boolean":
        raise ctx.error(boolean_message)
    return t, axes, keep


def _arithmetic(onnx_op: str, what: str):
    """Sum / Product (ReduceSum / ReduceProd): narrow integers accumulate in 64 bits, then wrap back."""

    def convert(ctx: OpContext) -> list[TensorType]:
        t, axes, keep = _numeric_reduction(ctx, f"Argument for {what} must have a numeric element type (got boolean)")
        dt = t.elem_type
        x = ctx.inputs[0]
        if not axes:
            if onnx_op == "ReduceSum" and dt.is_real:  # 0 + x: -0 gives +0, as nGraph's sum from 0
                ctx.require_onnx(dt, "Add")
                ctx.emit("Add", [x, ctx.scalar(0, dt)], ctx.out())
                return [t]
            return _identity(ctx, t)
        if onnx_op == "ReduceProd" and not dt.is_real:
            return _int_product(ctx, t, axes, keep)
        if onnx_op == "ReduceSum":
            _sum(ctx, x, dt, axes, keep, ctx.out())
            return [TensorType(dt, _out_shape(t, axes, keep))]
        wide = accumulator(dt)
        ctx.require_onnx(wide or dt, onnx_op)
        if wide is None:
            _reduce_node(ctx, onnx_op, x, axes, keep, ctx.out())
        else:
            ctx.require_onnx(dt, "Cast")
            s = _reduce_node(ctx, onnx_op, ctx.emit("Cast", [x], to=wide.onnx), axes, keep, None)
            ctx.emit("Cast", [s], ctx.out(), to=dt.onnx)
        return [TensorType(dt, _out_shape(t, axes, keep))]

    return convert


def _sum(ctx: OpContext, x: str, dt: dtypes.DType, axes: tuple[int, ...], keep: bool, out: str | None) -> str:
    """The sum over ``axes`` as nGraph computes it: reals near the exact sum (nGraph 0.26 compensates;
    f32/f16/bf16 here accumulate in f64 and round once), integers wrapping in the element type."""
    if dt.is_real:
        ctx.require_onnx(dt, "Cast")
        ctx.require_onnx(_F64, "ReduceSum")
        if dt is _F64:
            return _reduce_node(ctx, "ReduceSum", x, axes, keep, out)
        s = _reduce_node(ctx, "ReduceSum", ctx.emit("Cast", [x], to=_F64.onnx), axes, keep, None)
        return ctx.emit("Cast", [s], out, to=dt.onnx)
    ctx.require_onnx(dt, "Cast")
    ctx.require_onnx(_I64, "ReduceSum", "Div", "Mul", "Sub", "Add")
    w = ctx.emit("Cast", [x], to=_I64.onnx) if dt is not _I64 else x
    if dt.bits < 64:  # exact in 64 bits; the cast back wraps as nGraph's sum in the element type
        return ctx.emit("Cast", [_reduce_node(ctx, "ReduceSum", w, axes, keep, None)], out, to=dt.onnx)
    # 64-bit: ONNX Runtime's integer ReduceSum accumulates in double (it rounds and saturates), so the two
    # 32-bit halves are summed apart (each sum exact below 2^21 terms) and recombined, wrapping
    base = ctx.scalar(2**32, _I64)
    hi = ctx.emit("Div", [w, base])
    lo = ctx.emit("Sub", [w, ctx.emit("Mul", [hi, base])])
    high = ctx.emit("Mul", [_reduce_node(ctx, "ReduceSum", hi, axes, keep, None), base])
    low = _reduce_node(ctx, "ReduceSum", lo, axes, keep, None)
    if dt is _I64:
        return ctx.emit("Add", [high, low], out)
    return ctx.emit("Cast", [ctx.emit("Add", [high, low])], out, to=dt.onnx)


MAX_PRODUCT_TERMS = 4096
"""Integer Product multiplies at most this many values per output (one Mul node each)."""


def _int_product(ctx: OpContext, t: TensorType, axes: tuple[int, ...], keep: bool) -> list[TensorType]:
    """Integer Product wrapping as nGraph's multiplication in the element type: ONNX Runtime's integer
    ReduceProd saturates, so the reduced values are split apart and multiplied pairwise in 64 bits
    (exact modulo 2^64, hence modulo the element type after the cast back)."""
    dt = t.elem_type
    shape = ctx.static_shape(0)
    rank = len(shape)
    count = int(np.prod([shape[a] for a in axes]))
    out_shape = _out_shape(t, axes, keep)
    if count == 0 or count > MAX_PRODUCT_TERMS:
        raise ctx.error(
            f"integer Product over {count} values per output is not supported (1 to {MAX_PRODUCT_TERMS}: "
            "ONNX Runtime's integer ReduceProd saturates, so each value becomes one Mul)"
        )
    ctx.require_onnx(dt, "Cast")
    rest = [i for i in range(rank) if i not in axes]
    x = ctx.emit("Cast", [ctx.inputs[0]], to=_I64.onnx)
    if list(axes) + rest != list(range(rank)):
        x = ctx.emit("Transpose", [x], perm=list(axes) + rest)
    x = ctx.emit("Reshape", [x, ctx.int64s([count, int(np.prod([shape[i] for i in rest]))])])
    if count == 1:
        terms = [x]
    else:
        terms = [ctx.b.reserve(f"{ctx.name}/term") for _ in range(count)]
        ctx.emit_multi("Split", [x, ctx.int64s([1] * count)], terms, axis=0)
    while len(terms) > 1:
        paired = [ctx.emit("Mul", [terms[i], terms[i + 1]]) for i in range(0, len(terms) - 1, 2)]
        terms = paired + ([terms[-1]] if len(terms) % 2 else [])
    y = ctx.b.reserve(f"{ctx.name}/product")
    reshape_node(ctx, terms[0], list(out_shape), y)  # type: ignore[arg-type]
    ctx.emit("Cast", [y], ctx.out(), to=dt.onnx)
    return [TensorType(dt, out_shape)]


register("Sum")(_arithmetic("ReduceSum", "Sum"))
register("ReduceSum", versions=(1,))(_arithmetic("ReduceSum", "Sum"))
register("Product")(_arithmetic("ReduceProd", "Product"))
register("ReduceProd", versions=(1,))(_arithmetic("ReduceProd", "Product"))


def _extremum(onnx_op: str, nan_to: float):
    """Max / Min: NaN never wins (it becomes -inf / +inf, the start value, before the ONNX reduction)."""

    def convert(ctx: OpContext) -> list[TensorType]:
        t, axes, keep = _numeric_reduction(ctx, f"{ctx.op.op} on boolean is not supported (numeric types only)")
        dt = t.elem_type
        if not axes and not dt.is_real:
            return _identity(ctx, t)
        x = ctx.inputs[0]
        ctx.require_onnx(dt, onnx_op)
        if dt.is_real:  # also without axes: each output is max(-inf, x), so NaN gives -inf
            ctx.require_onnx(dt, "IsNaN", "Where")
            nan = ctx.emit("IsNaN", [x])
            x = ctx.emit("Where", [nan, ctx.scalar(np.float64(nan_to), dt), x], None if axes else ctx.out())
            if not axes:
                return [t]
        _reduce_node(ctx, onnx_op, x, axes, keep, ctx.out())
        return [TensorType(dt, _out_shape(t, axes, keep))]

    return convert


register("Max")(_extremum("ReduceMax", -np.inf))
register("ReduceMax", versions=(1,))(_extremum("ReduceMax", -np.inf))
register("Min")(_extremum("ReduceMin", np.inf))
register("ReduceMin", versions=(1,))(_extremum("ReduceMin", np.inf))


def _logical(any_: bool):
    """Any / All: a count of true (Any) or false (All) values in int64, compared with zero."""

    def convert(ctx: OpContext) -> list[TensorType]:
        rank = ctx.rank(0) if ctx.inputs else 0
        axes, keep = _axes(ctx, rank)
        t = ctx.types[0]
        if t.elem_type is not _BOOL:
            raise ctx.error(f"Input element type must be boolean (got {t.elem_type})")
        if not axes:
            return _identity(ctx, t)
        x = ctx.inputs[0]
        if not any_:
            x = ctx.emit("Not", [x])
        n = _reduce_node(ctx, "ReduceSum", ctx.emit("Cast", [x], to=_I64.onnx), axes, keep, None)
        zero = ctx.scalar(0, _I64)
        if any_:
            ctx.emit("Greater", [n, zero], ctx.out())
        else:
            ctx.emit("Equal", [n, zero], ctx.out())
        return [TensorType(_BOOL, _out_shape(t, axes, keep))]

    return convert


register("Any")(_logical(True))
register("ReduceLogicalOr", versions=(1,))(_logical(True))
register("All")(_logical(False))
register("ReduceLogicalAnd", versions=(1,))(_logical(False))


@register("ReduceMean", versions=(1,))
def reduce_mean(ctx: OpContext) -> list[TensorType]:
    rank = ctx.rank(0) if ctx.inputs else 0
    axes, keep = _axes(ctx, rank)
    t = ctx.types[0]
    dt = t.elem_type
    if dt.kind == "boolean":
        raise ctx.error("ReduceMean on boolean is not supported (numeric types only)")
    if not axes:
        return _identity(ctx, t)
    x = ctx.inputs[0]
    if dt.is_real:
        ctx.require_onnx(dt, "ReduceMean")
        _reduce_node(ctx, "ReduceMean", x, axes, keep, ctx.out())
    else:  # the sum in the element type (wrapping), divided by the count, truncated
        shape = ctx.static_shape(0)
        count = int(np.prod([shape[a] for a in axes]))
        s = ctx.emit("Cast", [_sum(ctx, x, dt, axes, keep, None)], to=_I64.onnx)
        ctx.emit("Cast", [ctx.emit("Div", [s, ctx.scalar(max(count, 1), _I64)])], ctx.out(), to=dt.onnx)
    return [TensorType(dt, _out_shape(t, axes, keep))]


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
