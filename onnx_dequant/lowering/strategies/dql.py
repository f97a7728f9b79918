"""The DequantizeLinear forms' shared part: a ``Layout`` (how the input is viewed, which DQL mode),
its cost in bytes moved, its emission (Reshape -> DequantizeLinear -> Cast -> Reshape), and
``DQLStrategy``, the base of the strategies that differ only in the layout they choose."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import DQL_TYPE, PROPAGATING_OPS, UNKNOWN_DIM, Emitter, NodeInfo, Strategy, dql_reason
from .shapes import merged_dims, merged_shape_tensor, shape_tensor

__all__ = [
    "Layout",
    "DQLStrategy",
    "layout_cost",
    "emit_layout",
    "ort_bug_reason",
    "SLOW_LAST_AXIS",
    "SLOW_BLOCKED_LAST",
]

SLOW_LAST_AXIS = 6.0
"""ORT's per-axis DequantizeLinear on the last axis, in units of the output's bytes (measured 5-10x)."""
SLOW_BLOCKED_LAST = 3.6
"""ORT's blocked DequantizeLinear reducing the last axis (measured 4.6x a casting copy)."""
L1_BYTES = 16 << 10
"""Scale/zero-point rows up to this size stay in the L1 cache while a block is processed."""


@dataclass(frozen=True)
class Layout:
    """How a DequantizeLinear computes the node.

    ``view``: groups of the input's axes (each a tuple, in order) that the input is reshaped into;
    ``quant[i]``: whether group i holds quantization axes. ``mode``: "tensor", "axis" (``axis`` is the
    view axis the 1-D scale runs along) or "blocked" (``axis`` is the broadcast view axis reduced with a
    whole-axis block; ``expand`` are the broadcast view axes the scale is expanded along).
    """

    view: tuple[tuple[int, ...], ...]
    quant: tuple[bool, ...]
    mode: str
    axis: int | None = None
    expand: tuple[int, ...] = field(default=())

    @property
    def reshapes(self) -> bool:
        return any(len(g) != 1 for g in self.view)

    def view_dims(self, info: NodeInfo) -> list:
        return merged_dims(info.shape or (), self.view)

    def scale_elements(self, info: NodeInfo) -> int:
        dims = self.view_dims(info)
        n = 1
        for i, d in enumerate(dims):
            if self.quant[i] or i in self.expand:
                n *= d if isinstance(d, int) else UNKNOWN_DIM
        return n


def ort_bug_reason(info: NodeInfo, scale_elements: int, reshape_after: bool = False) -> str | None:
    """ORT 1.32 fails to load an int8 per-tensor DQL with a zero point followed by Reshape & co. at opset
    21+ (QDQ propagation, docs/ort-facts.md): the reason to avoid a form, or None."""
    if info.opset < 21 or info.in_type.name != "i8" or not info.has_zp:
        return None
    if scale_elements != 1:
        return None
    hit = sorted((set(info.consumers) | ({"Reshape"} if reshape_after else set())) & PROPAGATING_OPS)
    if hit:
        return (
            f"ORT 1.32 cannot load an int8 per-tensor DequantizeLinear with a zero point before {hit[0]} at opset 21+"
        )
    return None


def layout_cost(info: NodeInfo, layout: Layout) -> float:
    """Bytes moved, with ORT's measured slow paths charged as extra bytes."""
    dql_t = DQL_TYPE
    n = info.size()
    ib, db, ob = max(info.in_type.bits, 8) / 8, dql_t.bits / 8, info.out_type.bits / 8
    cost = n * (ib + db)
    if dql_t is not info.out_type:
        cost += n * (db + ob)
    if layout.reshapes and info.graph_output:
        cost += 2 * n * ob  # a Reshape whose output is a graph output copies
    last = len(layout.view) - 1
    if info.target == "ort" and layout.axis == last and len(layout.view) > 1:
        if layout.mode == "axis":
            cost += SLOW_LAST_AXIS * n * db
        elif layout.mode == "blocked":
            cost += SLOW_BLOCKED_LAST * n * db
    se = layout.scale_elements(info)
    per = dql_t.bits / 8 + (max(info.in_type.bits, 8) / 8 if info.has_zp else 0)
    if layout.mode == "blocked" and layout.axis is not None:
        # the kernel walks the scale rows after the reduced axis once per block: when they do not stay
        # in L1, every output element reads its scale (and zero point) again
        dims = layout.view_dims(info)
        inner = 1
        for i in range(layout.axis + 1, len(dims)):
            if layout.quant[i] or i in layout.expand:
                inner *= dims[i] if isinstance(dims[i], int) else UNKNOWN_DIM
        if inner * per > L1_BYTES:
            cost += n * per
    cost += se * per * (1 if info.scale_const else 2) if layout.expand else se * per
    return cost


def _reshape(em: Emitter, tensor: str, shape_name: str, hint: str) -> str:
    return em.node("Reshape", [tensor, shape_name], hint=hint)


