"""Blocked: ``DequantizeLinear(x, s', zp', axis=r, block_size=dim r)`` (opset 21+), a whole-axis block
on one broadcast axis r (of a size known only at run time: ``dql.OPEN_BLOCK``, the scale sliced to that
size or 1 along r), the scale expanded along the other broadcast axes; adjacent axes optionally
merged by Reshape first; or, for a scale as large as the input, ``block_size=1`` along axis 0 of the
input as it is or of a 2-D view (a 1-D input reshaped to rows, its scale and zero point with it). Picks
the cheapest such layout (ORT's fast path: r not the last axis)."""

from __future__ import annotations

import dataclasses

from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal, empty_refusal
from .costs import nodes_cost, reshaped_output_cost
from .dql import DQLStrategy, Layout, emit_layout, layout_cost, reshape
from .shapes import groups

__all__ = ["Blocked", "SPLIT_ROW_MAX"]

SPLIT_ROW_MAX = 4096
"""The longest row a 1-D input with a scale as large as itself is cut into (the largest divisor up to it)."""


class Blocked(DQLStrategy):
    name = "dql-blocked"
    portable = False  # other runtimes read blocked DQL only partly (docs/ort-facts.md)

    def layouts(self, info: NodeInfo) -> list[Layout]:
        """Every whole-axis-block layout of the node (over a 4-bit input, those whose block size is known)."""
        out = []
        four_bit = info.in_type.bits < 8  # ORT has no Reshape or Expand for 4-bit types
        if four_bit and info.has_zp and not info.zp_const:
            return []
        for merge in (False,) if four_bit else (False, True):
            runs = groups(info.rank or 0, info.axes, merge=merge)
            view = tuple(g for _, g in runs)
            quant = tuple(q for q, _ in runs)
            dims = Layout(view, quant, "blocked").view_dims(info)
            for r, q in enumerate(quant):
                if q or (dims[r] < 1 if isinstance(dims[r], int) else four_bit):  # (4-bit: no Slice)
                    continue  # a size known only at run time is one open block (``dql.OPEN_BLOCK``)
                expand = tuple(i for i, qq in enumerate(quant) if not qq and i != r)
                if expand and info.has_zp and four_bit:
                    continue  # Expand has no 4-bit types
                if four_bit and any(not isinstance(dims[i], int) for i in expand):
                    continue  # the Expand's target would read the 4-bit input's Shape (no ORT kernel)
                out.append(Layout(view, quant, "blocked", r, expand))
        rank = info.rank or 0
        if len(info.axes) == rank >= 2:
            # a scale as large as the input: blocks of one element along axis 0, where ORT's kernel
            # streams the scale (its per-axis form walks one-element rows); in the input's own shape (no
            # Reshape, which copies a graph output) or, for another kernel walk, a 2-D view
            out.append(Layout(tuple((a,) for a in range(rank)), (True,) * rank, "blocked", 0))
            if rank == 2 or not four_bit:
                out.append(Layout(((0,), tuple(range(1, rank))), (True, True), "blocked", 0))
        n = info.known_shape
        if rank == 1 and info.axes == (0,) and n is not None and not four_bit:
            # the same for a 1-D input, cut into rows (Reshape) by the largest divisor of its length
            k = next((d for d in range(min(SPLIT_ROW_MAX, n[0] // 2), 1, -1) if n[0] % d == 0), 0)
            if k:
                out.append(Layout(((0,),), (True,), "blocked", 0, split=k))
        return list(dict.fromkeys(out))

    def layout(self, info: NodeInfo) -> Layout | Refusal:
        """The cheapest blocked layout."""
        if info.opset < 21:
            return Refusal("blocked DequantizeLinear needs opset 21")
        if not info.axes:
            return Refusal("the node has no quantization axes")
        if info.rank is None:
            return Refusal("the input's rank is unknown")
        empty = empty_refusal(info)
        if empty:
            return empty
        candidates = self.layouts(info)
        if not candidates:
            if info.in_type.bits < 8 and info.has_zp and not info.zp_const:
                return Refusal("a 4-bit zero point computed at run time (ORT has no Reshape or Expand for 4-bit types)")
            if info.in_type.bits < 8 and len(info.axes) < info.rank:
                return Refusal("no broadcast axis of known size to block along (ORT has no Slice for 4-bit types)")
            return Refusal("no broadcast axis to block along")
        return min(candidates, key=lambda lay: self.cost(info, lay))

    @staticmethod
    def _rows(info: NodeInfo, layout: Layout) -> tuple[NodeInfo, Layout]:
        """A split 1-D node as the 2-D node (rows of ``split``) its DequantizeLinear computes."""
        n = (info.known_shape or (0,))[0]
        rows = dataclasses.replace(info, shape=(n // layout.split, layout.split), axes=(0, 1))
        return rows, Layout(((0,), (1,)), (True, True), "blocked", 0)

    def cost(self, info: NodeInfo, choice: Layout) -> float:
        if not choice.split:
            return layout_cost(info, choice)
        rows, layout = self._rows(info, choice)
        return layout_cost(rows, layout) + reshaped_output_cost(info) + nodes_cost(2)  # a Reshape to rows and back

    def emit(self, info: NodeInfo, choice: Layout, em: Emitter) -> None:
        if not choice.split:
            emit_layout(info, em, choice)
            return
        rows, layout = self._rows(info, choice)
        # the scale and zero point are reshaped to rows by the layout itself (they are shaped as the input)
        x = em.redim(info.x, list(rows.shape), "x_rows") or reshape(  # type: ignore[arg-type]
            em,
            info,
            info.x,
            em.i64(list(rows.shape), "rows"),
            hint="x_rows",  # type: ignore[arg-type]
        )
        rows = dataclasses.replace(rows, x=x, output=em.fresh("y_rows"))
        emit_layout(rows, em, layout)
        reshape(em, info, rows.output, em.i64([info.size()]), info.output, hint="y")
