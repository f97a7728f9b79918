"""DeformableConvolution (op_version 1, 2-D): ONNX DeformConv (opset 19), its offsets moved to nGraph's sampling rule.

nGraph has no kernel for the op; its definition is OpenVINO's reference (DeformableConvolution-1): inputs data
``(N, C, H, W)``, offsets ``(N, deformable_group * 2 * kH * kW, oH, oW)`` (per kernel tap: dy, then dx) and filters
``(C_out, C / group, kH, kW)``; tap ``(ky, kx)`` of output ``(oy, ox)`` samples the data at
``p = (oy * stride - pad_begin + ky * dilation + dy, ...)``, bilinearly. Where ONNX DeformConv and nGraph differ is
the border: nGraph skips a tap whose ``p`` is outside ``[0, H) x [0, W)`` and, inside, repeats the last row or
column (``p`` in ``(H - 1, H)`` reads row ``H - 1`` whole); ONNX blends the taps near the border with zeros. So the
conversion computes ``p`` as nGraph does (one float addition), sends a skipped tap to ``(-1, -1)`` (where ONNX
reads nothing) and clamps the others to ``H - 1`` / ``W - 1``, then gives DeformConv the offsets that reach those
positions with its padding folded in (``pads_begin`` 0, the total padding at the end). The bilinear weights and
the sums run in ONNX Runtime's order, and the new offsets are rounded once: a few ULP from nGraph's.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register
from .conv import conv_geometry, conv_types


@register("DeformableConvolution", versions=(1,))
def deformable_convolution(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    td, to, _ = ctx.types
    dt = conv_types(ctx, 0, 2)
    if to.elem_type is not dt:
        raise ctx.error(f"Offsets element type ({to.elem_type}) must be the data's ({dt})")
    n, c, h, w = _shape4(ctx, 0, "data batch")
    fshape = ctx.static_shape(2, "filters")
    if len(fshape) != 4:
        raise ctx.error(f"DeformableConvolution filters must be 4-D (2-D convolution), got {shape_str(fshape)}")
    group = ctx.attr_int("group", 1, lo=1)
    dgroup = ctx.attr_int("deformable_group", 1, lo=1)
    if c % group or fshape[0] % group or fshape[1] * group != c:
        raise ctx.error(
            "The input data shape must be evenly divisible by the 'group' value along the channels axis, and the "
            f"filters {shape_str(fshape)} hold C / group channels (input shape {shape_str(td.shape)}, group {group})"
        )
    if c % dgroup:
        raise ctx.error(f"Input channels ({c}) must be evenly divisible by 'deformable_group' ({dgroup})")
    x, attrs, out_shape = conv_geometry(ctx, 0, 2, groups=group, fshape=fshape)
    if x != ctx.inputs[0]:
        raise ctx.error("DeformableConvolution with negative padding is not supported (the offsets may reach the crop)")
    kh, kw = fshape[2:]
    oh, ow = out_shape[2:]
    taps = kh * kw
    want = (n, dgroup * 2 * taps, oh, ow)
    if ctx.static_shape(1, "offsets") != want:
        raise ctx.error(
            f"Offsets shape {shape_str(to.shape)} must be {shape_str(want)} (N, deformable_group * 2 * kH * kW, "
            "output spatial dims)"
        )
    if ctx.b.opset < 19:
        raise ctx.error(
            f"DeformableConvolution needs ONNX DeformConv, opset 19 or later (the model's is {ctx.b.opset})"
        )
    ctx.require_onnx(dt, "DeformConv", "Where", "Less", "GreaterOrEqual", "Min")
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilations"]
    pb, pe = attrs["pads"][:2], attrs["pads"][2:]
    oy = np.arange(oh).reshape(1, 1, oh, 1)
    ox = np.arange(ow).reshape(1, 1, 1, ow)
    ky = np.repeat(np.arange(kh), kw).reshape(taps, 1, 1, 1)
    kx = np.tile(np.arange(kw), kh).reshape(taps, 1, 1, 1)
    grid = np.concatenate(  # (taps, 2, oH, oW): where DeformConv puts a tap with zero offset, no padding at the start
        [np.broadcast_to(oy * sh + ky * dh, (taps, 1, oh, ow)), np.broadcast_to(ox * sw + kx * dw, (taps, 1, oh, ow))],
        axis=1,
    )
    npd = dt.numpy
    onnx_base = ctx.const(grid.astype(npd), dt, "grid")
    ngraph_base = ctx.const((grid - np.array(pb).reshape(1, 2, 1, 1)).astype(npd), dt, "grid")
    size = np.array([h, w], npd).reshape(1, 2, 1, 1)
    off = ctx.emit("Reshape", [ctx.inputs[1], ctx.int64s([n * dgroup, taps, 2, oh, ow])])
    pos = ctx.emit("Add", [off, ngraph_base])
    inside = ctx.emit(
        "And",
        [
            ctx.emit("GreaterOrEqual", [pos, ctx.scalar(np.array(0).astype(npd), dt)]),
            ctx.emit("Less", [pos, ctx.const(size, dt)]),
        ],
    )
    both = ctx.emit("ReduceMin", [ctx.emit("Cast", [inside], to=TensorProto.INT64), ctx.int64s([2])], keepdims=1)
    keep = ctx.emit("Cast", [both], to=TensorProto.BOOL)
    clamped = ctx.emit("Min", [pos, ctx.const(size - 1, dt)])
    target = ctx.emit("Where", [keep, clamped, ctx.scalar(np.array(-1).astype(npd), dt)])
    moved = ctx.emit("Reshape", [ctx.emit("Sub", [target, onnx_base]), ctx.int64s(list(want))])
    attrs["pads"] = [0, 0, pb[0] + pe[0], pb[1] + pe[1]]
    ctx.emit("DeformConv", [x, ctx.inputs[2], moved], ctx.out(), group=group, offset_group=dgroup, **attrs)
    return [TensorType(dt, out_shape)]


def _shape4(ctx: OpContext, i: int, what: str) -> tuple[int, ...]:
    s = ctx.static_shape(i, what)
    if len(s) != 4:
        raise ctx.error(f"DeformableConvolution is 2-D: the {what} must be 4-D, got {shape_str(s)}")
    return s
