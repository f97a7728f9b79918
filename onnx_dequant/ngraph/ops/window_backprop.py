"""The backward window ops: MaxPoolBackprop, AvgPoolBackprop, ConvolutionBackpropData and -Filters.

The pooling backprops follow nGraph's reference kernels window by window. Each output position of the
forward pool has a window of input positions (a constant index table, padding pointing to one extra
slot that is dropped at the end); the delta goes to them with ScatterElements(reduction add), in
nGraph's order (delta positions row-major, then the window's positions row-major).

- MaxPoolBackprop: the whole delta goes to the window's *first* largest element: nGraph keeps the first
  valid position and moves on only for a strictly greater value (``candidate > max_val``). So a tie goes
  to the earliest position, a NaN is never chosen unless it is the window's first valid element (then
  nothing beats it). ArgMax (first occurrence) over the window with NaN replaced by -inf, and by +inf at
  the first position, is exactly that.
- AvgPoolBackprop: each window position gets ``delta / n``, n the window's element count (padding
  included with ``include_padding_in_avg_computation``), divided in the element type as nGraph does.
- ConvolutionBackpropData: ConvTranspose of the delta with the forward filters (``output_padding`` to
  reach ``data_batch_shape``; negative forward padding becomes zero padding of the result).
- ConvolutionBackpropFilters: a Conv of the data (batch and channel axes swapped) with the delta as filters
  (strides and dilations swapped), cut to ``filters_shape``.

Spatial shapes must be static (the index tables and padding are computed here); data dilation other
than 1 is refused, as for Convolution.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from onnx import numpy_helper

from ...contract import TensorType
from ...dtypes import DType
from ..context import MAX_DIM, OpContext, shape_str
from . import register
from .conv import _first, _out_dims

__all__: list[str] = []


def _window_attrs(ctx: OpContext, n: int) -> tuple[list[int], list[int], list[int], list[int]]:
    window = _first(ctx, ("window_shape",), n, None, lo=1)
    strides = _first(ctx, ("window_movement_strides",), n, [1] * n, lo=1)
    below = _first(ctx, ("padding_below",), n, [0] * n)
    above = _first(ctx, ("padding_above",), n, [0] * n)
    return window, strides, below, above


def _static_spatial(ctx: OpContext, i: int, what: str) -> tuple[int, ...]:
    s = ctx.types[i].shape
    if s is None or len(s) < 3:
        raise ctx.error(f"{what} must have rank at least 3 (batch, channels, spatial...), got shape {shape_str(s)}")
    sp = s[2:]
    if not all(isinstance(d, int) for d in sp):
        raise ctx.error(f"{ctx.op.op} needs static spatial dimensions of its {what}, got {shape_str(s)}")
    return tuple(sp)  # type: ignore[arg-type]


def _windows(
    dims: tuple[int, ...], out: list[int], window: list[int], strides: list[int], below: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The index table ``(P, W)``: per output position, its window's input positions (flat, row-major),
    the valid ones first in row-major order, then ``S`` (the padding slot) for each padded one; and the
    number of valid positions per output position."""
    size = math.prod(dims)
    table = np.full((math.prod(out), math.prod(window)), size, np.int64)
    valid = np.zeros(table.shape[0], np.int64)
    offsets = list(itertools.product(*(range(w) for w in window)))
    for p, pos in enumerate(itertools.product(*(range(o) for o in out))):
        k = 0
        for off in offsets:
            coord = [q * s + o - b for q, s, o, b in zip(pos, strides, off, below)]
            if all(0 <= c < d for c, d in zip(coord, dims)):
                table[p, k] = np.ravel_multi_index(coord, dims)
                k += 1
        valid[p] = k
    return table, valid