def _reshape_param(em: Emitter, info: NodeInfo, tensor: str, sshape: list, gs: list, hint: str) -> str:
    """``tensor`` (shaped ``sshape``) reshaped to the groups ``gs``: a new constant when it is one."""
    if all(isinstance(d, int) for d in sshape):
        dims = []
        for g in gs:
            n = 1
            for a in [] if isinstance(g, int) else g:
                n *= sshape[a]
            dims.append(g if isinstance(g, int) else n)
        const = em.redim(tensor, dims, hint)
        if const is not None:
            return const
    return _reshape(em, tensor, merged_shape_tensor(em, tensor, sshape, gs, info.opset), hint)


def _param(info: NodeInfo, em: Emitter, layout: Layout, tensor: str, hint: str) -> str:
    """The scale or zero point, reshaped (and expanded) for the layout."""
    if layout.mode == "tensor":
        return tensor
    shape = info.shape or ()
    sshape = [shape[a] for a in info.axes]
    if layout.mode == "axis":
        if len(info.axes) == 1:
            return tensor
        return _reshape_param(em, info, tensor, sshape, [tuple(range(len(info.axes)))], hint)
    # blocked: the scale in the view's rank, 1 on broadcast axes, then expanded
    pos = {a: i for i, a in enumerate(info.axes)}
    gs: list = []
    for q, g in zip(layout.quant, layout.view):
        gs.append(tuple(pos[a] for a in g) if q else 1)
    out = _reshape_param(em, info, tensor, sshape, gs, hint)
    if layout.expand:
        target = []
        for i, g in enumerate(layout.view):
            target.append(g if i in layout.expand else 1)
        out = em.node("Expand", [out, merged_shape_tensor(em, info.x, shape, target, info.opset)], hint=hint)
    return out


def emit_layout(info: NodeInfo, em: Emitter, layout: Layout) -> None:
    """Nodes computing the node's output through one DequantizeLinear in ``layout``."""
    dql_t = DQL_TYPE
    shape = info.shape or ()
    x = info.x
    if layout.reshapes:
        x = _reshape(em, x, merged_shape_tensor(em, x, shape, layout.view, info.opset), "x_view")
    scale = info.scale
    if info.out_type is not dql_t:
        scale = em.node("Cast", [scale], hint="scale", to=dql_t.onnx)
    scale = _param(info, em, layout, scale, "scale")
    inputs = [x, scale]
    if info.has_zp:
        inputs.append(_param(info, em, layout, info.zero_point, "zero_point"))  # type: ignore[arg-type]
    elif info.in_type.name == "i8" and info.opset < 21 and layout.mode in ("tensor", "axis"):
        # ORT 1.32 below opset 21: an int8 DQL with a one-element scale and no zero point, followed by
        # Reshape/Transpose/..., gives wrong results (QDQ propagation inserts a uint8 QuantizeLinear);
        # an explicit zero zero point avoids it at no cost
        n = 1 if layout.mode == "tensor" else layout.scale_elements(info)
        if layout.mode == "tensor" or (info.static and n == 1):
            inputs.append(em.const(np.zeros(() if layout.mode == "tensor" else (1,), np.int8), "zero_point"))
    attrs: dict = {}
    if layout.mode in ("axis", "blocked"):
        attrs["axis"] = layout.axis
    if layout.mode == "blocked":
        attrs["block_size"] = layout.view_dims(info)[layout.axis]
    steps_left = (info.out_type is not dql_t) + layout.reshapes
    y = em.node("DequantizeLinear", inputs, info.output if steps_left == 0 else None, hint="dql", **attrs)
    if info.out_type is not dql_t:
        steps_left -= 1
        y = em.node("Cast", [y], info.output if steps_left == 0 else None, hint="cast", to=info.out_type.onnx)
    if layout.reshapes:
        em.node("Reshape", [y, shape_tensor(em, info.x, shape, info.opset)], info.output, hint="y")


class DQLStrategy(Strategy):
    """A strategy that is one DequantizeLinear in some ``Layout``: subclasses say why they do not apply
    (``refuse``) and which layout they use (``layout``); the checks every DQL needs, the cost and the
    emission are shared."""

    def refuse(self, info: NodeInfo) -> str | None:
        """Why this layout family does not fit the node (before the checks every DQL needs), or None."""
        raise NotImplementedError

    def layout(self, info: NodeInfo) -> Layout:
        raise NotImplementedError

    def check(self, info: NodeInfo) -> str | None:
        reason = self.refuse(info) or dql_reason(info)
        if reason:
            return reason
        lay = self.layout(info)
        return ort_bug_reason(info, lay.scale_elements(info), reshape_after=lay.reshapes)

    def cost(self, info: NodeInfo) -> float:
        return layout_cost(info, self.layout(info))

    def emit(self, info: NodeInfo, em: Emitter) -> None:
        emit_layout(info, em, self.layout(info))
