"""ScatterAdd, ScatterNDAdd, ScatterND (v0) and EmbeddingLookup, ReverseSequence.

- ScatterAdd adds ``updates[i, ...]`` into ``inputs[indices[i], ...]`` (indices of any shape, repeats
  accumulate); ScatterNDAdd adds into ``inputs[indices[..., :k]]``. Both become ONNX ScatterND with
  ``reduction="add"`` (opset 16 and later); ScatterAdd's indices get a trailing axis of 1. Float
  repeats are added in ONNX Runtime's order (nGraph's: index order).
- ScatterND (a v0 fused op after 0.26) is nGraph's decomposition: the indexed elements set to zero,
  then ScatterNDAdd, so repeated indices add their updates (ONNX ScatterND keeps one of them).
- EmbeddingLookup(indices, weights) is Gather on axis 0 of the weights (indices cast to int64: real
  indices truncate, as nGraph's cast). 1-D indices only: for higher ranks nGraph 0.26's kernel copies
  rows of the output's dimension 1 instead of the weights' row length (a bug that leaves memory
  unwritten), so there is no nGraph meaning to keep.
- ReverseSequence reverses the first ``seq_lengths[b]`` elements along ``sequence_axis`` for each batch
  ``b``: ONNX ReverseSequence, which takes the batch and time axes 0 and 1 only.
"""

from __future__ import annotations

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register

_I64 = dtypes.parse("i64")
SCATTER_REDUCTION_OPSET = 16


def _int64(ctx: OpContext, i: int, what: str) -> str:
    dt = ctx.elem(i)
    if dt.kind == "boolean":
        raise ctx.error(f"{what} must be numeric, got {dt}")
    return ctx.inputs[i] if dt is _I64 else ctx.emit("Cast", [ctx.inputs[i]], to=_I64.onnx)


def _scatter_checks(ctx: OpContext) -> TensorType:
    ctx.expect_inputs(3)
    t, _, tu = ctx.types
    if tu.elem_type is not t.elem_type:
        raise ctx.error(f"Updates element type ({tu.elem_type}) must match inputs element type ({t.elem_type})")
    if ctx.elem(1).kind not in ("integer", "quantized"):
        raise ctx.error(f"Indices element type must be i64 or i32, got {ctx.elem(1)}")
    if ctx.b.opset < SCATTER_REDUCTION_OPSET:
        raise ctx.error(f"{ctx.op.op} needs opset {SCATTER_REDUCTION_OPSET} or later (ScatterND with reduction add)")
    ctx.require_onnx(t.elem_type, "ScatterND")
    return t


@register("ScatterAdd")
def scatter_add(ctx: OpContext) -> list[TensorType]:
    t = _scatter_checks(ctx)
    shape, ishape, ushape = ctx.static_shape(0), ctx.static_shape(1, "indices"), ctx.static_shape(2, "updates")
    if tuple(ushape) != tuple(ishape) + tuple(shape[1:]):
        raise ctx.error(
            f"Updates shape {shape_str(ushape)} must be indices shape {shape_str(ishape)} + inputs shape[1:] "
            f"{shape_str(tuple(shape[1:]))}"
        )
    idx = ctx.emit("Unsqueeze", [_int64(ctx, 1, "indices"), ctx.int64s([len(ishape)])])
    ctx.emit("ScatterND", [ctx.inputs[0], idx, ctx.inputs[2]], ctx.out(), reduction="add")
    return [t]


def _nd_checks(ctx: OpContext) -> tuple[TensorType, tuple[int, ...]]:
    """ScatterNDAdd's and ScatterND's checks; the type and the updates' shape."""
    t = _scatter_checks(ctx)
    shape, ishape, ushape = ctx.static_shape(0), ctx.static_shape(1, "indices"), ctx.static_shape(2, "updates")
    if not shape:
        raise ctx.error("Data rank is expected to be at least 1.")
    if not ishape or ishape[-1] > len(shape):
        raise ctx.error(f"Last dimension of indices ({shape_str(ishape)}) can be at most the rank of inputs")
    if tuple(ushape) != tuple(ishape[:-1]) + tuple(shape[ishape[-1] :]):
        raise ctx.error(f"Updates shape {shape_str(ushape)} does not match indices {shape_str(ishape)}")
    return t, ushape


@register("ScatterNDAdd")
def scatter_nd_add(ctx: OpContext) -> list[TensorType]:
    t, _ = _nd_checks(ctx)
    ctx.emit("ScatterND", [ctx.inputs[0], _int64(ctx, 1, "indices"), ctx.inputs[2]], ctx.out(), reduction="add")
    return [t]


@register("ScatterND")
def scatter_nd(ctx: OpContext) -> list[TensorType]:
    """nGraph's decomposition: zeros where the indices point (Select with a ScatterNDAdd mask), then
    ScatterNDAdd of the updates, so repeated indices add up (ONNX ScatterND without reduction keeps one)."""
    t, ushape = _nd_checks(ctx)
    dt = t.elem_type
    ctx.require_onnx(dt, "Expand")
    idx = _int64(ctx, 1, "indices")
    zeros = ctx.emit("Expand", [ctx.scalar(0, dt), ctx.int64s(ushape)])
    cleared = ctx.emit("ScatterND", [ctx.inputs[0], idx, zeros])
    ctx.emit("ScatterND", [cleared, idx, ctx.inputs[2]], ctx.out(), reduction="add")
    return [t]


@register("EmbeddingLookup")
def embedding_lookup(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    ti, tw = ctx.types
    if ctx.rank(1, "weights") != 2:
        raise ctx.error(f"weights must be a matrix, got shape {shape_str(tw.shape)}")
    if ctx.rank(0, "indices") != 1:  # nGraph 0.26's kernel copies rows of out_shape[1] elements: wrong for these
        raise ctx.error(
            f"EmbeddingLookup with indices of shape {shape_str(ti.shape)} is refused: nGraph's kernel is only "
            "right for 1-D indices (it copies rows of the output's dimension 1, leaving the rest unwritten)"
        )
    ctx.require_onnx(tw.elem_type, "Gather")
    ctx.emit("Gather", [ctx.inputs[1], _int64(ctx, 0, "indices")], ctx.out(), axis=0)
    return [TensorType(tw.elem_type, tuple(ti.shape) + (tw.shape[1],))]  # type: ignore[arg-type, index]


@register("ReverseSequence")
def reverse_sequence(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t = ctx.types[0]
    rank = ctx.rank(0)
    batch = ctx.attr_int("batch_axis", hi=max(rank - 1, 0))
    seq = ctx.attr_int("sequence_axis", hi=max(rank - 1, 0))
    if sorted((batch, seq)) != [0, 1]:
        raise ctx.error(
            f"ReverseSequence with batch axis {batch} and sequence axis {seq} has no ONNX counterpart "
            "(ONNX ReverseSequence: axes 0 and 1)"
        )
    ctx.require_onnx(t.elem_type, "ReverseSequence")
    lengths = _int64(ctx, 1, "sequence lengths")
    ctx.emit("ReverseSequence", [ctx.inputs[0], lengths], ctx.out(), batch_axis=batch, time_axis=seq)
    return [t]