def _pool_backprop_setup(
    ctx: OpContext, x_shape: tuple, dims: tuple[int, ...], delta: int
) -> tuple[np.ndarray, np.ndarray]:
    """Check the delta against the forward pool's output shape; the window table and valid counts."""
    if ctx.b.opset < 16:
        raise ctx.error(f"{ctx.op.op} needs opset 16 or later (ScatterElements with reduction add)")
    n = len(dims)
    window, strides, below, above = _window_attrs(ctx, n)
    out = _out_dims(ctx, dims, window, strides, below, above, False)
    want = (x_shape[0], x_shape[1], *out)
    got = ctx.types[delta].shape
    if (
        got is None
        or len(got) != len(want)
        or any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(got, want))
    ):
        raise ctx.error(
            f"Inferred forward output shape does not match delta shape (inferred forward output shape: {shape_str(want)}, delta shape: {shape_str(got)})"  # noqa: E501  (nGraph's message, whole so it can be searched)
        )
    table, valid = _windows(dims, out, window, strides, below)  # type: ignore[arg-type]
    return table, valid


def _scatter_add(ctx: OpContext, shape: str, index: str, updates: str, dims: tuple[int, ...], dt: DType) -> None:
    """Zeros of the given shape (N, C, S + 1), the updates added at ``index`` along axis 2, the padding slot
    dropped, reshaped to (N, C, *dims) into the op's output."""
    zero = ctx.emit("ConstantOfShape", [shape], value=numpy_helper.from_array(np.zeros(1, dt.numpy), "zero"))
    acc = ctx.emit("ScatterElements", [zero, index, updates], axis=2, reduction="add")
    size = math.prod(dims)
    kept = ctx.emit("Slice", [acc, ctx.int64s([0]), ctx.int64s([size]), ctx.int64s([2])])
    ctx.emit("Reshape", [kept, ctx.int64s([0, 0, *dims])], ctx.out())


def _check_types(ctx: OpContext, a: int, b: int, what: str) -> None:
    ta, tb = ctx.types[a], ctx.types[b]
    if ta.elem_type is not tb.elem_type:
        raise ctx.error(f"Element types for {what} ({ta.elem_type}) and delta ({tb.elem_type}) do not match.")


@register("MaxPoolBackprop")
def max_pool_backprop(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2, 3)  # a third input (the forward result) is not used by nGraph's kernel
    _check_types(ctx, 0, 1, "forward argument")
    t = ctx.types[0]
    dt = t.elem_type
    if dt.kind == "boolean":
        raise ctx.error(f"MaxPoolBackprop on {dt} is not supported")
    dims = _static_spatial(ctx, 0, "forward argument")
    table, _ = _pool_backprop_setup(ctx, t.shape, dims, 1)
    p, w = table.shape
    lowest = -np.inf if dt.is_real else np.iinfo(dt.numpy).min
    ctx.require_onnx(dt, "Reshape", "Pad", "Gather", "ArgMax", "ScatterElements", "Slice")
    ctx.require_onnx(dt, "ConstantOfShape", output=True)
    x, delta = ctx.inputs[0], ctx.inputs[1]
    flat = ctx.emit("Reshape", [x, ctx.int64s([0, 0, -1])])
    padded = ctx.emit("Pad", [flat, ctx.int64s([0, 0, 0, 0, 0, 1]), ctx.scalar(lowest, dt)], mode="constant")
    g = ctx.emit("Gather", [padded, ctx.const(table, np.int64, "windows")], axis=2)  # (N, C, P, W)
    if dt.is_real:
        ctx.require_onnx(dt, "IsNaN", "Where")
        fill = np.full(w, -np.inf)
        fill[0] = np.inf  # a NaN first in its window stays the window's maximum
        g = ctx.emit("Where", [ctx.emit("IsNaN", [g]), ctx.const(fill, dt, "nan_fill"), g])
    first = ctx.emit("ArgMax", [g], axis=3, keepdims=0, select_last_index=0)  # (N, C, P)
    where = ctx.emit(
        "Gather",
        [
            ctx.const(table.reshape(-1), np.int64, "windows_flat"),
            ctx.emit("Add", [first, ctx.const(np.arange(p) * w, np.int64, "window_base")]),
        ],
    )
    d = ctx.emit("Reshape", [delta, ctx.int64s([0, 0, -1])])
    _scatter_add(ctx, ctx.emit("Shape", [padded]), where, d, dims, dt)
    return [t]


