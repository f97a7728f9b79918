"""Tiled Cast/Sub/Mul: a scale that runs along a few trailing elements (a per-channel scale on a last axis
of 3, per-pixel scales over 2 channels) makes ONNX Runtime's broadcasting Sub and Mul run their inner loop
once per few elements. The input is reshaped to join ``k`` runs into one row, the scale (and zero point)
tiled ``k`` times to match, and the result reshaped back: ``Reshape -> Cast/Sub/Mul -> Reshape``, the same
operations on the same values as Cast/Sub/Mul (the same bits)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ... import dtypes
from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal, empty_refusal
from .cast_sub_mul import CastSubMul
from .costs import kernel_cost, nodes_cost, reshaped_output_cost
from .dql import reshape, reshape_back
from .shapes import groups, merged_dims, merged_shape_tensor

__all__ = [
    "Tiled",
    "Tiling",
    "RUN_WIDE",
    "ROW_TARGET",
    "joined_rows",
    "joined_shape",
    "joined_axes",
    "rows_target",
    "trailing_run",
    "quantized_lead",
    "tiled_param",
    "tiled_param_cost",
]

RUN_WIDE = 64
"""A scale run at least this long is left as it is (the per-run overhead is then a few percent)."""
ROW_TARGET = 1024
"""The longest row the tiling makes (the tiled scale is ``k`` times the run's scale values)."""


@dataclasses.dataclass(frozen=True)
class Tiling:
    """The reshaped input's dims (``joined_rows``), the runs ``k`` joined per row, and Cast/Sub/Mul's work type."""

    dims: tuple[int | None, ...]
    k: int
    work: dtypes.DType


def trailing_run(info: NodeInfo) -> int:
    """The elements of the scale's trailing run (its last axes, all quantization axes)."""
    shape = info.shape or ()
    return math.prod(shape[a] for a in groups(len(shape), info.axes)[-1][1])  # type: ignore[misc]


def quantized_lead(info: NodeInfo) -> list[int]:
    """The sizes of the runs of quantization axes before the joined rows (the tiled scale's leading dims)."""
    shape = info.shape or ()
    return [math.prod(shape[a] for a in g) for q, g in groups(len(shape), info.axes)[:-2] if q]  # type: ignore[misc]


def joined_rows(info: NodeInfo) -> tuple[tuple[int | None, ...], int] | Refusal:
    """The reshaped input's dims and the runs ``k`` each of its rows joins, for a scale whose trailing run
    is shorter than ``RUN_WIDE`` under broadcast axes; or why the node has no such tiling. The rows joined
    may hold dims known only at run time (a batch): their count is then None, ``k`` a divisor of their
    known dims' product."""
    if info.shape is None or not info.axes:
        return Refusal("needs quantization axes and the input's rank")
    refusal = empty_refusal(info)
    if refusal:
        return refusal
    if info.in_type.bits < 8:
        return Refusal("ORT has no Reshape for 4-bit types")
    shape = info.shape
    if info.out_type.name == "bf16" and not info.scale_const:
        return Refusal("ORT has no bf16 Tile (for a scale computed at run time)")
    runs = groups(len(shape), info.axes)
    if len(runs) < 2 or not runs[-1][0]:
        return Refusal("the scale does not run along the last axes under broadcast ones")
    joined = runs[-2][1]
    unknown = [g for _, g in runs if any(not isinstance(shape[a], int) for a in g)]
    if any(q for q, g in runs if g in unknown):
        return Refusal("needs the quantization axes' sizes")
    if joined in unknown and len(unknown) > 1:
        return Refusal("joins rows known only at run time after other such dims (a Reshape has one -1)")
    run = trailing_run(info)
    if run >= RUN_WIDE:
        return Refusal(f"the scale already runs {run} elements (from {RUN_WIDE} it is left as it is)")
    if unknown and info.opset < 14:
        return Refusal("a Reshape to dims known only at run time needs allowzero (opset 14)")
    open_rows = joined in unknown
    outer = math.prod(d for d in (shape[a] for a in joined) if isinstance(d, int))
    k = max((d for d in range(2, ROW_TARGET // run + 1) if outer % d == 0), default=1)
    if k == 1:
        known = "known " if open_rows else ""
        return Refusal(f"the {outer} {known}rows before the scale's run have no divisor to join")
    lead = tuple(merged_dims(shape, [g for _, g in runs[:-2]]))
    return lead + (None if open_rows else outer // k, k * run), k  # type: ignore[return-value]


def joined_shape(info: NodeInfo, dims: tuple[int | None, ...], k: int) -> tuple[int, ...]:
    """``dims`` as the cost model counts them: a dim known only at run time as ``NodeInfo.size`` counts the
    dims it joins (the joined rows' over ``k``)."""
    runs = groups(info.rank or 0, info.axes)
    sizes = [info.size(g) for _, g in runs[:-2]] + [info.size(runs[-2][1]) // k, 0]
    return tuple(sizes[i] if d is None else d for i, d in enumerate(dims))


def rows_target(em: Emitter, info: NodeInfo, dims: tuple[int | None, ...]) -> str:
    """The Reshape target of ``dims``: -1 for joined rows known only at run time, a leading run's size known
    only then read from the input's Shape."""
    runs = groups(info.rank or 0, info.axes)
    parts: list = [g for _, g in runs[:-2]] + [-1 if dims[-2] is None else dims[-2], dims[-1]]
    return merged_shape_tensor(em, info.x, info.shape or (), parts, info.opset)


def joined_axes(info: NodeInfo, dims: tuple[int | None, ...]) -> tuple[int, ...]:
    """The quantization axes of the reshaped input ``dims``: its merged leading runs that are, and the row."""
    runs = groups(info.rank or 0, info.axes)[:-2]
    return tuple(i for i, (q, _) in enumerate(runs) if q) + (len(dims) - 1,)


def tiled_param(info: NodeInfo, em: Emitter, name: str, const: bool, k: int, lead: list[int]) -> str:
    """The scale or zero point ``name`` shaped ``(*lead, run)`` (``run``: the scale's trailing run), the run
    tiled ``k`` times: a new constant when it is one, else Reshape -> Tile."""
    run = trailing_run(info)
    value = info.read(name) if const and info.read is not None else None
    if value is not None and value.size == math.prod(lead) * run:
        tiled = np.tile(value.reshape(*lead, run), (1,) * len(lead) + (k,))
        return em.const(tiled, value.dtype, hint="tiled")
    placed = reshape(em, info, name, em.i64([*lead, run]), hint="placed")
    return em.node("Tile", [placed, em.i64([1] * len(lead) + [k], "repeats")], hint="tiled")


def tiled_param_cost(info: NodeInfo, k: int) -> float:
    """What ``tiled_param`` costs when the model runs: the scale and zero point that are not constants are
    tiled then. ORT 1.32's Tile copies each run (the parameter's trailing run, one per value of the
    quantization axes before it, ``k`` times) on its own, at a cost per run copied (``tile_f32_row``, about
    2.5 ns): ``(2000,3)`` tiled 50 times along its last axis 0.3 ms, 5x a DequantizeLinear of
    ``(2000,50,3)`` int8 (docs/ort-facts.md)."""
    rows, run = math.prod(quantized_lead(info)) * k, trailing_run(info)
    params = [(info.out_type.bits / 8, info.scale_const)]
    if info.has_zp:
        params.append((max(info.in_type.bits, 8) / 8, info.zp_const))
    return sum(
        rows * (run * kernel_cost("tile_f32") * nbytes / 4 + kernel_cost("tile_f32_row"))
        for nbytes, const in params
        if not const
    )


class Tiled(CastSubMul):
    name = "cast-sub-mul-tiled"

    def check(self, info: NodeInfo) -> Tiling | Refusal:  # type: ignore[override]
        work = super().check(info)
        if isinstance(work, Refusal):
            return work
        rows = joined_rows(info)
        return rows if isinstance(rows, Refusal) else Tiling(rows[0], rows[1], work)

    def cost(self, info: NodeInfo, choice: Tiling) -> float:  # type: ignore[override]
        # the reshaped input, its scale (and zero point) k times as large, and the Reshape back
        dims = joined_shape(info, choice.dims, choice.k)
        joined = dataclasses.replace(info, shape=dims, axes=joined_axes(info, dims))
        outside = reshaped_output_cost(info) + nodes_cost(2) + tiled_param_cost(info, choice.k)  # 2: to rows and back
        return super().cost(joined, choice.work) + outside

    def emit(self, info: NodeInfo, choice: Tiling, em: Emitter) -> None:  # type: ignore[override]
        rank = len(choice.dims)
        x = reshape(em, info, info.x, rows_target(em, info, choice.dims), hint="rows")
        shape = info.shape or ()
        # broadcast against the reshaped input: 1 on its broadcast dims and on the joined rows' dim
        lead = [math.prod(shape[a] for a in g) if q else 1 for q, g in groups(len(shape), info.axes)[:-2]] + [1]
        zp = None
        if info.has_zp and info.zero_point is not None:
            zp = tiled_param(info, em, info.zero_point, info.zp_const, choice.k, lead)  # type: ignore[arg-type]
        joined = dataclasses.replace(
            info,
            x=x,
            scale=tiled_param(info, em, info.scale, info.scale_const, choice.k, lead),  # type: ignore[arg-type]
            zero_point=zp,
            output=em.fresh("y_rows"),
            axes=tuple(range(rank)),  # the tiled scale already has the reshaped input's rank
            shape=choice.dims,
            zp_zero=False,
        )
        super().emit(joined, choice.work, em)
        reshape_back(em, info, joined.output, flatten=False)
