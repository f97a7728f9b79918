"""CropAndResize (op_version 0): TensorFlow's ``crop_and_resize`` (the op nGraph's TensorFlow bridge made; nGraph has
no kernel for it), step by step in float32 with GatherND.

Image ``(N, H, W, C)``, boxes ``(B, 4)`` as ``(y1, x1, y2, x2)`` in ``[0, 1]``, box indices ``(B,)``, crop size
``(ch, cw)`` (a Constant). For crop row ``y``: ``in_y = y1 * (H - 1) + y * (y2 - y1) * (H - 1) / (ch - 1)``
(``0.5 * (y1 + y2) * (H - 1)`` when ``ch == 1``), the same for columns; a point outside ``[0, H - 1] x [0, W - 1]``
is ``extrapolation_value``. ``bilinear`` reads the four neighbours and blends them as TensorFlow's kernel writes it
(``top = tl + (tr - tl) * x_lerp``, ``bottom`` likewise, ``top + (bottom - top) * y_lerp``); ``nearest`` reads the
point rounded half away from zero (``floor`` plus ``frac >= 0.5``: ONNX Round would round half to even). Every step
is one float32 operation in TensorFlow's order, so the result is bit for bit its C++; images of other real types are
computed in float32 (as TensorFlow does) and cast back to their type (nGraph's output type).

ONNX RoiAlign averages samples inside each bin and Resize's ``tf_crop_and_resize`` takes one region for the whole
tensor, so neither is this op.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register

_F32 = dtypes.parse("f32")


@register("CropAndResize")
def crop_and_resize(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(4)
    method = ctx.raw("resize_method")
    if method == "unspecified":
        raise ctx.error("Resize method not specified")
    if method not in ("bilinear", "nearest"):
        raise ctx.error(f"'resize_method' must be bilinear or nearest, got {method!r:.40}")
    extrapolation = ctx.raw("extrapolation_value", 0.0)
    if isinstance(extrapolation, bool) or not isinstance(extrapolation, (int, float)):
        raise ctx.error(f"'extrapolation_value' must be a number, got {extrapolation!r:.40}")
    ti, tb, tn = ctx.types[:3]
    dt = ti.elem_type
    if not dt.is_real:
        raise ctx.error(f"CropAndResize on a {dt} image is not supported (real types only)")
    shape = ti.shape
    if shape is None or len(shape) != 4:
        raise ctx.error(f"Image must be NHWC (image shape {shape_str(shape)})")
    h, w, c = shape[1:]
    if not isinstance(h, int) or not isinstance(w, int):
        raise ctx.error(f"CropAndResize needs the image's height and width, got shape {shape_str(shape)}")
    if tb.shape is not None and len(tb.shape) != 2:
        raise ctx.error("Boxes must be 2d")
    if tb.shape is not None and tb.shape[1] not in (4, None):
        raise ctx.error("Second boxes dimension must be 4")
    if not tb.elem_type.is_real:
        raise ctx.error("Boxes must be real values in [0, 1]")
    if tn.shape is not None and len(tn.shape) != 1:
        raise ctx.error("Box indices must have rank 1")
    if tn.elem_type.kind not in ("integer", "quantized"):
        raise ctx.error("Box indices must be integers")
    if ctx.elem(3).kind not in ("integer", "quantized"):
        raise ctx.error("crops_size must be integral")
    size = ctx.constant_ints(3, "crop_size", lo=1)
    if len(size) != 2:
        raise ctx.error("crop_size must be a vector of length 2")
    ch, cw = size
    ctx.require_onnx(dt, "Cast")
    f32 = _F32.onnx

    def num(v: float) -> str:
        return ctx.scalar(np.float32(v), _F32)

    boxes = ctx.inputs[1] if tb.elem_type is _F32 else ctx.emit("Cast", [ctx.inputs[1]], to=f32)
    y1, x1, y2, x2 = (
        ctx.emit("Slice", [boxes, ctx.int64s([k]), ctx.int64s([k + 1]), ctx.int64s([1])]) for k in range(4)
    )

    def coords(lo: str, hi: str, n: int, crop: int) -> tuple[str, str]:
        """(B, crop) source coordinates and whether each is inside ``[0, n - 1]``."""
        if crop > 1:
            scale = ctx.emit("Div", [ctx.emit("Mul", [ctx.emit("Sub", [hi, lo]), num(n - 1)]), num(crop - 1)])
            steps = ctx.const(np.arange(crop, dtype=np.float32).reshape(1, crop), _F32, "steps")
            at = ctx.emit("Add", [ctx.emit("Mul", [lo, num(n - 1)]), ctx.emit("Mul", [steps, scale])])
        else:
            at = ctx.emit("Mul", [ctx.emit("Mul", [num(0.5), ctx.emit("Add", [lo, hi])]), num(n - 1)])
        inside = ctx.emit("And", [ctx.emit("GreaterOrEqual", [at, num(0)]), ctx.emit("LessOrEqual", [at, num(n - 1)])])
        return at, inside

    in_y, ok_y = coords(y1, y2, h, ch)
    in_x, ok_x = coords(x1, x2, w, cw)

    def index(v: str, n: int) -> str:
        return ctx.emit("Cast", [ctx.emit("Clip", [v, num(0), num(n - 1)])], to=TensorProto.INT64)

    lead = ctx.int64s([-1, 1, 1, 1])
    batch = ctx.emit("Reshape", [ctx.emit("Cast", [ctx.inputs[2]], to=TensorProto.INT64), lead])

    def gather(ys: str, xs: str) -> str:
        """image[batch, ys, xs, :] as float32, (B, ch, cw, C), from (B, ch) rows and (B, cw) columns."""
        parts = [
            batch,
            ctx.emit("Reshape", [ys, ctx.int64s([-1, ch, 1, 1])]),
            ctx.emit("Reshape", [xs, ctx.int64s([-1, 1, cw, 1])]),
        ]
        full = ctx.emit("Max", [ctx.emit("Shape", [p]) for p in parts])
        idx = ctx.emit("Concat", [ctx.emit("Expand", [p, full]) for p in parts], axis=3)
        v = ctx.emit("GatherND", [ctx.inputs[0], idx])
        return v if dt is _F32 else ctx.emit("Cast", [v], to=f32)

    if method == "nearest":
        near_y, near_x = (ctx.emit("Add", [ctx.emit("Floor", [v]), _half_up(ctx, v)]) for v in (in_y, in_x))
        value = gather(index(near_y, h), index(near_x, w))
    else:
        top_y, bottom_y = ctx.emit("Floor", [in_y]), ctx.emit("Ceil", [in_y])
        left_x, right_x = ctx.emit("Floor", [in_x]), ctx.emit("Ceil", [in_x])
        y_lerp = ctx.emit("Reshape", [ctx.emit("Sub", [in_y, top_y]), ctx.int64s([-1, ch, 1, 1])])
        x_lerp = ctx.emit("Reshape", [ctx.emit("Sub", [in_x, left_x]), ctx.int64s([-1, 1, cw, 1])])
        t, b = index(top_y, h), index(bottom_y, h)
        lx, rx = index(left_x, w), index(right_x, w)
        tl, tr, bl, br = gather(t, lx), gather(t, rx), gather(b, lx), gather(b, rx)
        top = ctx.emit("Add", [tl, ctx.emit("Mul", [ctx.emit("Sub", [tr, tl]), x_lerp])])
        bottom = ctx.emit("Add", [bl, ctx.emit("Mul", [ctx.emit("Sub", [br, bl]), x_lerp])])
        value = ctx.emit("Add", [top, ctx.emit("Mul", [ctx.emit("Sub", [bottom, top]), y_lerp])])
    inside = ctx.emit(
        "And",
        [
            ctx.emit("Reshape", [ok_y, ctx.int64s([-1, ch, 1, 1])]),
            ctx.emit("Reshape", [ok_x, ctx.int64s([-1, 1, cw, 1])]),
        ],
    )
    fill = num(float(np.float32(extrapolation)))
    if dt is _F32:
        ctx.emit("Where", [inside, value, fill], ctx.out())
    else:
        ctx.emit("Cast", [ctx.emit("Where", [inside, value, fill])], ctx.out(), to=dt.onnx)
    return [TensorType(dt, (tb.shape[0] if tb.shape else None, ch, cw, c))]


def _half_up(ctx: OpContext, v: str) -> str:
    """1.0 where the fraction of ``v`` (>= 0) is at least one half, else 0.0: ``floor(v) + this`` is ``roundf(v)``."""
    frac = ctx.emit("Sub", [v, ctx.emit("Floor", [v])])
    return ctx.emit("Cast", [ctx.emit("GreaterOrEqual", [frac, ctx.scalar(np.float32(0.5), _F32)])], to=_F32.onnx)