@register("AvgPoolBackprop")
def avg_pool_backprop(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.real_input(0)
    dt = t.elem_type
    shape = ctx.attr_ints("forward_arg_shape")
    if len(shape) < 3:
        raise ctx.error(f"'forward_arg_shape' must have rank at least 3, got {shape_str(tuple(shape))}")
    dims = tuple(shape[2:])
    table, valid = _pool_backprop_setup(ctx, tuple(shape), dims, 0)
    p, w = table.shape
    include = ctx.attr_bool("include_padding_in_avg_computation", False)
    count = np.full(p, w) if include else np.maximum(valid, 1)
    ctx.require_onnx(dt, "Reshape", "Div", "Expand", "ScatterElements", "Slice")
    ctx.require_onnx(dt, "ConstantOfShape", output=True)
    d = ctx.emit("Reshape", [ctx.inputs[0], ctx.int64s([0, 0, p, 1])])
    share = ctx.emit("Div", [d, ctx.const(count.reshape(p, 1), dt, "window_count")])
    share = ctx.emit("Reshape", [ctx.emit("Expand", [share, ctx.int64s([1, 1, 1, w])]), ctx.int64s([0, 0, -1])])
    index = ctx.emit("Expand", [ctx.const(table.reshape(1, 1, -1), np.int64, "windows"), ctx.emit("Shape", [share])])
    _scatter_add(ctx, ctx.int64s([shape[0], shape[1], math.prod(dims) + 1]), index, share, dims, dt)
    return [TensorType(dt, tuple(shape))]


def _conv_attrs(ctx: OpContext, n: int, suffix: str = "_forward") -> tuple[list[int], list[int], list[int], list[int]]:
    """The forward convolution's strides, dilations and padding (padding may be negative)."""
    ones = [1] * n
    strides = _first(ctx, ("window_movement_strides" + suffix,), n, ones, lo=1)
    dil = _first(ctx, ("window_dilation_strides" + suffix,), n, ones, lo=1)
    below = _first(ctx, ("padding_below" + suffix,), n, [0] * n, lo=-MAX_DIM)
    above = _first(ctx, ("padding_above" + suffix,), n, [0] * n, lo=-MAX_DIM)
    data_dil = _first(ctx, ("data_dilation_strides" + suffix,), n, ones, lo=1)
    if any(d != 1 for d in data_dil):
        raise ctx.error(f"data dilation {data_dil} has no ONNX counterpart (only 1s are supported)")
    return strides, dil, below, above


def _conv_types(ctx: OpContext) -> None:
    ctx.expect_inputs(2)
    ta, tb = ctx.types
    if ta.elem_type is not tb.elem_type:
        raise ctx.error(f"Element types of the inputs do not match ({ta.elem_type} and {tb.elem_type})")
    if not ta.elem_type.is_real:
        raise ctx.error(f"{ctx.op.op} on {ta.elem_type} is not supported (real types only)")


def _expect_delta(ctx: OpContext, i: int, want: tuple) -> None:
    got = ctx.types[i].shape
    if (
        got is None
        or len(got) != len(want)
        or any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(got, want))
    ):
        raise ctx.error(
            f"the delta's shape {shape_str(got)} is not the forward convolution's output shape {shape_str(want)}"
        )


def _groups(ctx: OpContext) -> int:
    return ctx.attr_int("groups", 1, lo=1) if ctx.op.op.startswith("Group") else 1


