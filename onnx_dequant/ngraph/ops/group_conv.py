"""GroupConvolution (op_version 0 and 1): ONNX Conv with ``group``.

nGraph's decomposition slices the data's channels and the filters into ``groups`` parts, convolves each pair
and concatenates the results on the channels, which is what ONNX Conv's ``group`` computes. The filters come
in two layouts:

- op_version 0 with a ``groups`` attribute: ``(C_out, C_in / groups, spatial...)``, as ONNX takes them;
- op_version 0 without it, and op_version 1: ``(groups, C_out / groups, C_in / groups, spatial...)``, reshaped
  to ``(C_out, C_in / groups, spatial...)`` (group ``g``'s filters are output channels ``g * C_out / groups``
  onwards, in both).

Padding, strides and dilations are read as for Convolution (``ops/conv.py``), both eras' names.
"""

from __future__ import annotations

from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register
from .conv import conv_geometry, conv_types


@register("GroupConvolution", versions=(0, 1))
def group_convolution(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    dt = conv_types(ctx)
    td = ctx.types[0]
    rank = ctx.rank(0, "data batch")
    fshape = ctx.static_shape(1, "filters")
    in_filters = ctx.op.version >= 1 or not ctx.has("groups")
    if len(fshape) != rank + in_filters or rank < 3:
        layout = "(groups, C_out / groups, C_in / groups, spatial...)" if in_filters else "(C_out, C_in / groups, ...)"
        raise ctx.error(
            f"Filters shape {shape_str(fshape)} must have rank {rank + in_filters}, {layout}, for the data batch "
            f"shape {shape_str(td.shape)} (rank at least 3)"
        )
    if in_filters:
        groups = fshape[0]
        if groups == 0:
            raise ctx.error(f"Filters shape {shape_str(fshape)} has zero groups")
        onnx_fshape = (groups * fshape[1], *fshape[2:])
    else:
        groups = ctx.attr_int("groups", lo=1)
        onnx_fshape = fshape
    channels = td.shape[1]  # type: ignore[index]
    known = isinstance(channels, int)
    if known and channels % groups:
        raise ctx.error(f"Data channels not a multiple of group size ({channels} channels, {groups} groups)")
    if onnx_fshape[0] % groups:
        raise ctx.error(f"# Filters not a multiple of group size ({onnx_fshape[0]} filters, {groups} groups)")
    if known and onnx_fshape[1] * groups != channels:
        raise ctx.error(
            f"Incorrect number of channels per filter ({onnx_fshape[1]} per filter, {groups} groups, "
            f"{channels} data channels)"
        )
    x, attrs, out_shape = conv_geometry(ctx, groups=groups, fshape=onnx_fshape)
    ctx.require_onnx(dt, "Conv")
    w = ctx.inputs[1]
    if in_filters:
        w = ctx.emit("Reshape", [w, ctx.int64s(list(onnx_fshape))])
    ctx.emit("Conv", [x, w], ctx.out(), group=groups, **attrs)
    return [TensorType(dt, out_shape)]
