"""Convolution, MaxPool and AvgPool (op_version 0 attribute names, and op_version 1's).

Data is ``(N, C, spatial...)``, filters ``(C_out, C_in, spatial...)``, as in ONNX. nGraph's negative
padding crops the input: it becomes a Slice before the Conv. ``pad_type`` SAME_LOWER / SAME_UPPER
padding is computed here from the static spatial shape (so ONNX gets explicit pads); VALID means no
padding. Data dilation other than 1 has no ONNX counterpart and is refused.
"""

from __future__ import annotations

from typing import Any

from ...contract import Dim, Shape, TensorType
from ...dtypes import DType
from ..context import MAX_DIM, OpContext, shape_str
from . import register
from .elementwise import emit_real_relu

_PAD_TYPES = {0: "explicit", 1: "same_lower", 2: "same_upper", 3: "valid", 4: "auto", 5: "notset"}


def _pad_type(ctx: OpContext) -> str:
    for key in ("pad_type", "auto_pad"):
        if ctx.has(key):
            v: Any = ctx.js[key]
            kind = None
            if isinstance(v, int) and not isinstance(v, bool):
                kind = _PAD_TYPES.get(v)
            elif isinstance(v, str):
                kind = v.strip().lower()
            if kind in ("explicit", "notset"):
                return "explicit"
            if kind in ("same_lower", "same_upper", "valid"):
                return kind
            raise ctx.error(f"'{key}' must be EXPLICIT, SAME_LOWER, SAME_UPPER or VALID, got {v!r:.40}")
    return "explicit"


def _first(ctx: OpContext, keys: tuple[str, ...], n: int, default: Any, *, lo: int = 0) -> list[int]:
    for k in keys:
        if ctx.has(k):
            return ctx.attr_ints(k, lo=lo, length=n)
    if default is None:
        raise ctx.error(f"{ctx.op.op} has no '{keys[0]}' attribute")
    return default


def _spatial(ctx: OpContext, what: str, i: int = 0) -> tuple[int, tuple[Dim, ...]]:
    rank = ctx.rank(i, what)
    if rank < 3:
        raise ctx.error(
            f"{what} must have rank at least 3 (batch, channels, spatial...), got shape {shape_str(ctx.types[i].shape)}"
        )
    return rank - 2, tuple(ctx.types[i].shape[2:])  # type: ignore[index]