@register("ConvolutionBackpropData", "GroupConvolutionBackpropData")
def convolution_backprop_data(ctx: OpContext) -> list[TensorType]:
    """ConvolutionBackpropData(filters, delta) with ``data_batch_shape``; GroupConvolutionBackpropData(data batch,
    filters, delta) with ``groups`` (its decomposition: one ConvolutionBackpropData per group, concatenated on
    the channels, which is ConvTranspose with ``group``)."""
    grouped = ctx.op.op.startswith("Group")
    if grouped:
        ctx.expect_inputs(3)
        shape = list(ctx.static_shape(0, "data batch"))
        ctx.inputs, ctx.types = ctx.inputs[1:], ctx.types[1:]
    _conv_types(ctx)
    dt = ctx.elem(0)
    if not grouped:
        shape = ctx.attr_ints("data_batch_shape")
    groups = _groups(ctx)
    fshape = ctx.static_shape(0, "filters")
    n = len(shape) - 2
    if n < 1 or len(fshape) != n + 2:
        raise ctx.error(
            f"data_batch_shape {shape_str(tuple(shape))} and filters {shape_str(fshape)} must have the same rank, "
            "at least 3"
        )
    if shape[1] != fshape[1] * groups or fshape[0] % groups:
        raise ctx.error(
            f"Data batch channel count ({shape[1]}) does not match filter input channel count ({fshape[1]})"
            + (f" times the {groups} groups" if grouped else "")
        )
    strides, dil, below, above = _conv_attrs(ctx, n, "" if grouped else "_forward")
    dims = tuple(shape[2:])
    eff = [(k - 1) * d + 1 for k, d in zip(fshape[2:], dil)]
    out = _out_dims(ctx, dims, eff, strides, below, above, False)
    _expect_delta(ctx, 1, (shape[0], fshape[0], *out))
    # ConvTranspose inverts the forward window placement; cropped (negative) padding comes back as zeros
    pads = [max(p, 0) for p in below] + [max(p, 0) for p in above]
    extra = []
    for i in range(n):
        reached = strides[i] * (out[i] - 1) + eff[i] - pads[i] - pads[n + i]  # type: ignore[operator]
        extra.append(dims[i] + min(below[i], 0) + min(above[i], 0) - reached)
    ctx.require_onnx(dt, "ConvTranspose")
    crop = any(p < 0 for p in below + above)
    y = ctx.emit(
        "ConvTranspose",
        [ctx.inputs[1], ctx.inputs[0]],
        None if crop else ctx.out(),
        strides=strides,
        dilations=dil,
        pads=pads,
        output_padding=extra,
        kernel_shape=list(fshape[2:]),
        group=groups,
    )
    if crop:
        ctx.require_onnx(dt, "Pad")
        zeros = [0, 0] + [-min(p, 0) for p in below] + [0, 0] + [-min(p, 0) for p in above]
        ctx.emit("Pad", [y, ctx.int64s(zeros), ctx.scalar(0, dt)], ctx.out(), mode="constant")
    return [TensorType(dt, tuple(shape))]


