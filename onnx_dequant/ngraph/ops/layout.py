"""Layout ops whose shape arguments are Constant inputs (nGraph reads them at graph build time too):
Transpose (v0 / v1), Squeeze, Unsqueeze, Tile, ShapeOf, Range, and DepthToSpace, SpaceToDepth,
ShuffleChannels (``block_size``, ``axis`` / ``groups`` attributes).

- Squeeze with no axes removes every dimension of size 1; Unsqueeze inserts at the sorted output axes.
- Tile's repeats have one entry per dimension (nGraph's rule).
- Range's start, stop and step are Constants: the values are computed here, ``start + i * step`` in the
  element type as nGraph's kernel, and become an initializer.
- DepthToSpace is ONNX's DCR mode (nGraph 0.26 has one mode; a later ``mode`` attribute
  "depth_first" is CRD), SpaceToDepth is ONNX SpaceToDepth ("blocks_first"), ShuffleChannels a
  Reshape / Transpose / Reshape.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ...contract import Dim, TensorType
from ..context import MAX_DIM, OpContext, shape_str
from . import register
from .shape import reshape_node

_I64 = dtypes.parse("i64")


@register("Transpose", versions=(0, 1))
def transpose(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t = ctx.types[0]
    rank = ctx.rank(0)
    order = ctx.constant_ints(1, "input order", lo=0, hi=max(rank - 1, 0))
    if not order and ctx.op.version >= 1:  # v1: empty order reverses the axes
        order = list(range(rank))[::-1]
    if sorted(order) != list(range(rank)):
        raise ctx.error(
            f"Permutation {order} is not valid for input shape {shape_str(t.shape)} (not a permutation of its axes)"
        )
    ctx.require_onnx(t.elem_type, "Transpose")
    ctx.emit("Transpose", [ctx.inputs[0]], ctx.out(), perm=order)
    return [TensorType(t.elem_type, tuple(t.shape[i] for i in order))]  # type: ignore[index]


@register("Squeeze")
def squeeze(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t = ctx.types[0]
    shape = ctx.static_shape(0)
    rank = len(shape)
    axes = sorted({a + rank if a < 0 else a for a in ctx.constant_ints(1, "axes", lo=-rank, hi=max(rank - 1, 0))})
    if not axes:
        axes = [i for i, d in enumerate(shape) if d == 1]
    for a in axes:
        if shape[a] != 1:
            raise ctx.error(
                f"provided axis value is invalid. Only axes of size 1 may be removed (axis {a}, shape {shape_str(shape)})"  # noqa: E501
            )
    out = tuple(d for i, d in enumerate(shape) if i not in axes)
    ctx.require_onnx(t.elem_type, "Reshape")
    reshape_node(ctx, ctx.inputs[0], list(out), ctx.out())
    return [TensorType(t.elem_type, out)]


@register("Unsqueeze")
def unsqueeze(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t = ctx.types[0]
    rank = ctx.rank(0)
    values = ctx.constant_ints(1, "axes", lo=0, hi=MAX_DIM)
    axes = sorted(set(values))
    if not axes:
        raise ctx.error("'axes' input is mandatory.")
    n = rank + len(axes)
    if axes[-1] >= n or len(axes) != len(values):
        raise ctx.error(f"provided axes {values} are invalid for an input of rank {rank}")
    out: list[Dim] = list(t.shape)  # type: ignore[arg-type]
    for a in axes:
        out.insert(a, 1)
    ctx.require_onnx(t.elem_type, "Unsqueeze")
    ctx.emit("Unsqueeze", [ctx.inputs[0], ctx.int64s(axes)], ctx.out())
    return [TensorType(t.elem_type, tuple(out))]


@register("Tile")
def tile(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t = ctx.types[0]
    rank = ctx.rank(0)
    repeats = ctx.constant_ints(1, "repeats", lo=0)
    if len(repeats) != rank:
        raise ctx.error(f"Arg and repeats ranks mismatch (argument shape {shape_str(t.shape)}, repeats {repeats})")
    out = tuple(d * r if isinstance(d, int) else (d if r == 1 else None) for d, r in zip(t.shape, repeats))  # type: ignore[arg-type]
    ctx.require_onnx(t.elem_type, "Tile")
    ctx.emit("Tile", [ctx.inputs[0], ctx.int64s(repeats)], ctx.out())
    return [TensorType(t.elem_type, out)]


@register("ShapeOf")
def shape_of(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    rank = ctx.rank(0)
    ctx.emit("Shape", [ctx.inputs[0]], ctx.out())
    return [TensorType(_I64, (rank,))]


@register("Range")
def range_(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    dts = {t.elem_type for t in ctx.types}
    if len(dts) != 1:
        raise ctx.error(f"Range's start, stop and step must have one element type, got {sorted(d.name for d in dts)}")
    dt = dts.pop()
    if dt.kind == "boolean":
        raise ctx.error("Range on boolean is not supported")
    start, stop, step = (ctx.constant(i, what).reshape(-1) for i, what in enumerate(("start", "stop", "step")))
    if not (len(start) == len(stop) == len(step) == 1):
        raise ctx.error("Range's start, stop and step must be scalars")
    a, b, s = (np.asarray(v[0], dt.numpy) for v in (start, stop, step))
    if float(s) == 0 or not all(math.isfinite(float(v)) for v in (a, b, s)):
        raise ctx.error(f"Range's step must be non-zero and start, stop, step finite (got {a}, {b}, {s})")
    n = max(math.ceil((float(b) - float(a)) / float(s)), 0)
    if n > 1 << 24:
        raise ctx.error(f"Range of {n} elements is too large to write out")
    with np.errstate(over="ignore"):
        values = (a + np.arange(n).astype(dt.numpy) * s).astype(dt.numpy)
    ctx.b.initializer(ctx.out(), values, dt)
    return [TensorType(dt, (n,))]


def _blocks_4d(ctx: OpContext) -> tuple[TensorType, tuple[int, int, int, int], int, object]:
    """DepthToSpace / SpaceToDepth: the input's type, its static NCHW shape, block_size and the raw mode."""
    ctx.expect_inputs(1)
    shape = ctx.static_shape(0)
    bs = ctx.attr_int("block_size", lo=1)
    if len(shape) != 4:
        raise ctx.error(f"The input tensor with rank lower than 4 is not supported (input rank: {len(shape)})")
    return ctx.types[0], tuple(shape), bs, ctx.raw("mode", "blocks_first")


