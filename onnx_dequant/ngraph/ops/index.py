"""Gather (v0 ``axis`` attribute, v1 the axis as a Constant input), GatherND, ArgMax / ArgMin, TopK.

Indices are cast to int64 for ONNX. nGraph's kernels read indices as unsigned offsets: a negative or
out-of-range index is out of bounds there (undefined behaviour), where ONNX Gather counts negatives from
the end; in-range indices agree. ArgMax / ArgMin keep nGraph's ``x > m`` (``x < m``) scan: the first
extreme wins and a NaN never does (NaN becomes -inf / +inf first), the index in ``index_element_type``.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register

_I64 = dtypes.parse("i64")


def _indices(ctx: OpContext, i: int) -> str:
    dt = ctx.elem(i)
    if dt.kind not in ("integer", "quantized"):
        raise ctx.error(f"Indices element type must be an integer type, got {dt}")
    return ctx.inputs[i] if dt is _I64 else ctx.emit("Cast", [ctx.inputs[i]], to=_I64.onnx)


@register("Gather", versions=(0, 1))
def gather(ctx: OpContext) -> list[TensorType]:
    if ctx.op.version >= 1:
        ctx.expect_inputs(3)
    else:
        ctx.expect_inputs(2)
    t, ti = ctx.types[0], ctx.types[1]
    rank = ctx.rank(0)
    ctx.rank(1, "indices")
    if ctx.op.version >= 1:
        values = ctx.constant_ints(2, "axis", lo=-rank, hi=rank - 1)
        if len(values) != 1:
            raise ctx.error("Gather's axis (input 2) must be a scalar")
        axis = values[0] + rank if values[0] < 0 else values[0]
    else:
        axis = ctx.attr_int("axis", 0, hi=max(rank - 1, 0))
    if axis >= rank:
        raise ctx.error(f"The axis must be less than the input rank (axis {axis}, shape {shape_str(t.shape)})")
    ctx.require_onnx(t.elem_type, "Gather")
    ctx.emit("Gather", [ctx.inputs[0], _indices(ctx, 1)], ctx.out(), axis=axis)
    shape = tuple(t.shape[:axis]) + tuple(ti.shape) + tuple(t.shape[axis + 1 :])  # type: ignore[index, arg-type]
    return [TensorType(t.elem_type, shape)]


@register("GatherND")
def gather_nd(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t, ti = ctx.types
    rank = ctx.rank(0)
    ishape = ctx.static_shape(1, "indices")
    if not ishape or ishape[-1] > rank:
        raise ctx.error(
            f"The last dimension of indices ({shape_str(ishape)}) can be at most the rank of params ({rank})"
        )
    ctx.require_onnx(t.elem_type, "GatherND")
    ctx.emit("GatherND", [ctx.inputs[0], _indices(ctx, 1)], ctx.out())
    shape = tuple(ishape[:-1]) + tuple(t.shape[ishape[-1] :])  # type: ignore[index]
    return [TensorType(t.elem_type, shape)]


def _arg(onnx_op: str, nan_to: float):
    def convert(ctx: OpContext) -> list[TensorType]:
        ctx.expect_inputs(1)
        t = ctx.types[0]
        rank = ctx.rank(0)
        axis = ctx.attr_int("axis", hi=max(rank - 1, 0))
        if axis >= rank:
            raise ctx.error(f"Reduction axis ({axis}) is not less than argument rank ({rank})")
        index_type = ctx.attr_type("index_element_type")
        if index_type.name not in ("i32", "i64"):
            raise ctx.error(f"Index element is neither i64 or i32 (got {index_type})")
        dt = t.elem_type
        if dt.kind == "boolean":
            raise ctx.error(f"{ctx.op.op} on boolean is not supported (numeric types only)")
        x = ctx.inputs[0]
        ctx.require_onnx(dt, onnx_op)
        if dt.is_real:
            nan = ctx.emit("IsNaN", [x])
            x = ctx.emit("Where", [nan, ctx.scalar(np.float64(nan_to), dt), x])
        if index_type is _I64:
            ctx.emit(onnx_op, [x], ctx.out(), axis=axis, keepdims=0)
        else:
            ctx.emit("Cast", [ctx.emit(onnx_op, [x], axis=axis, keepdims=0)], ctx.out(), to=index_type.onnx)
        shape = tuple(d for i, d in enumerate(t.shape) if i != axis)  # type: ignore[union-attr]
        return [TensorType(index_type, shape)]

    return convert


register("ArgMax")(_arg("ArgMax", -np.inf))
register("ArgMin")(_arg("ArgMin", np.inf))


@register("TopK", versions=(0, 1))
def topk(ctx: OpContext) -> list[TensorType]:
    """ONNX TopK (sorted, ties to the lower index, as nGraph's comparison); v0 outputs (indices, values),
    v1 (values, indices). ``k`` 0 in v0 means the whole axis."""
    v1 = ctx.op.version >= 1
    ctx.expect_inputs(2 if v1 else 1, *(() if v1 else (2,)))
    t = ctx.types[0]
    dt = t.elem_type
    rank = ctx.rank(0)
    if dt.kind == "boolean":
        raise ctx.error("TopK on boolean is not supported (numeric types only)")
    if v1:
        axis = ctx.attr_int("axis", lo=-rank, hi=rank - 1)
        axis = axis + rank if axis < 0 else axis
        mode = ctx.raw("mode", "max")
        largest = {"max": True, "min": False, 0: True, 1: False}.get(mode.lower() if isinstance(mode, str) else mode)
        sort = ctx.raw("sort_type", "value")
        sort = sort.lower() if isinstance(sort, str) else {0: "none", 1: "index", 2: "value"}.get(sort)
        values = ctx.constant_ints(1, "k", lo=1)
        if len(values) != 1:
            raise ctx.error("TopK's k (input 1) must be a scalar")
        k = values[0]
    else:
        axis = ctx.attr_int("top_k_axis", hi=max(rank - 1, 0))
        largest = ctx.attr_bool("compute_max", True)
        sort = "value"
        k = ctx.attr_int("k", 0)
        if len(ctx.inputs) == 2:
            values = ctx.constant_ints(1, "k", lo=0)
            k = values[0] if len(values) == 1 else -1
    if largest is None:
        raise ctx.error(f"'mode' must be max or min, got {ctx.raw('mode')!r:.40}")
    if sort not in ("value", "none"):
        raise ctx.error(f"TopK sort_type {sort!r} is not supported (values sorted only, as ONNX TopK)")
    if axis >= rank:
        raise ctx.error(f"TopK axis ({axis}) is out of bounds (argument shape: {shape_str(t.shape)})")
    d = t.shape[axis]  # type: ignore[index]
    if k == 0:
        if not isinstance(d, int):
            raise ctx.error("TopK with k = 0 (the whole axis) needs the axis size, which is unknown")
        k = d
    if isinstance(d, int) and not 0 < k <= d:
        raise ctx.error(f"K ({k}) exceeds the dimension ({d}) of the TopK axis ({axis})")
    index_type = ctx.attr_type("index_element_type", _I64)
    if index_type.name not in ("i32", "i64"):
        raise ctx.error(f"Index element type must be i64 or i32 (got {index_type})")
    ctx.require_onnx(dt, "TopK")
    vi, ii = (0, 1) if v1 else (1, 0)
    values_out = ctx.out(vi)
    indices_out = ctx.out(ii) if index_type is _I64 else ctx.b.reserve(f"{ctx.name}/indices")
    ctx.emit_multi(
        "TopK", [ctx.inputs[0], ctx.int64s([k])], [values_out, indices_out], axis=axis, largest=int(largest), sorted=1
    )
    if index_type is not _I64:
        ctx.emit("Cast", [indices_out], ctx.out(ii), to=index_type.onnx)
    shape = list(t.shape)  # type: ignore[arg-type]
    shape[axis] = k
    types = [TensorType(dt, tuple(shape)), TensorType(index_type, tuple(shape))]
    return types if v1 else types[::-1]
