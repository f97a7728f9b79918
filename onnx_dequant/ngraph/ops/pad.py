"""Pad: v0 (``padding_below`` / ``padding_above`` attributes, the pad value as input 1) and v1 (pads as
Constant inputs 1 and 2, the value as optional input 3), every ``pad_mode``.

CONSTANT, EDGE and REFLECT are ONNX Pad's constant, edge and reflect. Negative padding crops (a Slice
first), as nGraph. SYMMETRIC has no ONNX mode: each axis becomes a Concat of reversed border slices and
the data. Below, it repeats the edge (``b a | a b c d``); above, nGraph 0.26's kernel reads
``x[pa], ..., x[1]`` for ``pa`` elements (``a b c d | b`` for one, not ``d``): we follow nGraph
(docs/ngraph.md). REFLECT and SYMMETRIC pads wider than the data (nGraph reflects again, or reads out of
bounds) are refused, as is cropping in those modes.
"""

from __future__ import annotations

from typing import Any

from ...contract import Dim, TensorType
from ..context import MAX_DIM, OpContext, shape_str
from . import register

_MODES = {0: "constant", 1: "edge", 2: "reflect", 3: "symmetric"}


def _mode(ctx: OpContext) -> str:
    v: Any = ctx.js.get("pad_mode", 0)
    if v is None:
        v = 0
    mode = _MODES.get(v) if isinstance(v, int) and not isinstance(v, bool) else None
    if isinstance(v, str) and v.strip().lower() in _MODES.values():
        mode = v.strip().lower()
    if mode is None:
        raise ctx.error(f"'pad_mode' must be CONSTANT, EDGE, REFLECT or SYMMETRIC (0-3), got {v!r:.40}")
    return mode


def _reverse(ctx: OpContext, x: str, axis: int) -> str:
    big = -(1 << 62)
    return ctx.emit("Slice", [x, ctx.int64s([-1]), ctx.int64s([big]), ctx.int64s([axis]), ctx.int64s([-1])])


def _slice(ctx: OpContext, x: str, axis: int, start: int, end: int) -> str:
    return ctx.emit("Slice", [x, ctx.int64s([start]), ctx.int64s([end]), ctx.int64s([axis])])


@register("Pad", versions=(0, 1))
def pad(ctx: OpContext) -> list[TensorType]:
    if ctx.op.version >= 1:
        ctx.expect_inputs(3, 4)
        below = ctx.constant_ints(1, "pads_begin", lo=-MAX_DIM)
        above = ctx.constant_ints(2, "pads_end", lo=-MAX_DIM)
        has_value = len(ctx.inputs) == 4
    else:
        ctx.expect_inputs(2)
        below = ctx.attr_ints("padding_below", lo=-MAX_DIM)
        above = ctx.attr_ints("padding_above", lo=-MAX_DIM)
        if any(ctx.attr_ints("padding_interior", [])):
            raise ctx.error("Legacy padding_interior field must be zero everywhere.")
        has_value = True
    return pad_with(ctx, below, above, has_value)


def pad_with(ctx: OpContext, below: list[int], above: list[int], has_value: bool) -> list[TensorType]:
    """Input 0 padded by ``below`` / ``above`` in the op's ``pad_mode`` (the value: the last input)."""
    rank = ctx.rank(0)
    t = ctx.types[0]
    dt = t.elem_type
    if has_value:
        tv = ctx.types[-1]
        if tv.elem_type is not dt:
            raise ctx.error(
                f"Argument element types do not match (arg0 element type: {dt}, arg1 element type: {tv.elem_type})"
            )
        if tv.shape is not None and tv.shape != ():
            raise ctx.error(f"Argument for padding value is not a scalar (shape: {shape_str(tv.shape)})")
    if len(below) != len(above):
        raise ctx.error(f"Ranks for padding below ({below}) and padding above ({above}) do not match.")
    if len(below) != rank:
        raise ctx.error(
            "Rank for padding below and padding above do not match the rank of the data argument "
            f"(padding below: {below}, padding above: {above}, data shape: {shape_str(t.shape)})"
        )
    mode = _mode(ctx)
    out: list[Dim] = []
    for i, (lo, hi, d) in enumerate(zip(below, above, t.shape)):  # type: ignore[arg-type]
        if not isinstance(d, int):
            out.append(d if lo == hi == 0 else None)
            if mode != "constant" and (lo or hi):
                raise ctx.error(f"{mode.upper()} padding needs the size of padded axis {i}, which is unknown")
            continue
        if d + lo + hi < 0:
            raise ctx.error(f"Inferred result dimension at axis {i} is negative after padding")
        if mode == "edge" and (lo > 0 or hi > 0) and d < 1:
            raise ctx.error("EDGE padding mode requires an input of dimension of at least 1 at each spatial axis.")
        if mode == "reflect" and (lo > 0 or hi > 0) and d < 2:
            raise ctx.error("REFLECT padding mode requires an input of dimension of at least 2 at each spatial axis.")
        if mode in ("reflect", "symmetric") and (
            lo < 0 or hi < 0 or max(lo, hi + (mode == "symmetric")) > d - (mode == "reflect")
        ):  # noqa: E501
            raise ctx.error(
                f"{mode.upper()} padding of axis {i} by ({lo}, {hi}) for a dimension of {d}: only non-negative "
                "padding up to the dimension is supported (nGraph would reflect again)"
            )
        out.append(d + lo + hi)
    x = ctx.inputs[0]
    if all(p == 0 for p in below + above):
        ctx.require_onnx(dt, "Identity")
        ctx.emit("Identity", [x], ctx.out())
        return [TensorType(dt, tuple(out))]
    crops = [(i, max(-lo, 0), max(-hi, 0)) for i, (lo, hi) in enumerate(zip(below, above)) if lo < 0 or hi < 0]
    if crops:  # negative padding: crop first
        ctx.require_onnx(dt, "Slice")
        big = 1 << 62
        x = ctx.emit(
            "Slice",
            [
                x,
                ctx.int64s([c[1] for c in crops]),
                ctx.int64s([-c[2] if c[2] else big for c in crops]),
                ctx.int64s([c[0] for c in crops]),
            ],
        )
    pos_below = [max(p, 0) for p in below]
    pos_above = [max(p, 0) for p in above]
    if mode == "symmetric":
        ctx.require_onnx(dt, "Slice", "Concat")
        axes = [i for i in range(rank) if pos_below[i] or pos_above[i]]
        for n, i in enumerate(axes):
            d = t.shape[i]  # type: ignore[index]
            parts = []
            if pos_below[i]:
                parts.append(_reverse(ctx, _slice(ctx, x, i, 0, pos_below[i]), i))
            parts.append(x)
            if pos_above[i]:  # nGraph 0.26's formula: x[pa], x[pa-1], ..., x[1] (not the last pa, reversed)
                parts.append(_reverse(ctx, _slice(ctx, x, i, 1, pos_above[i] + 1), i))
            x = ctx.emit("Concat", parts, ctx.out() if n == len(axes) - 1 else None, axis=i)
        return [TensorType(dt, tuple(out))]
    ctx.require_onnx(dt, "Pad")
    inputs = [x, ctx.int64s(pos_below + pos_above)]
    if mode == "constant" and has_value:
        inputs.append(ctx.inputs[-1])
    ctx.emit("Pad", inputs, ctx.out(), mode=mode)
    return [TensorType(dt, tuple(out))]
