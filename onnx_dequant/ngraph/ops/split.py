"""Split (v0: ``axis`` and ``splits`` attributes, or the axis as input 1; v1: ``num_splits`` equal parts of
the axis given as input 1) and VariadicSplit (v1: axis and ``split_lengths`` as inputs, one length -1 for
the rest): one ONNX Split with several outputs. Consumers take output ``i`` by index, or through a
GetOutputElement.
"""

from __future__ import annotations

from ...contract import Dim, TensorType
from ..context import OpContext, shape_str
from . import register


def _axis(ctx: OpContext, axis: int, rank: int) -> int:
    if axis < 0:
        axis += rank
    if not 0 <= axis < rank:
        raise ctx.error(
            "The 'axis' parameter for Split has to point to one of the input tensor's shape dimensions "
            f"(axis {axis}, shape {shape_str(ctx.shape(0))})"
        )
    return axis


def _emit(ctx: OpContext, axis: int, lengths: list[int]) -> list[TensorType]:
    t = ctx.types[0]
    ctx.require_onnx(t.elem_type, "Split")
    outs = [ctx.out(i) for i in range(len(lengths))]
    ctx.emit_multi("Split", [ctx.inputs[0], ctx.int64s(lengths)], outs, axis=axis)
    result = []
    for n in lengths:
        shape: list[Dim] = list(t.shape)  # type: ignore[arg-type]
        shape[axis] = n
        result.append(TensorType(t.elem_type, tuple(shape)))
    return result


def _dim(ctx: OpContext, axis: int) -> int:
    d = ctx.shape(0)[axis]  # type: ignore[index]
    if not isinstance(d, int):
        raise ctx.error(f"{ctx.op.op} needs the size of the split axis {axis}, unknown in {shape_str(ctx.shape(0))}")
    return d


@register("Split", versions=(0, 1))
def split(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(*((2,) if ctx.op.version >= 1 else (1, 2)))
    rank = ctx.rank(0)
    if ctx.op.version >= 1:
        axis = _axis(ctx, _scalar_axis(ctx), rank)
        n = ctx.attr_int("num_splits", lo=1)
        d = _dim(ctx, axis)
        if d % n:
            raise ctx.error(
                f"The input tensor's dimension pointed by the 'axis' parameter: {d} has to be a multiple of the "
                f"'num_splits' attribute value: {n}"
            )
        return _emit(ctx, axis, [d // n] * n)
    axis = _axis(ctx, _scalar_axis(ctx) if len(ctx.inputs) == 2 else ctx.attr_int("axis", lo=-rank, hi=rank), rank)
    splits = ctx.attr_ints("splits")
    if not splits:
        raise ctx.error("Split needs a non-empty 'splits' list")
    d = ctx.shape(0)[axis]  # type: ignore[index]
    if isinstance(d, int) and sum(splits) != d:
        raise ctx.error(
            f"The input tensor's dimension pointed by the 'axis' parameter: {d} has to be equal to the sum of "
            f"splits passed to the op: {sum(splits)}"
        )
    if min(splits) <= 0:
        raise ctx.error("All values of the 'splits' attribute must be greater than zero")
    return _emit(ctx, axis, splits)


def _scalar_axis(ctx: OpContext) -> int:
    values = ctx.constant_ints(1, "axis")
    if len(values) != 1:
        raise ctx.error(f"{ctx.op.op}: the axis (input 1) must be a scalar, got {len(values)} values")
    return values[0]


@register("VariadicSplit", versions=(1,))
def variadic_split(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(3)
    axis = _axis(ctx, _scalar_axis(ctx), ctx.rank(0))
    lengths = ctx.constant_ints(2, "split_lengths", lo=-1)
    rest = [i for i, n in enumerate(lengths) if n == -1]
    if len(rest) > 1:
        raise ctx.error("Only one split length can be -1 (the rest of the axis)")
    if rest:
        d = _dim(ctx, axis)
        known_sum = sum(n for n in lengths if n != -1)
        if known_sum > d:
            raise ctx.error(f"Total length of splits ({known_sum}) exceeds the dimension of the axis ({d})")
        lengths[rest[0]] = d - known_sum
    d = ctx.shape(0)[axis]  # type: ignore[index]
    if isinstance(d, int) and sum(lengths) != d:
        raise ctx.error(f"Total length of splits: {sum(lengths)} must match the length of the chosen axis: {d}")
    return _emit(ctx, axis, lengths)