@register("ConvolutionBackpropFilters", "GroupConvolutionBackpropFilters")
def convolution_backprop_filters(ctx: OpContext) -> list[TensorType]:
    """ConvolutionBackpropFilters(data batch, delta) with ``filters_shape``; GroupConvolutionBackpropFilters(data
    batch, filters, delta) with ``groups`` (its decomposition: one ConvolutionBackpropFilters per group, the
    channels of data and delta sliced, concatenated on the output channels)."""
    grouped = ctx.op.op.startswith("Group")
    if grouped:
        ctx.expect_inputs(3)
        fshape = list(ctx.static_shape(1, "filters"))
        ctx.inputs, ctx.types = [ctx.inputs[0], ctx.inputs[2]], [ctx.types[0], ctx.types[2]]
    _conv_types(ctx)
    dt = ctx.elem(0)
    if not grouped:
        fshape = ctx.attr_ints("filters_shape")
    groups = _groups(ctx)
    n = len(fshape) - 2
    xshape = ctx.types[0].shape
    if n < 1 or xshape is None or len(xshape) != n + 2:
        raise ctx.error(
            f"filters_shape {shape_str(tuple(fshape))} and the data batch {shape_str(xshape)} must have the same "
            "rank, at least 3"
        )
    dims = _static_spatial(ctx, 0, "data batch")
    if (isinstance(xshape[1], int) and xshape[1] != fshape[1] * groups) or fshape[0] % groups:
        raise ctx.error(
            f"Data batch channel count ({xshape[1]}) does not match filter input channel count ({fshape[1]})"
            + (f" times the {groups} groups" if grouped else "")
        )
    strides, dil, below, above = _conv_attrs(ctx, n, "" if grouped else "_forward")
    eff = [(k - 1) * d + 1 for k, d in zip(fshape[2:], dil)]
    out = _out_dims(ctx, dims, eff, strides, below, above, False)
    _expect_delta(ctx, 1, (xshape[0], fshape[0], *out))
    ctx.require_onnx(dt, "Transpose", "Conv", "Slice")
    perm = [1, 0, *range(2, n + 2)]
    x = ctx.emit("Transpose", [ctx.inputs[0]], perm=perm)  # (C_in, N, spatial)
    if any(p < 0 for p in below + above):  # the forward crops first
        axes = [i + 2 for i in range(n) if below[i] < 0 or above[i] < 0]
        starts = [max(0, -below[i - 2]) for i in axes]
        ends = [above[i - 2] if above[i - 2] < 0 else MAX_DIM for i in axes]
        x = ctx.emit("Slice", [x, ctx.int64s(starts), ctx.int64s(ends), ctx.int64s(axes)])
    d = ctx.emit("Transpose", [ctx.inputs[1]], perm=perm)  # (C_out, N, delta spatial): the filters
    cin, cout = fshape[1], fshape[0] // groups
    parts = []
    for gi in range(groups):
        xg, dg = x, d
        if groups > 1:
            xg = ctx.emit("Slice", [x, ctx.int64s([gi * cin]), ctx.int64s([(gi + 1) * cin]), ctx.int64s([0])])
            dg = ctx.emit("Slice", [d, ctx.int64s([gi * cout]), ctx.int64s([(gi + 1) * cout]), ctx.int64s([0])])
        g = ctx.emit(
            "Conv",
            [xg, dg],
            strides=dil,
            dilations=strides,
            pads=[max(p, 0) for p in below] + [max(p, 0) for p in above],
            kernel_shape=out,
        )  # (C_in / groups, C_out / groups, >= filter spatial)
        g = ctx.emit("Slice", [g, ctx.int64s([0] * n), ctx.int64s(fshape[2:]), ctx.int64s(list(range(2, n + 2)))])
        parts.append(ctx.emit("Transpose", [g], ctx.out() if groups == 1 else None, perm=perm))
    if groups > 1:
        ctx.require_onnx(dt, "Concat")
        ctx.emit("Concat", parts, ctx.out(), axis=0)
    return [TensorType(dt, tuple(fshape))]


@register("ConvolutionBiasBackpropFiltersBias")
def convolution_bias_backprop_filters_bias(ctx: OpContext) -> list[TensorType]:
    """ConvolutionBiasBackpropFiltersBias(data batch, delta) with ``filters_shape`` and ``bias_shape``: nGraph's
    decomposition (``op/fused/conv_fused.cpp``), ConvolutionBackpropFilters and the delta summed over every
    axis but the channels."""
    ctx.expect_inputs(2)
    (filters,) = convolution_backprop_filters(ctx)
    channels = filters.shape[0]  # type: ignore[index]
    bias_shape = ctx.attr_ints("bias_shape")
    if bias_shape != [channels]:
        raise ctx.error(f"bias_shape {shape_str(tuple(bias_shape))} must be the filters' output channels ({channels})")
    dt = ctx.elem(1)
    ctx.require_onnx(dt, "ReduceSum")
    axes = [0, *range(2, len(filters.shape))]  # type: ignore[arg-type]
    ctx.emit("ReduceSum", [ctx.inputs[1], ctx.int64s(axes)], ctx.out(1), keepdims=0)
    return [filters, TensorType(dt, (channels,))]
