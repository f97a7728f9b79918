"""StridedSlice (v1), DynSlice and DynReplaceSlice (v0): NumPy-style slicing with masks, through nGraph's
``make_slice_plan`` (``src/ngraph/slice_plan.cpp``), ported here as ``slice_plan``.

A plan turns begins / ends / strides and the masks (lower / upper bounds ignored, new axes, shrunk axes,
one ellipsis) into a forward Slice of the input (clipped bounds, positive strides), a reshape (new axes
of 1 in, shrunk axes out) and the output axes to reverse (negative strides). nGraph's checks are kept:
one ellipsis, no more real axes than the input has, a shrunk index inside its axis, no zero stride.
An index in both the ellipsis and the new-axis or shrink mask is refused: nGraph's counting pass and its
slicing pass read it differently (and then write past the plan). A negative stride on an empty axis
gives nGraph a plan one element long on an axis that has none (an out-of-bounds read): refused.

- StridedSlice: begin, end and (optional, else ones) strides as Constant inputs 1-3; masks are 0/1 lists
  (``begin_mask`` / ``end_mask``: 1 ignores the bound).
- DynSlice: lower bounds, upper bounds, strides as i64 Constant inputs 1-3; masks are axis lists.
- DynReplaceSlice: the data with the planned slice replaced by input 1, of the plan's output shape:
  ScatterND with the slice's coordinates, reshaped and reversed as the plan says.

The slice becomes one ONNX Slice (a reversed axis a Slice with a negative step), then Squeeze and
Unsqueeze for the shrunk and new axes; input axes of unknown size are allowed where the plan keeps them
whole (under the ellipsis, or both bounds masked with stride 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import dtypes
from ...contract import Dim, TensorType
from ..context import OpContext, numel, shape_str
from . import register

_I64 = dtypes.parse("i64")
_BEFORE_ZERO = -(1 << 62)
"""An ONNX Slice end below every index (a negative step's end before element 0)."""


@dataclass
class SlicePlan:
    """nGraph's SlicePlan: the forward slice per input axis, the reshape, the output axes to reverse."""

    begins: list[int] = field(default_factory=list)
    ends: list[Dim] = field(default_factory=list)
    strides: list[int] = field(default_factory=list)
    reshape_in: list[Dim] = field(default_factory=list)
    reshape_out: list[Dim] = field(default_factory=list)
    reverse_axes: set[int] = field(default_factory=set)
    reversed_in: set[int] = field(default_factory=set)
    """The input axes whose slice the reverse flips (those of ``reverse_axes``)."""
    shrunk_in: list[int] = field(default_factory=list)
    """The input axes the reshape drops (shrunk, of length 1)."""
    new_out: list[int] = field(default_factory=list)
    """The output axes the reshape adds (new axes of length 1)."""


def slice_plan(
    ctx: OpContext,
    shape: tuple[Dim, ...],
    begins: list[int],
    ends: list[int],
    strides: list[int],
    masks: dict[str, set[int]],
) -> SlicePlan:
    """``make_slice_plan`` with ``masks`` keyed lower, upper, new, shrink, ellipsis (sets of slice indices).

    An axis of unknown size is allowed where the plan keeps it whole (under the ellipsis, or both bounds
    masked with stride 1)."""
    if not len(begins) == len(ends) == len(strides):
        raise ctx.error(
            f"begins, ends and strides must have one length (got {len(begins)}, {len(ends)}, {len(strides)})"
        )
    lower, upper, new, shrink, ellipsis = (masks[k] for k in ("lower", "upper", "new", "shrink", "ellipsis"))
    n = len(begins)
    both = sorted(i for i in ellipsis & (new | shrink) if i < n)
    if both:
        raise ctx.error(
            f"slice index {both[0]} is in the ellipsis mask and the new-axis or shrink mask: nGraph's plan reads "
            "it both ways (undefined)"
        )
    found = [i for i in range(n) if i in ellipsis]
    if len(found) > 1:
        raise ctx.error(f"at most one ellipsis is allowed, got {len(found)} (slice indices {found})")
    real = [i for i in range(n) if i not in ellipsis and i not in new]
    if len(real) > len(shape):
        raise ctx.error(f"num_real_axes={len(real)}, input_shape={shape_str(shape)}: more slice axes than input axes")
    ellipsis_size = len(shape) - len(real)
    p = SlicePlan()
    i_in = 0

    def whole_axes() -> None:
        nonlocal i_in
        for _ in range(ellipsis_size):
            d = shape[i_in]
            p.begins.append(0), p.ends.append(d), p.strides.append(1)
            p.reshape_in.append(d), p.reshape_out.append(d)
            i_in += 1

    def size(i: int) -> int:
        d = shape[i_in]
        if not isinstance(d, int):
            raise ctx.error(f"slice index {i} needs the size of input axis {i_in}, which is unknown ({d})")
        return d

    for i in range(n):
        if i in new:
            p.new_out.append(len(p.reshape_out))
            p.reshape_out.append(1)
        elif i in shrink:
            d = size(i)
            b = begins[i]
            if not -d <= b < d:
                raise ctx.error(f"shrunk axis {i_in}: index {b} is outside [-{d}, {d}) (no clipping for shrunk axes)")
            b += d if b < 0 else 0
            p.begins.append(b), p.ends.append(b + 1), p.strides.append(1), p.reshape_in.append(1)
            p.shrunk_in.append(i_in)
            i_in += 1
        elif i in ellipsis:
            whole_axes()
        elif i in lower and i in upper and strides[i] == 1 and not isinstance(shape[i_in], int):
            d = shape[i_in]  # the whole axis, of a size unknown here
            p.begins.append(0), p.ends.append(d), p.strides.append(1), p.reshape_in.append(d), p.reshape_out.append(d)
            i_in += 1
        else:
            d, s = size(i), strides[i]
            if s == 0:
                raise ctx.error(f"slice index {i}: stride must not be zero")
            rev = s < 0
            b = (d - 1 if rev else 0) if i in lower else begins[i] + (d if begins[i] < 0 else 0)
            b = max(0, min(d - (1 if rev else 0), b))
            e = (-1 if rev else d) if i in upper else ends[i] + (d if ends[i] < 0 else 0)
            e = max(-1 if rev else 0, min(d, e))
            step = abs(s)
            if rev:
                if d == 0:
                    raise ctx.error(
                        f"a negative stride on axis {i_in} of size 0: nGraph's plan takes one element there "
                        "(an out-of-bounds read)"
                    )
                e += max(0, b - e - 1) % step
                b, e = e + 1, b + 1
                p.reverse_axes.add(len(p.reshape_out))
                p.reversed_in.add(i_in)
            e = max(e, b)
            dim = 0 if e <= b else (e - b - 1) // step + 1
            p.begins.append(b), p.ends.append(e), p.strides.append(step)
            p.reshape_in.append(dim), p.reshape_out.append(dim)
            i_in += 1
    if not found:
        whole_axes()
    return p


def _emit_slice(ctx: OpContext, p: SlicePlan, shape: tuple[Dim, ...]) -> list[TensorType]:
    """The plan applied to input 0: one Slice (reversed axes with negative steps), Squeeze, Unsqueeze."""
    dt = ctx.elem(0)
    starts, ends, axes, steps = [], [], [], []
    for i, (b, e, s, d, dim) in enumerate(zip(p.begins, p.ends, p.strides, shape, p.reshape_in)):
        if i in p.reversed_in and dim > 1:  # last element first, down to the first
            starts.append(b + (dim - 1) * s), ends.append(b - 1 if b > 0 else _BEFORE_ZERO), steps.append(-s)
            axes.append(i)
        elif not (b == 0 and e == d and s == 1):
            starts.append(b), ends.append(e), steps.append(s), axes.append(i)
    x = ctx.inputs[0]
    steps_left = [s for s in (axes, p.shrunk_in, p.new_out) if s]
    if not steps_left:
        ctx.require_onnx(dt, "Identity")
        ctx.emit("Identity", [x], ctx.out())
    ints = ctx.int64s
    if axes:
        ctx.require_onnx(dt, "Slice")
        out = ctx.out() if len(steps_left) == 1 else None
        x = ctx.emit("Slice", [x, ints(starts), ints(ends), ints(axes), ints(steps)], out)
    if p.shrunk_in:  # the reshape: shrunk axes out, then new axes in (unknown sizes stay as they are)
        ctx.require_onnx(dt, "Squeeze")
        x = ctx.emit("Squeeze", [x, ints(p.shrunk_in)], None if p.new_out else ctx.out())
    if p.new_out:
        ctx.require_onnx(dt, "Unsqueeze")
        ctx.emit("Unsqueeze", [x, ints(p.new_out)], ctx.out())
    return [TensorType(dt, tuple(p.reshape_out))]


def _bounds(ctx: OpContext, first: int, count: int, i64_only: bool) -> list[list[int]]:
    """Inputs ``first`` .. ``first + count - 1``: 1-D integer Constants (i64 for the Dyn ops)."""
    what = ("Lower bounds", "Upper bounds", "Strides") if i64_only else ("Begin", "End", "Strides")
    out = []
    for k in range(count):
        i = first + k
        dt = ctx.elem(i)
        if i64_only and dt is not _I64:
            raise ctx.error(f"{what[k]} must have element type i64, got {dt}")
        if dt.kind not in ("integer", "quantized"):
            raise ctx.error(f"{what[k]} mask must be an integral number, but is: {dt}")
        s = ctx.shape(i)
        if s is not None and len(s) != 1:
            raise ctx.error(f"{what[k]} shape must have rank 1, got {len(s)}")
        out.append(ctx.constant_ints(i, what[k].lower(), lo=-(1 << 63), hi=(1 << 63) - 1))  # clipped by the plan
        ctx.value(i)  # folded: the initializer goes if no node uses it
    return out


def _axis_masks(ctx: OpContext) -> dict[str, set[int]]:
    keys = {"lower": "lower_bounds_mask", "upper": "upper_bounds_mask", "new": "new_axis", "shrink": "shrink_axis"}
    keys["ellipsis"] = "ellipsis_mask"
    return {k: set(ctx.attr_axes(key, ())) for k, key in keys.items()}


def _flag_masks(ctx: OpContext) -> dict[str, set[int]]:
    keys = {"lower": "begin_mask", "upper": "end_mask", "new": "new_axis_mask", "shrink": "shrink_axis_mask"}
    keys["ellipsis"] = "ellipsis_mask"
    lists = {k: ctx.attr_ints(key, [], lo=-(1 << 62), hi=1 << 62) for k, key in keys.items()}
    if any(v not in (0, 1) for m in lists.values() for v in m):
        raise ctx.error("All masks of StridedSlice must have be 0 or 1")
    sizes = {len(m) for m in lists.values() if m}
    if len(sizes) > 1:
        raise ctx.error("All masks of StridedSlice must have the same size")
    return {k: {i for i, v in enumerate(m) if v} for k, m in lists.items()}


@register("StridedSlice", versions=(1,))
def strided_slice(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3, 4)
    ctx.rank(0)
    shape = ctx.shape(0)
    masks = _flag_masks(ctx)
    bounds = _bounds(ctx, 1, len(ctx.inputs) - 1, False)
    if len(bounds) == 2:  # nGraph's default strides: ones, as long as begin
        bounds.append([1] * len(bounds[0]))
    return _emit_slice(ctx, slice_plan(ctx, shape, *bounds, masks), shape)


@register("DynSlice")
def dyn_slice(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(4)
    ctx.rank(0)
    shape = ctx.shape(0)
    bounds = _bounds(ctx, 1, 3, True)
    return _emit_slice(ctx, slice_plan(ctx, shape, *bounds, _axis_masks(ctx)), shape)


@register("DynReplaceSlice")
def dyn_replace_slice(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(5)
    t, tr = ctx.types[:2]
    if t.elem_type is not tr.elem_type:
        raise ctx.error("Argument element type is not compatible with replacement element type")
    shape = ctx.static_shape(0)
    bounds = _bounds(ctx, 2, 3, True)
    p = slice_plan(ctx, shape, *bounds, _axis_masks(ctx))
    if ctx.static_shape(1, "replacement") != tuple(p.reshape_out):
        raise ctx.error(
            f"Shape of the replacement is not compatible with the shape of the slice (shape of slice: "
            f"{shape_str(tuple(p.reshape_out))}, replacement: {shape_str(tr.shape)})"
        )
    x, r = ctx.inputs[:2]
    if not shape:  # a scalar: the replacement is the whole of it
        ctx.require_onnx(t.elem_type, "Reshape")
        ctx.emit("Reshape", [r, ctx.int64s([])], ctx.out())
        return [t]
    if numel(p.reshape_out) == 0:
        ctx.require_onnx(t.elem_type, "Identity")
        ctx.emit("Identity", [x], ctx.out())
        return [t]
    ctx.require_onnx(t.elem_type, "ScatterND")
    ranges = [np.arange(b, e, s, dtype=np.int64) for b, e, s in zip(p.begins, p.ends, p.strides)]
    grid = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1)
    grid = grid.reshape(tuple(p.reshape_out) + (len(shape),))
    if p.reverse_axes:  # the replacement's element k lands where the plan's Reverse puts it
        grid = np.flip(grid, tuple(sorted(p.reverse_axes)))
    indices = ctx.const(np.ascontiguousarray(grid), np.int64, f"{ctx.name}/indices")
    ctx.emit("ScatterND", [x, indices, r], ctx.out())
    return [t]