@register("DepthToSpace")
def depth_to_space(ctx: OpContext) -> list[TensorType]:
    t, (n, c, h, w), bs, mode = _blocks_4d(ctx)
    if c % (bs * bs):
        raise ctx.error(f"The depth axis size must be a multiple of the squared block_size attribute value ({c}, {bs})")
    onnx_mode = {"blocks_first": "DCR", "depth_first": "CRD", 0: "DCR", 1: "CRD"}.get(mode)
    if onnx_mode is None:
        raise ctx.error(f"'mode' must be blocks_first or depth_first, got {mode!r:.40}")
    ctx.require_onnx(t.elem_type, "DepthToSpace")
    ctx.emit("DepthToSpace", ctx.inputs, ctx.out(), blocksize=bs, mode=onnx_mode)
    return [TensorType(t.elem_type, (n, c // (bs * bs), h * bs, w * bs))]


@register("SpaceToDepth")
def space_to_depth(ctx: OpContext) -> list[TensorType]:
    t, (n, c, h, w), bs, mode = _blocks_4d(ctx)
    if h % bs or w % bs:
        raise ctx.error(f"The spatial dimensions {h}x{w} must be multiples of block_size {bs}")
    if mode not in ("blocks_first", 0):
        raise ctx.error(f"SpaceToDepth mode {mode!r:.40} is not supported (blocks_first only, as ONNX)")
    ctx.require_onnx(t.elem_type, "SpaceToDepth")
    ctx.emit("SpaceToDepth", ctx.inputs, ctx.out(), blocksize=bs)
    return [TensorType(t.elem_type, (n, c * bs * bs, h // bs, w // bs))]


@register("ShuffleChannels")
def shuffle_channels(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(1)
    t = ctx.types[0]
    shape = ctx.static_shape(0)
    rank = len(shape)
    if rank < 1:
        raise ctx.error("The input tensor's shape is expected to be at least 1D.")
    axis = ctx.attr_int("axis", 1, lo=-rank, hi=rank - 1)
    axis = axis + rank if axis < 0 else axis
    if axis >= rank:  # the default axis 1 on a 1-D input
        raise ctx.error(f"ShuffleChannels 'axis' must name one of the input's dimensions ({axis}, rank {rank})")
    groups = ctx.attr_int("groups", 1, lo=1)
    c = shape[axis]
    if c % groups:
        raise ctx.error(
            f"The channel dimension size has to be a multiple of the groups parameter value ({c}, {groups})"
        )
    pre, post = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    ctx.require_onnx(t.elem_type, "Reshape", "Transpose")
    x = ctx.b.reserve(f"{ctx.name}/grouped")
    reshape_node(ctx, ctx.inputs[0], [pre, groups, c // groups, post], x)
    y = ctx.emit("Transpose", [x], perm=[0, 2, 1, 3])
    reshape_node(ctx, y, list(shape), ctx.out())
    return [t]
