"""BinaryConvolution (op_version 1), mode ``xnor-popcount``: an exact decomposition into one Conv on indicators.

nGraph defines the op (no kernel in any nGraph; OpenVINO's reference is its definition): for every output position
and filter, ``sum over the window of (2 * [x == bit] - 1)``, where ``bit`` is the filter's 0/1 value and padded
positions read ``pad_value`` (cast to the data type). So a data value other than 0 and 1 matches no bit. With the
indicators ``A = [x == 1]`` and ``B = [x == 0]`` (padded with ``[pad_value == 1]`` and ``[pad_value == 0]``) and the
filter bits ``F`` (a filter value is the bit 1 when it is not 0):
``matches = Conv(A, F) + Conv(B, 1 - F)``, one Conv over ``A`` and ``B`` side by side on the channels, and
``y = 2 * matches - C_in * window size``. Every sum is a small integer: exact in the data type.

nGraph's filter type is the packed ``u1``, but its serializer cannot write (nor read) a ``u1`` Constant's values
(``unsupported type``), so serialized filters come in another type: ``boolean`` or any numeric type converts.
"""

from __future__ import annotations

import math

import numpy as np

from ...contract import TensorType
from ..context import OpContext
from . import register
from .conv import conv_geometry


@register("BinaryConvolution", versions=(1,))
def binary_convolution(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    td = ctx.types[0]
    dt = td.elem_type
    if not dt.is_real:
        raise ctx.error(f"BinaryConvolution on {dt} data is not supported (real types only)")
    mode = ctx.raw("mode")
    if mode != "xnor-popcount":
        raise ctx.error(f"'mode' must be xnor-popcount, got {mode!r:.40}")
    pad_value = ctx.raw("pad_value", 0.0)
    if isinstance(pad_value, bool) or not isinstance(pad_value, (int, float)):
        raise ctx.error(f"'pad_value' must be a number, got {pad_value!r:.40}")
    pad = float(np.float32(pad_value))  # nGraph reads it as float, then casts to the data type
    pad = float(np.array(pad).astype(dt.numpy))
    fshape = ctx.static_shape(1, "filters")
    x, attrs, out_shape = conv_geometry(ctx)
    ctx.require_onnx(dt, "Conv", "Equal", "Pad", "Concat")
    one, zero = ctx.scalar(np.array(1).astype(dt.numpy), dt), ctx.scalar(np.array(0).astype(dt.numpy), dt)
    pads = attrs.pop("pads")
    sides = []
    for value, padded in ((one, float(pad == 1)), (zero, float(pad == 0))):
        ind = ctx.emit("Cast", [ctx.emit("Equal", [x, value])], to=dt.onnx)
        if any(pads):
            ind = ctx.emit("Pad", [ind, ctx.int64s([0, 0, *pads[: len(pads) // 2], 0, 0, *pads[len(pads) // 2 :]]),
                                   ctx.scalar(np.array(padded).astype(dt.numpy), dt)], mode="constant")  # fmt: skip
        sides.append(ind)
    f = ctx.inputs[1]
    if ctx.elem(1).kind == "boolean":
        bits = ctx.emit("Cast", [f], to=dt.onnx)
    else:
        fzero = ctx.scalar(np.array(0).astype(ctx.elem(1).numpy), ctx.elem(1))
        bits = ctx.emit("Cast", [ctx.emit("Not", [ctx.emit("Equal", [f, fzero])])], to=dt.onnx)
    both = ctx.emit("Concat", sides, axis=1)
    weights = ctx.emit("Concat", [bits, ctx.emit("Sub", [one, bits])], axis=1)
    matches = ctx.emit("Conv", [both, weights], **attrs)
    taps = math.prod(fshape[1:])
    twice = ctx.emit("Mul", [matches, ctx.scalar(np.array(2).astype(dt.numpy), dt)])
    ctx.emit("Sub", [twice, ctx.scalar(np.array(taps).astype(dt.numpy), dt)], ctx.out())
    return [TensorType(dt, out_shape)]
