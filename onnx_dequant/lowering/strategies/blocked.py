"""Blocked: ``DequantizeLinear(x, s', zp', axis=r, block_size=dim r)`` (opset 21+), a whole-axis block
on one broadcast axis r, the scale expanded along the other broadcast axes; adjacent axes optionally
merged by Reshape first. Picks the cheapest such layout (ORT's fast path: r not the last axis)."""

from __future__ import annotations

from ..facts import NodeInfo
from .base import Refusal
from .dql import DQLStrategy, Layout, layout_cost
from .shapes import groups

__all__ = ["Blocked"]


class Blocked(DQLStrategy):
    name = "dql-blocked"
    portable = False  # other runtimes read blocked DQL only partly (docs/ort-facts.md)

    def layouts(self, info: NodeInfo) -> list[Layout]:
        """Every whole-axis-block layout of the node whose block size is known."""
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
                if q or not isinstance(dims[r], int) or dims[r] < 1:
                    continue
                expand = tuple(i for i, qq in enumerate(quant) if not qq and i != r)
                if expand and info.has_zp and four_bit:
                    continue  # Expand has no 4-bit types
                out.append(Layout(view, quant, "blocked", r, expand))
        return list(dict.fromkeys(out))

    def layout(self, info: NodeInfo) -> Layout | Refusal:
        """The cheapest blocked layout."""
        if info.opset < 21:
            return Refusal("blocked DequantizeLinear needs opset 21")
        if not info.axes:
            return Refusal("the node has no quantization axes")
        if info.rank is None:
            return Refusal("the input's rank is unknown")
        candidates = self.layouts(info)
        if not candidates:
            return Refusal("no broadcast axis of known size to block along")
        return min(candidates, key=lambda lay: layout_cost(info, lay))
