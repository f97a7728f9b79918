"""Blocked: ``DequantizeLinear(x, s', zp', axis=r, block_size=dim r)`` (opset 21+), a whole-axis block
on one broadcast axis r, the scale expanded along the other broadcast axes; adjacent axes optionally
merged by Reshape first. Picks the cheapest such layout (ORT's fast path: r not the last axis)."""

from __future__ import annotations

from .base import NodeInfo
from .dql import DQLStrategy, Layout, layout_cost
from .shapes import groups

__all__ = ["Blocked"]


class Blocked(DQLStrategy):
    name = "dql-blocked"
    portable = False  # other runtimes read blocked DQL only partly (docs/ort-facts.md)

    def layouts(self, info: NodeInfo) -> list[Layout]:
        """Every whole-axis-block layout of the node whose block size is known."""
        out = []
        small = info.in_type.bits < 8  # ORT has no Reshape or Expand for 4-bit types
        if small and info.has_zp and not info.zp_const:
            return []
        for merge in (False,) if small else (False, True):
            gs = groups(info.rank or 0, info.axes, merge=merge)
            view = tuple(g for _, g in gs)
            quant = tuple(q for q, _ in gs)
            dims = Layout(view, quant, "blocked").view_dims(info)
            for r, q in enumerate(quant):
                if q or not isinstance(dims[r], int) or dims[r] < 1:
                    continue
                expand = tuple(i for i, qq in enumerate(quant) if not qq and i != r)
                if expand and info.has_zp and small:
                    continue  # Expand has no 4-bit types
                out.append(Layout(view, quant, "blocked", r, expand))
        return list(dict.fromkeys(out))

    def refuse(self, info: NodeInfo) -> str | None:
        if info.opset < 21:
            return "blocked DequantizeLinear needs opset 21"
        if not info.axes:
            return "the node has no quantization axes"
        if info.rank is None:
            return "the input's rank is unknown"
        return None if self.layouts(info) else "no broadcast axis of known size to block along"

    def layout(self, info: NodeInfo) -> Layout:
        """The cheapest blocked layout."""
        return min(self.layouts(info), key=lambda lay: layout_cost(info, lay))
