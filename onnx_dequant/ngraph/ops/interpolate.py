"""Interpolate (op_version 0, in opset 0 and opset 1): ONNX Resize, after a zero Pad for ``pads_begin`` / ``pads_end``.

nGraph has no kernel for Interpolate (its INTERPRETER refuses it, 0.26 cannot read it); its own ONNX importer
defines the op by what it makes of ONNX Resize-10: ``align_corners`` false. So ``align_corners`` false is Resize-10's
coordinate mapping, ``x_in = x_out / scale`` (``asymmetric``, ``scale = out / in`` in float), and true is
``x_in = x_out * (in - 1) / (out - 1)`` (``align_corners``). ``nearest`` rounds as Resize-10 does (ONNX Runtime's
and OpenVINO's "simple" rule): down (``floor``) on an axis that grows or keeps its size, up (``ceil``) on an
axis that shrinks, one Resize per group of axes (nearest is separable). ``linear`` is ONNX's n-linear, ``cubic``
ONNX's cubic with ``a = -0.75`` (edge values repeated). ``area`` and ``antialias`` have no ONNX Resize counterpart
and are refused.

The second input, the sizes of the interpolated axes (in ``axes`` order), must be a Constant.
"""

from __future__ import annotations

import math
from typing import Any

from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register

_MODES = ("nearest", "linear", "cubic", "area")


def _attr(ctx: OpContext, key: str) -> str:
    """The attribute-visitor spelling (``attrs.axes``) or the plain one."""
    dotted = f"attrs.{key}"
    return dotted if ctx.has(dotted) or not ctx.has(key) else key


@register("Interpolate")
def interpolate(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t = ctx.types[0]
    dt = t.elem_type
    shape = list(ctx.static_shape(0, "image"))
    rank = len(shape)
    if ctx.elem(1).kind not in ("integer", "quantized"):
        raise ctx.error("output shape must be an integral number.")
    axes = list(ctx.attr_axes(_attr(ctx, "axes")))
    if axes and axes[-1] >= rank:
        raise ctx.error(f"Interpolation axis ({axes[-1]}) must be less than the image rank ({rank})")
    mode: Any = ctx.raw(_attr(ctx, "mode"))
    if mode not in _MODES:
        raise ctx.error(f"'mode' must be one of {', '.join(_MODES)}, got {mode!r:.40}")
    align = ctx.attr_bool(_attr(ctx, "align_corners"), True)
    if ctx.attr_bool(_attr(ctx, "antialias"), False):
        raise ctx.error("Interpolate with antialias has no ONNX counterpart (nGraph defines no filter for it)")
    if mode == "area":
        raise ctx.error("Interpolate mode 'area' has no ONNX counterpart (ONNX Resize has no area mode)")
    pads = []
    for key in ("pads_begin", "pads_end"):
        p = ctx.attr_ints(_attr(ctx, key), [])
        if p and len(p) != rank:
            raise ctx.error(f"'{key}' must have {rank} entries (one per image axis), got {len(p)} ({p})")
        pads.append(p or [0] * rank)
    sizes = ctx.constant_ints(1, "output shape", lo=0)
    if len(sizes) != len(axes):
        raise ctx.error(f"output shape {sizes} must have one size per interpolated axis {axes}")
    if mode != "nearest" and not dt.is_real:
        raise ctx.error(f"Interpolate mode '{mode}' on {dt} is not supported (real types only)")
    ctx.require_onnx(dt, "Resize", "Pad")
    x = ctx.inputs[0]
    padded = [d + b + e for d, b, e in zip(shape, *pads)]
    if any(pads[0] + pads[1]):
        x = ctx.emit("Pad", [x, ctx.int64s(pads[0] + pads[1])], mode="constant")
    out = list(padded)
    for a, s in zip(axes, sizes):
        if s == 0 or padded[a] == 0:
            raise ctx.error(f"Interpolate to size {s} on axis {a} of the padded image {shape_str(tuple(padded))}")
        out[a] = s
    coords = "align_corners" if align else "asymmetric"
    attrs: dict[str, Any] = {"coordinate_transformation_mode": coords}
    if mode == "cubic":
        attrs |= {"mode": "cubic", "cubic_coeff_a": -0.75}
    elif mode == "linear":
        attrs["mode"] = "linear"
    if mode != "nearest":
        steps = [(out, attrs)]
    else:  # Resize-10's rounding: floor where the axis grows or keeps its size, ceil where it shrinks
        grow = [a for a in axes if out[a] >= padded[a]]
        shrink = [a for a in axes if out[a] < padded[a]]
        steps, now = [], list(padded)
        for group, rounding in ((grow, "floor"), (shrink, "ceil")):
            if group:
                now = [out[i] if i in group else d for i, d in enumerate(now)]
                steps.append((list(now), attrs | {"mode": "nearest", "nearest_mode": rounding}))
        steps = steps or [(out, attrs | {"mode": "nearest", "nearest_mode": "floor"})]
    direct = rank == 2 or (rank == 4 and set(axes) <= {2, 3})
    direct |= mode == "linear" and (rank == 3 or (rank == 5 and set(axes) <= {2, 3, 4}))
    if mode != "nearest" and not direct:  # ONNX Runtime's forms; more axes than it takes: in turn (separable)
        most = 3 if mode == "linear" else 2
        now = list(padded)
        for k in range(0, len(axes), most):
            part = axes[k : k + most]
            after = [out[i] if i in part else d for i, d in enumerate(now)]
            x = _folded(ctx, x, now, after, part, attrs, k + most >= len(axes))
            now = after
        return [TensorType(dt, tuple(out))]
    for k, (size, a) in enumerate(steps):
        last = k == len(steps) - 1
        x = ctx.emit("Resize", [x, "", "", ctx.int64s(size)], ctx.out() if last else None, **a)
    return [TensorType(dt, tuple(out))]


def _folded(
    ctx: OpContext, x: str, shape: list[int], out: list[int], axes: list[int], attrs: dict[str, Any], last: bool
) -> str:
    """Linear or cubic Resize on up to three (linear) or two (cubic) axes as ONNX Runtime runs it: the axes moved
    last, the others folded into the first, a 4-D tensor (5-D for three axes)."""
    rest = [a for a in range(len(shape)) if a not in axes]
    perm = rest + axes
    batch = math.prod(shape[a] for a in rest)
    inner = [1] * (max(2, len(axes)) - len(axes))
    if perm != list(range(len(shape))):
        x = ctx.emit("Transpose", [x], perm=perm)
    x = ctx.emit("Reshape", [x, ctx.int64s([batch, 1, *inner, *(shape[a] for a in axes)])])
    x = ctx.emit("Resize", [x, "", "", ctx.int64s([batch, 1, *inner, *(out[a] for a in axes)])], **attrs)
    moved = [out[a] for a in perm]
    dest = ctx.out() if last else None
    if perm == list(range(len(shape))):
        return ctx.emit("Reshape", [x, ctx.int64s(moved)], dest)
    x = ctx.emit("Reshape", [x, ctx.int64s(moved)])
    return ctx.emit("Transpose", [x], dest, perm=[perm.index(a) for a in range(len(shape))])
