"""Chunked: ``Scan`` over axis 0, each slice lowered by the best other form, so that the slice's
intermediates stay in cache instead of crossing memory: the f32 intermediate of an f16 or bf16 model
output (an f32 DequantizeLinear and a Cast), the float64 intermediates of an exact i32 input or an f64
output (Cast/Sub/Mul in float64, 8 bytes an element each), or an i32 row's run-time check (``i32-guarded``:
its two reads of the row); the scale and zero point are scanned with the input when 0 is a
quantization axis. Where the rows along axis 0 do not fit (too short, too long, or a rank-1 input), a
per-tensor input is reshaped to two rows or more that do (a divisor of its size); with quantization
axes, ``k`` short rows along axis 0 are joined into one (a divisor of its first dim; the scale and zero
point reshaped to match)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from onnx import helper

from ... import dtypes
from ...errors import DequantizeError
from ..emitter import Emitter
from ..facts import NodeInfo
from .base import DQL_TYPE, Plan, Refusal, Strategy, dql_refusal
from .costs import CACHE_BYTES, chunked_cast_saving, reshaped_output_cost
from .dql import reshape
from .guarded import Branches, checks_as_f32, runs_in_cache

__all__ = [
    "Chunked",
    "RowPlan",
    "CHUNK_MIN",
    "CHUNK_MAX",
    "CHUNK_TARGET",
    "CACHED",
    "SCAN_ROW_COST",
]

CHUNK_MIN = 64 << 10
CHUNK_MAX = 4 << 20
"""Elements per slice where the Scan measured faster than one f32 DequantizeLinear and a Cast over the
whole tensor (1.2-1.4x the f32 form at 256K-1M elements, 1.5-1.9x at 64K or 4M, against 2.0-2.3x)."""
CHUNK_TARGET = 256 << 10
"""The row a reshaped per-tensor input gets, or the divisor of its size nearest to it (a row of i32 and its
f32 result then fit a core's 2 MB L2)."""
CACHED = 0.5
"""The share of a row's intermediates' memory traffic the cost model still charges when they are chunked
(``_saved``; an f32 product read by a final Cast to f16/bf16 saves what that Cast measured in a row, where
that is more)."""
SCAN_ROW_COST = 4096.0
"""A Scan iteration's own cost, in the table's copy bytes: 0.5 us measured (rows of 16 through Relu, ORT
1.32, one thread), about the copy of a few KB."""


def _float64_work(info: NodeInfo) -> bool:
    """Lowered with float64 intermediates: an exact i32 input (a DequantizeLinear wraps; Cast/Sub/Mul in
    float64 or a guard before one), or an f64 output (no DequantizeLinear has one)."""
    return (info.in_type.name == "i32" and not info.int32_wrap) or info.out_type.name == "f64"


def _saved(info: NodeInfo, row: Plan, row_size: int) -> float:
    """What keeping a row of ``row_size`` elements' intermediates in cache saves, per element: ``1 - CACHED``
    of their write and read-back traffic; for an f32 product that a final Cast to f16/bf16 reads, what the
    calibrated Cast saves in a row (``costs.chunked_cast_saving``, rows of ``CHUNK_TARGET``) where that is
    more and the row's product fits the cache."""
    traffic = (1 - CACHED) * 2 * _intermediate_bytes(info, row)
    work = row.choice if isinstance(row.choice, dtypes.DType) else DQL_TYPE
    product = work.bits / 8
    if work is not DQL_TYPE or info.out_type.name not in ("f16", "bf16") or row_size * product > CACHE_BYTES:
        return traffic
    measured = chunked_cast_saving(info.out_type) * (product + info.out_type.bits / 8) / 6
    return traffic + max(0.0, measured - (1 - CACHED) * 2 * product)


def _intermediate_bytes(info: NodeInfo, row: Plan) -> float:
    """Bytes per element of the intermediates the row form writes and reads back: one f32 tensor for a
    DequantizeLinear and a Cast (and a fed f16/bf16 scale's Cast to f32, per element of the input); for
    Cast/Sub/Mul the cast input, the difference and the product (when a Cast to the output follows) in
    its work type; for i32-guarded the input, which its check reads twice before the DequantizeLinear
    reads it."""
    if isinstance(row.choice, dtypes.DType):  # cast-sub-mul: the choice is its work type
        return row.choice.bits / 8 * (1 + info.has_zp + (row.choice is not info.out_type))
    narrowed = info.out_type is not DQL_TYPE
    scale = DQL_TYPE.bits / 8 * info.scale_size / max(1, info.size()) if narrowed and not info.scale_const else 0.0
    product = DQL_TYPE.bits / 8 if narrowed else 0.0
    if isinstance(row.choice, Branches):  # and the input, which the check reads
        return info.in_type.bits / 8 + product + scale
    return DQL_TYPE.bits / 8 + scale


@dataclasses.dataclass(frozen=True)
class RowPlan:
    """How the Scan lowers each row: the input's (known) shape, and the plan for one row."""

    shape: tuple[int, ...]
    row: Plan


class Chunked(Strategy[RowPlan]):
    """``plan_row`` plans one row among the other strategies (the planner builds this strategy)."""

    name = "scan-chunked"
    portable = False  # Scan is ORT's to run fast; other runtimes unroll or reject it

    def __init__(self, plan_row: Callable[[NodeInfo], Plan]) -> None:
        self.plan_row = plan_row

    def _row(self, info: NodeInfo, shape: tuple[int, ...], x: str, scale: str, zero_point: str | None) -> NodeInfo:
        """The node as the Scan body sees it: one row along axis 0, its inputs named ``x``/``scale``/
        ``zero_point`` (the scale and zero point are rows too when 0 is an axis). Those are body inputs,
        never constants, whatever the model's constants of those names hold."""
        scanned = 0 in info.axes
        rows = {x} | ({scale, zero_point} if scanned else set())
        outer = info.read
        return dataclasses.replace(
            info,
            read=None if outer is None else (lambda name: None if name in rows else outer(name)),
            x=x,
            scale=scale if scanned else info.scale,
            zero_point=(zero_point if scanned else info.zero_point) if info.has_zp else None,
            output=f"{x}__out",
            axes=tuple(a - 1 for a in info.axes if a),
            shape=shape[1:],
            graph_output=True,  # the body's output is a graph output: a Reshape there copies
            model_output=False,
            fusable_weight=False,
            consumers=(),
            zp_zero=False,
            scale_const=info.scale_const and not scanned,
            zp_const=info.zp_const and not scanned,
            whole_size=info.size(),
        )

    def check(self, info: NodeInfo) -> RowPlan | Refusal:
        if not _float64_work(info):  # a float64 chain pays in a graph too (measured: 1.0x DQL -> Relu, not 4x)
            if info.out_type.name not in ("f16", "bf16"):
                return Refusal(
                    "only an f16 or bf16 output (an f32 intermediate), an f64 output or an exact i32 input "
                    "(float64 ones) has intermediates to keep in cache"
                )
            if not info.model_output:
                return Refusal("the output is not a model output (ORT runs a Scan that feeds other ops 1.5x slower)")
            refusal = dql_refusal(info)
            if refusal:
                return refusal
        if info.in_type.bits < 8:
            return Refusal("ORT's Scan does not slice 4-bit tensors")
        if info.out_type.name == "bf16" and info.opset < 16:
            return Refusal("Scan has no bf16 before opset 16")
        if info.known_shape is None:
            return Refusal("needs a known shape")
        shape = _scanned_shape(info, info.known_shape)
        if isinstance(shape, Refusal):
            return shape
        try:  # the row's inputs get their names in emit (names do not change the choice)
            row = self.plan_row(self._row(_viewed(info, shape), shape, "x", "scale", "zero_point"))
        except DequantizeError as e:
            return Refusal(f"no form for a row ({e.rule})")
        return RowPlan(shape, row)

    def cost(self, info: NodeInfo, choice: RowPlan) -> float:
        traffic = info.size() * _intermediate_bytes(info, choice.row)
        reshaped = choice.shape != info.known_shape
        checked = isinstance(choice.row.choice, Branches)  # the input read by the guard's passes
        # the whole guard reads the input from cache too: in a graph, or standalone where its int32 check
        # (which writes no copy) leaves the Scan's rows nothing to save
        checked_in_cache = checked and runs_in_cache(info) and (not info.graph_output or not checks_as_f32(info))
        whole_in_cache = (reshaped and traffic <= CACHE_BYTES) or checked_in_cache
        saved = 0.0 if whole_in_cache else info.size() * _saved(info, choice.row, math.prod(choice.shape[1:]))
        copy = reshaped_output_cost(info) if reshaped else 0.0
        return (choice.row.cost + SCAN_ROW_COST) * choice.shape[0] - saved + copy

    def emit(self, info: NodeInfo, choice: RowPlan, em: Emitter) -> None:
        row = list(choice.shape[1:])
        xs = em.fresh("x_row")
        reshaped = choice.shape != info.known_shape
        view = _viewed(info, choice.shape)
        x = reshape(em, info, info.x, em.i64(list(choice.shape)), hint="rows") if reshaped else info.x
        outer, body_in = [x], [helper.make_tensor_value_info(xs, info.in_type.onnx, row)]
        scale, zp = info.scale, info.zero_point
        if 0 in view.axes:  # the scale and zero point vary along axis 0: scan them too
            dims = [choice.shape[a] for a in view.axes]
            scale = em.fresh("scale_row")
            outer.append(_param_view(em, info, info.scale, dims) if reshaped else info.scale)
            body_in.append(helper.make_tensor_value_info(scale, info.out_type.onnx, dims[1:]))
            if info.has_zp and info.zero_point is not None:
                zp = em.fresh("zero_point_row")
                outer.append(_param_view(em, info, info.zero_point, dims) if reshaped else info.zero_point)
                body_in.append(helper.make_tensor_value_info(zp, info.in_type.onnx, dims[1:]))
        sub = dataclasses.replace(self._row(view, choice.shape, xs, scale, zp), output=em.fresh("y_row"))
        body_em = em.child(f"{em.prefix}_row")
        choice.row.emit(sub, body_em)
        body = helper.make_graph(
            body_em.nodes,
            em.fresh("body"),
            body_in,
            [helper.make_tensor_value_info(sub.output, info.out_type.onnx, row)],
        )
        out = em.fresh("y_rows") if reshaped else info.output
        em.node("Scan", outer, out, hint="scan", body=body, num_scan_inputs=len(outer))
        if reshaped:
            reshape(em, info, out, em.i64(list(info.known_shape or ())), info.output, hint="y")


def _scanned_shape(info: NodeInfo, shape: tuple[int, ...]) -> tuple[int, ...] | Refusal:
    """The view the Scan slices along axis 0: the input itself where its rows hold ``CHUNK_MIN`` to
    ``CHUNK_MAX`` elements; else a per-tensor input as rows of a divisor of its size, rows too long along
    the leading axes before the first quantization axis merged, or ``k`` short rows along axis 0 joined (a
    divisor of the first dim); or why none fits."""
    chunk = info.size() // max(1, shape[0]) if len(shape) >= 2 else 0
    if CHUNK_MIN <= chunk <= CHUNK_MAX:
        return shape
    why = f"a row along axis 0 holds {chunk} elements" if len(shape) >= 2 else "a rank-1 input has no rows"
    why += f" (chunking pays from {CHUNK_MIN} to {CHUNK_MAX})"
    if info.graph_output and info.out_type.bits == 64:
        # the final Reshape of a graph output copies; an f64 one cost what the chunks saved, or more
        # (standalone (2048,2048) u8 -> f64 1.02x Cast/Sub/Mul, (510063) 1.2x)
        return Refusal(f"{why}, and reshaping an f64 graph output to other rows copies it")
    if not info.axes:  # per tensor: rows of any divisor of the size
        d = _divisor(info.size(), 1)
        if d is None:
            return Refusal(f"{why}, and {info.size()} has no divisor in that range that leaves two rows")
        return (info.size() // d, d)
    if chunk > CHUNK_MAX:  # leading axes before the first quantization axis merged: rows along them
        fit = [j for j in range(2, min(info.axes) + 1) if CHUNK_MIN <= math.prod(shape[j:]) <= CHUNK_MAX]
        if not fit:
            return Refusal(f"{why}, and no leading axes before the first quantization axis leave such rows")
        j = min(fit, key=lambda j: _off_target(math.prod(shape[j:])))
        return (math.prod(shape[:j]), *shape[j:])
    if not chunk:
        return Refusal(why)
    k = _divisor(shape[0], chunk)  # k rows along axis 0 joined into one
    if k is None:
        return Refusal(f"{why}, and {shape[0]} has no divisor that joins such rows into two or more in that range")
    return (shape[0] // k, k, *shape[1:])


def _viewed(info: NodeInfo, shape: tuple[int, ...]) -> NodeInfo:
    """The node over the view the Scan slices: the input as it is, a per-tensor input as rows, leading
    axes merged into one (none of them quantized), or axis 0 split into (rows, the ``k`` rows each joins)."""
    if shape == info.known_shape or not info.axes:
        return dataclasses.replace(info, shape=shape)
    merged = len(info.known_shape or ()) - len(shape)
    if merged > 0:
        return dataclasses.replace(info, shape=shape, axes=tuple(a - merged for a in info.axes))
    head = (0, 1) if 0 in info.axes else ()
    return dataclasses.replace(info, shape=shape, axes=head + tuple(a + 1 for a in info.axes if a))


def _param_view(em: Emitter, info: NodeInfo, tensor: str, dims: list[int]) -> str:
    """A scale or zero point reshaped to the view's ``dims`` (a new constant when it is one)."""
    return em.redim(tensor, dims, "param_rows") or reshape(em, info, tensor, em.i64(dims), hint="param_rows")


def _divisor(n: int, unit: int) -> int | None:
    """The divisor ``d`` of ``n`` that makes rows of ``d * unit`` elements from ``CHUNK_MIN`` to ``CHUNK_MAX``,
    nearest to ``CHUNK_TARGET`` (by ratio), leaving two rows or more (one row would stay the whole
    tensor); or None."""
    found = [
        d
        for f in range(1, math.isqrt(n) + 1)
        if n % f == 0
        for d in (f, n // f)
        if CHUNK_MIN <= d * unit <= CHUNK_MAX and n // d >= 2
    ]
    return min(found, key=lambda d: _off_target(d * unit), default=None)


def _off_target(row: int) -> float:
    """How far a row of ``row`` elements is from ``CHUNK_TARGET``, as a ratio (1: on it)."""
    return max(row, CHUNK_TARGET) / min(row, CHUNK_TARGET)