def _auto_pads(
    ctx: OpContext, kind: str, dims: tuple[Dim, ...], window: list[int], strides: list[int]
) -> tuple[list[int], list[int]]:
    if kind == "valid":
        return [0] * len(dims), [0] * len(dims)
    if not all(isinstance(d, int) for d in dims):
        raise ctx.error(f"{kind.upper()} padding needs static spatial dimensions, got {shape_str(dims)}")
    below, above = [], []
    for d, w, s in zip(dims, window, strides):
        out = -(-d // s)  # type: ignore[operator]
        total = max((out - 1) * s + w - d, 0)  # type: ignore[operator]
        small, big = total // 2, total - total // 2
        below.append(big if kind == "same_lower" else small)
        above.append(small if kind == "same_lower" else big)
    return below, above


def _out_dims(
    ctx: OpContext,
    dims: tuple[Dim, ...],
    window: list[int],
    strides: list[int],
    below: list[int],
    above: list[int],
    ceil: bool,
) -> list[Dim]:
    out: list[Dim] = []
    for i, (d, w, s, pb, pa) in enumerate(zip(dims, window, strides, below, above)):
        if not isinstance(d, int):
            out.append(None)
            continue
        padded = d + pb + pa
        if w > padded or w == 0:
            raise ctx.error(
                f"Window after dilation has dimension ({w}) larger than the data shape after padding ({padded}) at axis {i}"  # noqa: E501  (nGraph's message, whole so it can be searched)
            )
        span = padded - w
        out.append((-(-span // s) if ceil else span // s) + 1)
    return out


def conv_types(ctx: OpContext, data: int = 0, filters: int = 1) -> DType:
    """nGraph's rule for a convolution's element types (data and filters alike), real types only."""
    dt, ft = ctx.elem(data), ctx.elem(filters)
    if dt is not ft:
        raise ctx.error(
            f"Element types for data batch and filters do not match (data batch element type: {dt}, filters element type: {ft})"  # noqa: E501  (nGraph's message, whole so it can be searched)
        )
    if not dt.is_real:
        raise ctx.error(f"{ctx.op.op} on {dt} is not supported (real types only)")
    return dt


@register("Convolution", versions=(0, 1))
def convolution(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    dt = conv_types(ctx)
    x, attrs, out_shape = conv_geometry(ctx)
    ctx.require_onnx(dt, "Conv")
    ctx.emit("Conv", [x, ctx.inputs[1]], ctx.out(), **attrs)
    return [TensorType(dt, out_shape)]


def _bias(ctx: OpContext, dt: DType) -> str:
    """The bias of ConvolutionBias(Add) checked with nGraph's rules (``validate_convbias_shapes``)."""
    if ctx.elem(2) is not dt:
        raise ctx.error(
            f"Element types for bias and filters do not match (bias element type: {ctx.elem(2)}, filters element type: {dt})"  # noqa: E501  (nGraph's message, whole so it can be searched)
        )
    bshape, fshape = ctx.shape(2), ctx.shape(1)
    if bshape is None or len(bshape) != 1:
        raise ctx.error(f"Bias must have a rank of 1 (bias_shape: {shape_str(bshape)})")
    if fshape and isinstance(bshape[0], int) and isinstance(fshape[0], int) and bshape[0] != fshape[0]:
        raise ctx.error(f"Bias channel count ({bshape[0]}) does not match filter output channel count ({fshape[0]})")
    return ctx.inputs[2]


@register("ConvolutionBias", "ConvolutionBiasAdd")
def convolution_bias(ctx: OpContext) -> list[TensorType]:
    """nGraph's decomposition (``op/fused/conv_fused.cpp``): Convolution, plus the bias broadcast over the
    channel axis, plus (ConvolutionBiasAdd) the fourth input, then Relu when ``with_relu``: Conv with its
    bias input B, Add, Relu."""
    add = ctx.op.op == "ConvolutionBiasAdd"
    ctx.expect_inputs(4 if add else 3)
    dt = conv_types(ctx)
    b = _bias(ctx, dt)
    x, attrs, out_shape = conv_geometry(ctx)
    ctx.require_onnx(dt, "Conv")
    relu = ctx.attr_bool("with_relu", False)
    if add:
        if tuple(ctx.shape(3) or ()) != tuple(out_shape) or ctx.elem(3) is not dt:
            raise ctx.error(
                f"Argument shapes are inconsistent: the sum input is {ctx.elem(3)}{shape_str(ctx.shape(3))}, "
                f"the convolution's result {dt}{shape_str(out_shape)}"
            )
    y = ctx.emit("Conv", [x, ctx.inputs[1], b], None if add or relu else ctx.out(), **attrs)
    if add:
        y = ctx.emit("Add", [y, ctx.inputs[3]], None if relu else ctx.out())
    if relu:
        emit_real_relu(ctx, y, dt, ctx.out())
    return [TensorType(dt, out_shape)]


def conv_geometry(
    ctx: OpContext, data: int = 0, filters: int = 1, *, groups: int = 1, fshape: Shape | None = None
) -> tuple[str, dict[str, Any], tuple[Dim, ...]]:
    """A convolution's data input as ONNX Conv takes it (cropped by negative padding), the Conv-family
    attributes (strides, dilations, pads, kernel_shape) and the output shape, from the op's attributes.

    ``groups``: the data's channels are that many groups, each ``fshape[1]`` wide; ``fshape`` (default: the
    filters' shape) is the filters as ONNX Conv takes them, ``(C_out, C_in / groups, spatial...)``."""
    td = ctx.types[data]
    n, dims = _spatial(ctx, "data batch", data)
    fshape = ctx.types[filters].shape if fshape is None else fshape
    if fshape is None or len(fshape) != n + 2:
        raise ctx.error(
            f"Filters shape {shape_str(fshape)} must have rank {n + 2} (data batch shape {shape_str(td.shape)})"
        )
    window = list(fshape[2:])
    if not all(isinstance(w, int) for w in window):
        raise ctx.error(f"{ctx.op.op} needs static filter spatial dimensions, got {shape_str(fshape)}")
    cin, fcin = td.shape[1], fshape[1]  # type: ignore[index]
    if groups == 1 and isinstance(cin, int) and isinstance(fcin, int) and cin != fcin:
        raise ctx.error(f"Data batch channel count ({cin}) does not match filter input channel count ({fcin})")
    ones = [1] * n
    strides = _first(ctx, ("window_movement_strides", "strides"), n, ones, lo=1)
    dil = _first(ctx, ("window_dilation_strides", "dilations"), n, ones, lo=1)
    below = _first(ctx, ("padding_below", "pads_begin"), n, [0] * n, lo=-MAX_DIM)
    above = _first(ctx, ("padding_above", "pads_end"), n, [0] * n, lo=-MAX_DIM)
    data_dil = _first(ctx, ("data_dilation_strides", "image_dilation_strides"), n, ones, lo=1)
    if any(d != 1 for d in data_dil):
        raise ctx.error(f"data dilation {data_dil} has no ONNX counterpart (only 1s are supported)")
    eff = [(w - 1) * d + 1 for w, d in zip(window, dil)]
    kind = _pad_type(ctx)
    if kind != "explicit":
        below, above = _auto_pads(ctx, kind, dims, eff, strides)
    out_sp = _out_dims(ctx, dims, eff, strides, below, above, False)
    x = ctx.inputs[data]
    if any(p < 0 for p in below + above):  # crop first
        axes = [i + 2 for i in range(n) if below[i] < 0 or above[i] < 0]
        starts = [max(0, -below[i - 2]) for i in axes]
        ends = [above[i - 2] if above[i - 2] < 0 else MAX_DIM for i in axes]  # -k drops the last k
        x = ctx.emit("Slice", [x, ctx.int64s(starts), ctx.int64s(ends), ctx.int64s(axes)])
    pads = [max(0, p) for p in below] + [max(0, p) for p in above]
    attrs = {"strides": strides, "dilations": dil, "pads": pads, "kernel_shape": window}
    return x, attrs, (td.shape[0], fshape[0], *out_sp)  # type: ignore[index]


def _pool(ctx: OpContext, onnx_op: str, extra: dict[str, Any]) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.types[0]
    n, dims = _spatial(ctx, "data batch")
    window = _first(ctx, ("window_shape", "kernel"), n, None, lo=1)
    strides = _first(ctx, ("window_movement_strides", "strides"), n, [1] * n, lo=1)
    has_below = any(ctx.has(k) for k in ("padding_below", "pads_begin"))
    has_above = any(ctx.has(k) for k in ("padding_above", "pads_end"))
    if has_below != has_above:
        raise ctx.error(f"{ctx.op.op}: padding_below and padding_above must be both present or both absent")
    below = _first(ctx, ("padding_below", "pads_begin"), n, [0] * n)
    above = _first(ctx, ("padding_above", "pads_end"), n, [0] * n)
    ceil = ctx.attr_bool("ceil_mode", False)
    if ctx.has("rounding_type"):
        rt = ctx.js["rounding_type"]
        if not isinstance(rt, (str, int)) or str(rt).lower() not in ("floor", "ceil", "0", "1"):
            raise ctx.error(f"'rounding_type' must be floor or ceil, got {rt!r:.40}")
        ceil = str(rt).lower() in ("ceil", "1")
    kind = _pad_type(ctx)
    if kind != "explicit":
        below, above = _auto_pads(ctx, kind, dims, window, strides)
    for i in range(n):
        if below[i] >= window[i] or above[i] >= window[i]:
            raise ctx.error(
                f"Window shape {window} must be larger than the padding ({below} below, {above} above) at axis {i}"
            )
    out_sp = _out_dims(ctx, dims, window, strides, below, above, ceil)
    if t.elem_type.kind == "boolean" or (onnx_op == "AveragePool" and not t.elem_type.is_real):
        raise ctx.error(f"{ctx.op.op} on {t.elem_type} is not supported")
    ctx.require_onnx(t.elem_type, onnx_op)
    ctx.emit(
        onnx_op,
        ctx.inputs,
        ctx.out(),
        kernel_shape=window,
        strides=strides,
        pads=below + above,
        ceil_mode=int(ceil),
        **extra,
    )
    return [TensorType(t.elem_type, (t.shape[0], t.shape[1], *out_sp))]  # type: ignore[index]


@register("MaxPool", versions=(0, 1))
def max_pool(ctx: OpContext) -> list[TensorType]:
    return _pool(ctx, "MaxPool", {})


@register("AvgPool", versions=(0, 1))
def avg_pool(ctx: OpContext) -> list[TensorType]:
    if ctx.has("exclude_pad"):
        include = not ctx.attr_bool("exclude_pad")
    else:
        include = ctx.attr_bool("include_padding_in_avg_computation", False)
    return _pool(ctx, "AveragePool", {"count_include_pad": int(include)})
