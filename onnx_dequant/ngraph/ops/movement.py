"""Reverse, ReplaceSlice and OneHot.

- Reverse v0 (``reversed_axes``) and v1 (axes as Constant input 1, ``mode`` "index" or "mask"): a Slice
  with step -1 on each axis.
- ReplaceSlice: the data with a strided slice replaced by input 1; ScatterND with the slice's
  coordinates (static shapes).
- OneHot v0 (``shape``, ``one_hot_axis``; the output has the input's element type) and v1 (depth, on and
  off values as inputs; ``axis``, -1 the last) take integer indices: nGraph sets a 1 only where the index
  is inside ``[0, depth)``; negatives (ONNX OneHot would count them from the end) and indices past the
  depth give an all-zero (off) row. It becomes Equal against 0..depth-1 in 64-bit integers, then Cast
  (v0) or Where(on, off) (v1).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import MAX_DIM, OpContext, numel, shape_str
from . import register
from .shape import slice_bounds

_I64, _U64 = dtypes.parse("i64"), dtypes.parse("u64")


@register("Reverse", versions=(0, 1))
def reverse(ctx: OpContext) -> list[TensorType]:
    if ctx.op.version >= 1:
        ctx.expect_inputs(2)
        rank = ctx.rank(0)
        mode = ctx.raw("mode", "index")
        mode = mode.strip().lower() if isinstance(mode, str) else mode
        if mode == "mask" or mode == 1:
            mask = ctx.constant_ints(1, "axes mask", lo=0, hi=1)
            if len(mask) != rank:
                raise ctx.error(f"The number of elements in the reversed_axes mask ({len(mask)}) must match the rank")
            axes = tuple(i for i, m in enumerate(mask) if m)
        elif mode == "index" or mode == 0:
            axes = tuple(sorted(set(ctx.constant_ints(1, "axes", lo=0, hi=max(rank - 1, 0)))))
        else:
            raise ctx.error(f"'mode' must be 'index' or 'mask', got {mode!r:.40}")
    else:
        ctx.expect_inputs(1)
        rank = ctx.rank(0)
        axes = ctx.attr_axes("reversed_axes")
    t = ctx.types[0]
    for a in axes:
        if a >= rank:
            raise ctx.error(f"Reverse axis ({a}) is out of bounds (argument shape: {shape_str(t.shape)})")
    x = ctx.inputs[0]
    if not axes:
        ctx.require_onnx(t.elem_type, "Identity")
        ctx.emit("Identity", [x], ctx.out())
        return [t]
    ctx.require_onnx(t.elem_type, "Slice")
    n = len(axes)
    ends = ctx.int64s([-(1 << 62)] * n)
    ctx.emit("Slice", [x, ctx.int64s([-1] * n), ends, ctx.int64s(list(axes)), ctx.int64s([-1] * n)], ctx.out())
    return [t]


@register("ReplaceSlice")
def replace_slice(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t, tr = ctx.types
    if t.elem_type is not tr.elem_type:
        raise ctx.error(f"Argument element types do not match ({t.elem_type} and {tr.elem_type})")
    shape = ctx.static_shape(0)
    lower, upper, strides, sliced = slice_bounds(ctx, shape)
    if tr.shape is not None and tuple(tr.shape) != tuple(sliced):
        same = len(tr.shape) == len(sliced) and all(not isinstance(a, int) or a == b for a, b in zip(tr.shape, sliced))
        if not same:
            raise ctx.error(
                f"Shape of replacement tensor ({shape_str(tr.shape)}) does not match the slice shape "
                f"({shape_str(tuple(sliced))})"
            )
    x, r = ctx.inputs
    if numel(sliced) == 0:
        ctx.require_onnx(t.elem_type, "Identity")
        ctx.emit("Identity", [x], ctx.out())
        return [t]
    ctx.require_onnx(t.elem_type, "ScatterND")
    grids = np.meshgrid(
        *[np.arange(lo, hi, st, dtype=np.int64) for lo, hi, st in zip(lower, upper, strides)], indexing="ij"
    )
    indices = np.stack(grids, axis=-1) if grids else np.zeros((0,), np.int64)
    ctx.emit("ScatterND", [x, ctx.const(indices, np.int64, f"{ctx.name}/indices"), r], ctx.out())
    return [t]


def _one_hot_mask(ctx: OpContext, axis: int, depth: int) -> str:
    """Boolean: input value == position along the new ``axis``, exact for every element type."""
    t = ctx.types[0]
    dt = t.elem_type
    x = ctx.inputs[0]
    if dt.kind == "boolean" or dt.is_real:
        raise ctx.error("Argument does not have integral element type.")
    wide = _U64 if dt is _U64 else _I64
    if dt is not wide:
        ctx.require_onnx(dt, "Cast")
        x = ctx.emit("Cast", [x], to=wide.onnx)
    x = ctx.emit("Unsqueeze", [x, ctx.int64s([axis])])
    rank = len(t.shape)  # type: ignore[arg-type]
    iota = np.arange(depth, dtype=wide.numpy).reshape([depth] + [1] * (rank - axis))
    return ctx.emit("Equal", [x, ctx.const(iota, wide, f"{ctx.name}/positions")])


@register("OneHot", versions=(0, 1))
def one_hot(ctx: OpContext) -> list[TensorType]:
    if ctx.op.version >= 1:
        ctx.expect_inputs(4)
        rank = ctx.rank(0)
        axis = ctx.attr_int("axis", lo=-rank - 1, hi=rank)
        axis = axis + rank + 1 if axis < 0 else axis
        values = ctx.constant_ints(1, "depth", lo=0)
        if len(values) != 1:
            raise ctx.error(f"depth (input 1) must be a scalar, got {len(values)} values")
        depth = values[0]
        t_on, t_off = ctx.types[2], ctx.types[3]
        if t_on.elem_type is not t_off.elem_type:
            raise ctx.error(f"on_value ({t_on.elem_type}) and off_value ({t_off.elem_type}) types must match")
        for tv, what in ((t_on, "on_value"), (t_off, "off_value")):
            if tv.shape is not None and tv.shape != ():
                raise ctx.error(f"{what} must be a scalar, got shape {shape_str(tv.shape)}")
        shape = list(ctx.types[0].shape)  # type: ignore[arg-type]
        shape.insert(axis, depth)
        ctx.require_onnx(t_on.elem_type, "Where")
        mask = _one_hot_mask(ctx, axis, depth)
        ctx.emit("Where", [mask, ctx.inputs[2], ctx.inputs[3]], ctx.out())
        return [TensorType(t_on.elem_type, tuple(shape))]
    ctx.expect_inputs(1)
    rank = ctx.rank(0)
    t = ctx.types[0]
    out_shape = ctx.attr_ints("shape", hi=MAX_DIM)
    axis = ctx.attr_int("one_hot_axis", hi=len(out_shape) - 1 if out_shape else 0)
    if len(out_shape) != rank + 1 or axis >= len(out_shape):
        raise ctx.error(
            f"Argument shape {shape_str(t.shape)} does not match the expected shape of {shape_str(tuple(out_shape))} "
            f"with one-hot axis {axis}"
        )
    kept = out_shape[:axis] + out_shape[axis + 1 :]
    if any(isinstance(a, int) and a != b for a, b in zip(t.shape, kept)):  # type: ignore[arg-type]
        raise ctx.error(
            f"Argument shape {shape_str(t.shape)} does not match the expected shape of {shape_str(tuple(out_shape))}"
        )
    ctx.require_onnx(t.elem_type, "Cast", output=True)
    mask = _one_hot_mask(ctx, axis, out_shape[axis])
    ctx.emit("Cast", [mask], ctx.out(), to=t.elem_type.onnx)
    return [TensorType(t.elem_type, tuple(out_shape))]
