"""Sequence decoding ops of opset 1: GatherTree (v1) and CTCGreedyDecoder (v0).

- GatherTree(step_ids, parent_idx, max_seq_len, end_token), ``[T, B, W]`` beams: each beam's ids traced back
  through its parents from its last step ``min(T, max_seq_len[b]) - 1``, the steps after it ``end_token``, and
  after the first ``end_token`` (compared as indices: f32 values truncated) every id ``end_token``. An ONNX Scan
  over the steps from the last, carrying each beam's current parent (GatherElements), then an exclusive CumSum
  of the end tokens. i32 or f32, as the op's definition (TensorFlow's ``gather_tree``).
- CTCGreedyDecoder(data ``[T, N, C]``, sequence_mask ``[T, N]``) -> ``[N, T, 1, 1]`` of the data's type: each
  step's class (the first largest; a NaN never wins unless it is class 0, as the kernel's ``x > max`` scan from
  class 0), the blank (class ``C - 1``) dropped and, with ``ctc_merge_repeated``, a class equal to the previous
  step's dropped, the rest moved to the front and ``-1`` after them. A sequence ends before the first 0 of its
  mask after step 0 (the CPU kernel of the op, as TensorFlow's greedy decoder which the op's spec cites).
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register

_I64, _F32, _BOOL = dtypes.parse("i64"), dtypes.parse("f32"), dtypes.parse("boolean")


def _rank(ctx: OpContext, i: int, want: int, what: str, rule: str) -> None:
    s = ctx.shape(i)
    if s is not None and len(s) != want:
        raise ctx.error(f"{what} input rank must {rule} ({what} rank: {len(s)})")


@register("GatherTree", versions=(1,))
def gather_tree(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(4)
    _rank(ctx, 0, 3, "step_ids", "equal to 3")
    _rank(ctx, 1, 3, "parent_idx", "equal to 3")
    _rank(ctx, 2, 1, "max_seq_len", "equal to 1")
    _rank(ctx, 3, 0, "end_token", "be scalar")
    t = ctx.types[0]
    dt = t.elem_type
    if dt.name not in ("i32", "f32") or any(ctx.elem(i) is not dt for i in range(4)):
        raise ctx.error(
            "GatherTree takes step_ids, parent_idx, max_seq_len and end_token of one type, i32 or f32 "
            f"(got {', '.join(str(ctx.elem(i)) for i in range(4))})"
        )
    s0, s1, s2 = ctx.static_shape(0, "step_ids"), ctx.static_shape(1, "parent_idx"), ctx.static_shape(2)
    if tuple(s0) != tuple(s1):
        raise ctx.error(f"step_ids shape and parent_ids shape must be the same ({shape_str(s0)}, {shape_str(s1)})")
    steps, batch, beams = s0
    if s2[0] != batch:
        raise ctx.error(f"max_seq_len must have size of BATCH_SIZE ({s2[0]} for {batch})")
    ids, parents, lengths, end = ctx.inputs
    ctx.require_onnx(dt, "Scan", "GatherElements", "Where")

    def index(x: str) -> str:  # nGraph's _asIndex: the value as an index (f32 truncated)
        return ctx.emit("Cast", [x], to=_I64.onnx)

    # each batch's length min(T, max_seq_len[b]); a negative one is a huge size_t, so T
    msl = index(lengths)
    length = ctx.emit("Where", [ctx.emit("Less", [msl, ctx.int64s([0])]), ctx.int64s([steps]), msl])
    length = ctx.emit("Unsqueeze", [ctx.emit("Min", [length, ctx.int64s([steps])]), ctx.int64s([1])])  # [B, 1]
    start = ctx.b.const(np.broadcast_to(np.arange(beams, dtype=np.int64), (batch, beams)).copy(), _I64, "beams")
    times = ctx.b.const(np.arange(steps, dtype=np.int64), _I64, "steps")
    body = _gather_tree_body(ctx, dt, length, end, batch, beams)
    traced = ctx.b.reserve(f"{ctx.name}/traced")
    ctx.emit_multi(
        "Scan",
        [start, times, ids, index(parents)],
        [ctx.b.reserve(f"{ctx.name}/parent"), traced],
        body=body,
        num_scan_inputs=3,
        scan_input_directions=[1, 1, 1],
        scan_output_directions=[1],
    )
    # after the first end token (within the length), end tokens
    valid = ctx.emit("Less", [ctx.b.const(np.arange(steps, dtype=np.int64).reshape(steps, 1, 1), _I64), length])
    is_end = ctx.emit("And", [ctx.emit("Equal", [index(traced), index(end)]), valid])
    before = ctx.emit("CumSum", [ctx.emit("Cast", [is_end], to=_I64.onnx), ctx.scalar(0, _I64)], exclusive=1)
    finished = ctx.emit("Greater", [before, ctx.int64s([0])])
    ctx.emit("Where", [finished, end, traced], ctx.out())
    return [TensorType(dt, tuple(s0))]


def _gather_tree_body(ctx: OpContext, dt: dtypes.DType, length: str, end: str, batch: int, beams: int):
    """One step ``t`` (from the last): ``out = ids[t, b, p]`` and ``p = parents[t, b, p]`` where ``t <
    length[b]``, else ``end_token`` and ``p`` unchanged (each beam's own index until its last step)."""
    p = f"{ctx.name}/p"
    names = {k: f"{ctx.name}/body/{k}" for k in ("t", "ids", "par", "valid", "got", "next", "np", "out")}
    nodes = [
        helper.make_node("Less", [names["t"], length], [names["valid"]]),
        helper.make_node("GatherElements", [names["ids"], p], [names["got"]], axis=1),
        helper.make_node("GatherElements", [names["par"], p], [names["next"]], axis=1),
        helper.make_node("Where", [names["valid"], names["next"], p], [names["np"]]),
        helper.make_node("Where", [names["valid"], names["got"], end], [names["out"]]),
    ]
    vi = helper.make_tensor_value_info
    return helper.make_graph(
        nodes,
        f"{ctx.name}_step",
        [
            vi(p, _I64.onnx, [batch, beams]),
            vi(names["t"], _I64.onnx, []),
            vi(names["ids"], dt.onnx, [batch, beams]),
            vi(names["par"], _I64.onnx, [batch, beams]),
        ],
        [vi(names["np"], _I64.onnx, [batch, beams]), vi(names["out"], dt.onnx, [batch, beams])],
    )


@register("CTCGreedyDecoder")
def ctc_greedy_decoder(ctx: OpContext) -> list[TensorType]:
    ctx.expect_inputs(2)
    t = ctx.types[0]
    dt = t.elem_type
    shape = ctx.static_shape(0)
    if len(shape) < 3:
        raise ctx.error(f"CTCGreedyDecoder expects 3 or more dimensions for input. Got {len(shape)}")
    if len(shape) != 3:
        raise ctx.error(f"CTCGreedyDecoder's data must be [T, N, C], got {shape_str(shape)}")
    steps, batch, classes = shape
    ms = ctx.shape(1)
    if ms is not None and tuple(ms) != (steps, batch):
        raise ctx.error(f"CTCGreedyDecoder's sequence_mask must be [T, N] = {{{steps},{batch}}}, got {shape_str(ms)}")
    if dt.kind != "real" or ctx.elem(1).kind == "boolean":
        raise ctx.error(f"CTCGreedyDecoder takes floating-point data and a numeric mask, got {dt}, {ctx.elem(1)}")
    if 0 in shape:
        raise ctx.error(
            f"CTCGreedyDecoder needs at least one step, sequence and class (the blank), got {shape_str(shape)}"
        )
    merge = ctx.attr_bool("ctc_merge_repeated", True)
    ctx.require_onnx(dt, "ArgMax", "IsNaN", "Where", "ScatterElements")
    x = ctx.inputs[0]
    # the first largest, a NaN only when it is class 0
    x0 = ctx.emit("Slice", [x, ctx.int64s([0]), ctx.int64s([1]), ctx.int64s([2])])
    cleaned = ctx.emit("Where", [ctx.emit("IsNaN", [x]), ctx.scalar(np.float64(-np.inf), dt), x])
    best = ctx.emit("ArgMax", [cleaned], axis=2, keepdims=1)
    best = ctx.emit("Where", [ctx.emit("IsNaN", [x0]), ctx.int64s([0]), best])
    best = ctx.emit("Squeeze", [best, ctx.int64s([2])])  # [T, N]
    # step t is in the sequence when the mask has no 0 at steps 1..t
    zero = ctx.emit("Equal", [ctx.inputs[1], ctx.scalar(np.zeros((), ctx.elem(1).numpy), ctx.elem(1))])
    first = ctx.b.const(np.arange(steps).reshape(steps, 1) == 0, _BOOL, "step0")
    stops = ctx.emit("Cast", [ctx.emit("And", [zero, ctx.emit("Not", [first])])], to=_I64.onnx)
    inside = ctx.emit("Equal", [ctx.emit("CumSum", [stops, ctx.scalar(0, _I64)]), ctx.int64s([0])])
    keep = ctx.emit("And", [inside, ctx.emit("Less", [best, ctx.int64s([classes - 1])])])
    if merge:
        prev = ctx.emit("Concat", [ctx.b.const(np.full((1, batch), -1, np.int64), _I64, "none"), best], axis=0)
        prev = ctx.emit("Slice", [prev, ctx.int64s([0]), ctx.int64s([steps]), ctx.int64s([0])])
        keep = ctx.emit("And", [keep, ctx.emit("Not", [ctx.emit("Equal", [best, prev])])])
    keep_i = ctx.emit("Cast", [keep], to=_I64.onnx)
    slot = ctx.emit("CumSum", [keep_i, ctx.scalar(0, _I64)], exclusive=1)
    slot = ctx.emit("Where", [keep, slot, ctx.int64s([steps])])  # dropped ones go to a spare column
    base = ctx.b.const(np.full((batch, steps + 1), -1, dt.numpy), dt, "unfilled")
    values = ctx.emit("Cast", [ctx.emit("Transpose", [best], perm=[1, 0])], to=dt.onnx)
    out = ctx.emit("ScatterElements", [base, ctx.emit("Transpose", [slot], perm=[1, 0]), values], axis=1)
    out = ctx.emit("Slice", [out, ctx.int64s([0]), ctx.int64s([steps]), ctx.int64s([1])])
    ctx.emit("Reshape", [out, ctx.int64s([batch, steps, 1, 1])], ctx.out())
    return [TensorType(dt, (batch, steps, 1, 1))]
