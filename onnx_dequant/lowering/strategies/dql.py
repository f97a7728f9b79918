"""The DequantizeLinear forms' shared part: a ``Layout`` (how the input is viewed, which DQL mode),
its cost in bytes moved, its emission (Reshape -> DequantizeLinear -> [Flatten] -> Cast -> Reshape), and
``DQLStrategy``, the base of the strategies that differ only in the layout they choose."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ... import dtypes
from ..emitter import Emitter
from ..facts import NodeInfo
from ..walk import UNSEEN
from .base import DQL_TYPE, PROPAGATING_OPS, Refusal, Strategy, dql_refusal
from .costs import kernel_cost, narrowing_cast_cost, nodes_cost, reshaped_output_cost, scale_cast_cost
from .shapes import merged_dims, merged_shape_tensor, shape_tensor

__all__ = [
    "Layout",
    "DQLStrategy",
    "layout_cost",
    "emit_layout",
    "ort_pass_hazard",
    "ort_pass_barrier",
    "qdq_propagates",
    "reshape",
    "zero_refusal",
    "OPEN_BLOCK",
    "reshape_back",
    "vector_elements",
    "VECTOR_BYTES",
]


@dataclass(frozen=True)
class Layout:
    """How a DequantizeLinear computes the node.

    ``view``: groups of the input's axes (each a tuple, in order) that the input is reshaped into;
    ``quant[i]``: whether group i holds quantization axes. ``mode``: "tensor", "axis" (``axis`` is the
    view axis the 1-D scale runs along) or "blocked" (``axis`` is the broadcast view axis reduced with a
    whole-axis block; ``expand`` are the broadcast view axes the scale is expanded along). ``barrier``:
    why a Flatten then a Reshape back follow the DequantizeLinear ("": none; ``ort_pass_hazard``).
    """

    view: tuple[tuple[int, ...], ...]
    quant: tuple[bool, ...]
    mode: str
    axis: int | None = None
    expand: tuple[int, ...] = field(default=())
    split: int = 0  # a 1-D input viewed as rows of ``split`` elements (``Blocked``), else 0
    barrier: str = ""

    @property
    def reshapes(self) -> bool:
        return any(len(g) != 1 for g in self.view)

    def reshapes_back(self, info: NodeInfo) -> bool:
        """Whether the output is reshaped back to the input's shape by the form (not where
        ``info.keep_view`` leaves that to the caller)."""
        return self.reshapes and not info.keep_view

    def view_dims(self, info: NodeInfo) -> list:
        return merged_dims(info.shape or (), self.view)

    def view_sizes(self, info: NodeInfo) -> list[int]:
        """The view's dims as the cost model counts them (``NodeInfo.size`` of each group)."""
        return [info.size(g) for g in self.view]

    def scale_elements(self, info: NodeInfo) -> int:
        n = 1
        for i, d in enumerate(self.view_sizes(info)):
            if self.quant[i] or i in self.expand:
                n *= d
        return n


def qdq_propagates(info: NodeInfo, scale_elements: int) -> bool:
    """Whether ORT 1.32's QDQ propagation moves a DequantizeLinear computing ``info`` with a scale of
    ``scale_elements`` past a reader in ``PROPAGATING_OPS``: only an f32 one (not one followed by its Cast)
    whose scale is one element and whose scale and zero point ORT knows when it loads the model (not fed)."""
    return info.out_type is DQL_TYPE and scale_elements == 1 and not info.params_fed


def ort_pass_hazard(info: NodeInfo, layout: Layout) -> str | None:
    """How ORT 1.32's graph transformers would break ``layout``'s DequantizeLinear were its output read as
    it is, or None (docs/ort-facts.md). Its QDQ propagation moves a per-tensor DQL whose scale and zero
    point are constants past ``PROPAGATING_OPS`` by inserting a QuantizeLinear of the input's type before
    them, and its Transpose optimizer does the same past an int32 DQL with a zero point (per axis too)
    before a Transpose that names its perm. An int8 one with a zero point then fails to load at opset 21+
    (below, ``emit_layout`` gives one without a zero point an explicit zero); an int32 one fails to load
    (no int32 QuantizeLinear kernel, nor an int32 zero point for one) or, at opsets 13-20 without a zero
    point, clamps the values to uint8's range. ``info.consumers`` holds the readers behind ones ORT removes
    as no-ops, and marks (``walk.UNSEEN``) readers ORT may inline next to the DQL (a function's, an ``If``
    branch's), which count as such ops. Only a scale or zero point the model is fed at run time stops the
    propagation for sure (ORT folds any computed from constants); a DQL followed by its Cast to f16/bf16
    is never moved. ``DQLStrategy.check`` puts a Flatten/Reshape pair after such a DQL, which neither pass
    crosses."""
    if info.out_type is not DQL_TYPE:
        return None
    q = info.in_type.name
    readers = set(info.consumers)
    unseen = sorted(readers & UNSEEN)
    if q == "i32" and info.has_zp and ("Transpose" in readers or unseen):
        where = "Transpose" if "Transpose" in readers else f"a reader ORT may inline ({unseen[0]})"
        return f"ORT 1.32 cannot load an int32 DequantizeLinear with a zero point before {where}"
    if not qdq_propagates(info, layout.scale_elements(info)):
        return None
    hit = sorted((readers | ({"Reshape"} if layout.reshapes_back(info) else set())) & PROPAGATING_OPS)
    where = hit[0] if hit else (f"a reader ORT may inline ({unseen[0]})" if unseen else None)
    if where is None:
        return None
    if q == "i32" and info.opset < 21 and info.zero_point is None:
        return f"ORT 1.32 clamps an int32 per-tensor DequantizeLinear before {where} to [0, 255] * scale below opset 21"
    if q == "i32":
        return f"ORT 1.32 cannot load an int32 per-tensor DequantizeLinear before {where}"
    if q == "i8" and info.has_zp and info.opset >= 21:
        return f"ORT 1.32 cannot load an int8 per-tensor DequantizeLinear with a zero point before {where} at opset 21+"
    return None


def ort_pass_barrier(info: NodeInfo, layout: Layout) -> Layout | Refusal:
    """``layout``, with a Flatten/Reshape pair after its DequantizeLinear where ORT's passes would break it
    (``ort_pass_hazard``): ORT's QDQ propagation and Transpose optimizer do not move a DequantizeLinear past
    a Flatten, and the pair aliases its input. Refused instead below opset 14 over dims not known when
    lowering (a Reshape has no ``allowzero`` there: a 0 at run time would be copied from the Flatten's),
    and where the input, scale and zero point are constants: ORT folds a form without a DequantizeLinear
    when it loads the model (its constant folding leaves DequantizeLinear alone), so that form costs
    nothing per run, where the DequantizeLinear and its pair run every time (1.3-3.2x slower)."""
    hazard = ort_pass_hazard(info, layout)
    if hazard is None:
        return layout
    if info.opset < 14 and info.known_shape is None:
        return Refusal(f"{hazard} (a Flatten/Reshape pair after it needs known dims below opset 14)")
    if info.x_const and info.scale_const and (info.zero_point is None or info.zp_const):
        return Refusal(f"{hazard} (with a constant input the forms without one are folded when ORT loads the model)")
    return replace(layout, barrier=hazard)


L1_BYTES = 16 << 10
"""Scale/zero-point rows up to this size stay in the L1 cache while a block is processed."""


def _inner_param_bytes(info: NodeInfo, layout: Layout) -> float:
    """Bytes of the scale (and zero point) row after a blocked layout's reduced axis."""
    dims = layout.view_sizes(info)
    inner = 1
    for i in range((layout.axis or 0) + 1, len(dims)):
        if layout.quant[i] or i in layout.expand:
            inner *= dims[i]
    return inner * (DQL_TYPE.bits / 8 + (max(info.in_type.bits, 8) / 8 if info.has_zp else 0))


def _inner(layout: Layout) -> tuple[int, ...]:
    """The input's axes that make one row the kernel walks: per axis, those after the axis; blocked, those
    after the reduced axis, or the reduced axis itself where it is the last (one block per row)."""
    view = layout.view
    axis = layout.axis or 0
    if layout.mode == "blocked" and axis == len(view) - 1:  # blocks along the last axis: one per row
        return view[axis]
    return tuple(a for g in view[axis + 1 :] for a in g)


def _rows(info: NodeInfo, layout: Layout) -> int:
    """Rows the kernel walks: per axis, runs of the elements after the axis; blocked, its blocks."""
    return max(1, info.size() // max(1, info.size(_inner(layout))))


VECTOR_BYTES = 16
"""ORT 1.32's DequantizeLinear loops over a row (per axis, blocked) run vectors of this many input bytes and
the rest of the row an element at a time (``scripts/bench_rows.py`` on an Intel Xeon, over the per-tensor
kernel: int8 per axis rows of 16 1.19x, rows of 8-15 2.0-2.6x; uint16 rows of 8 1.22-1.26x, of 3-7
2.2-3.1x; docs/lowering.md)."""


def vector_elements(t: dtypes.DType) -> int | None:
    """Input elements of type ``t`` per vector of ORT's DequantizeLinear loops; None for 4-bit types, whose
    loop unpacks one element at a time."""
    return None if t.bits < 8 else VECTOR_BYTES * 8 // t.bits


def _row_cost(info: NodeInfo, layout: Layout, kernel: str) -> float:
    """The per-row cost of ``kernel``'s loop over ``layout``'s rows: ``*_row_vec`` where every row is whole
    vectors (``vector_elements``; its dims known when lowering), else ``*_row`` (rows with a scalar rest)."""
    inner = _inner(layout)
    w = vector_elements(info.in_type)
    known = info.shape is not None and all(isinstance(info.shape[a], int) for a in inner)
    whole = w is not None and known and info.size(inner) % w == 0
    return _rows(info, layout) * kernel_cost(f"{kernel}_row_vec" if whole else f"{kernel}_row")


def layout_cost(info: NodeInfo, layout: Layout) -> float:
    """Copy bytes: each ORT kernel of the form at its calibrated cost (``costs.kernel_cost``: threaded or
    not, per element and per row), plus the scale and zero-point bytes read."""
    dql_t = DQL_TYPE
    n = info.size()
    in_bytes, dql_bytes, out_bytes = max(info.in_type.bits, 8) / 8, dql_t.bits / 8, info.out_type.bits / 8
    last = layout.axis == len(layout.view) - 1 and len(layout.view) > 1
    if layout.mode == "tensor":
        cost = n * kernel_cost("dql_tensor")
    elif layout.mode == "axis":
        cost = n * kernel_cost("dql_axis_last") if last else n * kernel_cost("dql_axis")
        cost += 0 if last else _row_cost(info, layout, "dql_axis")
    elif last:
        cost = n * kernel_cost("dql_blocked_last") + _rows(info, layout) * kernel_cost("dql_blocked_last_row")
    else:  # the kernel walks the scale rows after the reduced axis once per block: cheaper while they stay in L1
        cost = n * kernel_cost("dql_blocked_l1" if _inner_param_bytes(info, layout) <= L1_BYTES else "dql_blocked")
        cost += _row_cost(info, layout, "dql_blocked")  # and runs its inner loop once per row
    # the table's kernels read int8 (5 bytes an element with f32 out); their rows' rest, measured on int8, costs
    # as much more for wider types (a row of 6 16-bit elements, blocked, measured 1.2x what 5 bytes predict)
    cost *= (in_bytes + dql_bytes) / 5
    if dql_t is not info.out_type:
        cost += n * narrowing_cast_cost(info.out_type) * (dql_bytes + out_bytes) / 6
        if not info.scale_const:  # the scale's own Cast to f32 runs with the model (a constant one is folded)
            cost += info.scale_size * scale_cast_cost(info.out_type) * (dql_bytes + out_bytes) / 6
    back = layout.reshapes_back(info) or bool(layout.barrier)
    if back:
        cost += reshaped_output_cost(info)
    # the nodes over the input: a Reshape to the view, the DequantizeLinear, its Cast, a Flatten, the Reshape back
    cost += nodes_cost(layout.reshapes + 1 + (dql_t is not info.out_type) + bool(layout.barrier) + back)
    scale_elements = layout.scale_elements(info)
    params = [(dql_t.bits / 8, info.scale_const)] + ([(in_bytes, info.zp_const)] if info.has_zp else [])
    for nbytes, const in params:  # each read by the kernel, and expanded first when the model runs
        cost += scale_elements * nbytes
        if expands_at_run_time(info, layout, const):
            cost += expansion(info, layout)[0] * nbytes / 4  # (the table's kernels move f32)
    return cost


def expands_at_run_time(info: NodeInfo, layout: Layout, const: bool) -> bool:
    """Whether a parameter's Expand runs with the model (ORT folds it where the parameter is a constant,
    ``const``, and the broadcast dims are known when lowering)."""
    if not layout.expand:
        return False
    dims = layout.view_dims(info)
    return not const or any(not isinstance(dims[i], int) for i, q in enumerate(layout.quant) if not q)


def expansion(info: NodeInfo, layout: Layout) -> tuple[float, bool]:
    """What expanding an f32 parameter for ``layout`` costs when the model runs, and whether it is expanded
    along an outer axis and transposed in place. ORT 1.32's Expand copies the parameter's run of quantized
    axes after its last expanded axis whole, then doubles it along each expanded axis: along outer axes at a
    copy's speed, along an axis after a quantized one at a cost per run copied (``expand_inner_row``, 30-60 ns
    a run: an element each where the last axis is expanded). One expanded axis may instead be expanded
    first and moved in place by a Transpose (ORT's kernel moving one axis), where that is cheaper."""
    sizes = layout.view_sizes(info)
    n = layout.scale_elements(info)
    first = layout.quant.index(True) if True in layout.quant else len(sizes)
    if all(i < first for i in layout.expand):
        return n * kernel_cost("expand_f32"), False
    runs = 1
    for i, q in enumerate(layout.quant):
        if q and i < max(layout.expand):
            runs *= sizes[i]
    direct = n * kernel_cost("expand_inner") + runs * kernel_cost("expand_inner_row")
    moved = n * (kernel_cost("expand_f32") + kernel_cost("transpose_f32"))
    return (moved, True) if len(layout.expand) == 1 and moved < direct else (direct, False)


def zero_refusal(info: NodeInfo, layout: Layout) -> Refusal | None:
    """Why ``layout``'s Reshapes would misread an empty input, or None. Below opset 14 a Reshape has no
    ``allowzero``: a 0 in its target shape copies the input's dim there. A size known only at run time is
    safe only as the same axis at the same place in the input, the view and the output (a 0 then copies a
    0); a merged one, or one the view moves, is not."""
    if info.opset >= 14 or not layout.reshapes or info.shape is None:
        return None
    for i, g in enumerate(layout.view):
        if g != (i,) and any(not isinstance(info.shape[a], int) for a in g):
            return Refusal(
                "a Reshape to dims known only at run time, below opset 14 (no allowzero), would misread an empty input"
            )
    return None


def reshape(
    em: Emitter, info: NodeInfo, tensor: str, shape_name: str, output: str | None = None, hint: str = ""
) -> str:
    """``tensor`` reshaped to ``shape_name``, whose dims are sizes, never "copy this dim": ``allowzero`` from
    opset 14, so that a dim of 0 at run time stays 0."""
    attrs = {"allowzero": 1} if info.opset >= 14 else {}
    return em.node("Reshape", [tensor, shape_name], output, hint=hint, **attrs)


def _reshape_param(em: Emitter, info: NodeInfo, tensor: str, sshape: list, param_groups: list, hint: str) -> str:
    """``tensor`` (shaped ``sshape``) reshaped to the groups ``param_groups``: a new constant when it is one."""
    if all(isinstance(d, int) for d in sshape):
        dims = []
        for g in param_groups:
            n = 1
            for a in [] if isinstance(g, int) else g:
                n *= sshape[a]
            dims.append(g if isinstance(g, int) else n)
        const = em.redim(tensor, dims, hint)
        if const is not None:
            return const
    if info.in_type.bits < 8:  # (ORT has no Shape kernel for 4-bit types: the scale's own dims)
        return reshape(em, info, tensor, merged_shape_tensor(em, tensor, sshape, param_groups, info.opset), hint=hint)
    # the dims read from the input (the contract makes them the same): one Shape for the input and its params
    x_groups = [g if isinstance(g, int) else tuple(info.axes[a] for a in g) for g in param_groups]
    shape = merged_shape_tensor(em, info.x, info.shape or (), x_groups, info.opset)
    return reshape(em, info, tensor, shape, hint=hint)


OPEN_BLOCK = 1 << 40
"""The block size of a blocked layout whose reduced axis has a size not known when lowering: one block
whatever its size (ORT computes the scale's dim there as ``ceil(size / block_size)`` in int64)."""


def _param(
    info: NodeInfo, em: Emitter, layout: Layout, tensor: str, hint: str, open_dim: str | None, const: bool
) -> str:
    """The scale or zero point (``const``: a constant), reshaped (and expanded) for the layout; along an open
    block's axis, sliced to ``open_dim`` (the view's size there): one element, none for an empty input."""
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
    param_groups: list = []
    for q, g in zip(layout.quant, layout.view):
        param_groups.append(tuple(pos[a] for a in g) if q else 1)
    out = _reshape_param(em, info, tensor, sshape, param_groups, hint)
    if open_dim is not None:
        out = em.node("Slice", [out, em.i64([0]), open_dim, em.i64([layout.axis])], hint=hint)  # type: ignore[list-item]
    if layout.expand:
        outer = expands_at_run_time(info, layout, const) and expansion(info, layout)[1]
        out = _expanded(info, em, layout, out, hint, outer=outer)
    return out


def _expanded(info: NodeInfo, em: Emitter, layout: Layout, param: str, hint: str, *, outer: bool) -> str:
    """``param`` (1 along the layout's broadcast axes) expanded along ``layout.expand``; with ``outer``, its
    one expanded axis moved first (a Transpose of a size-1 axis), expanded there, and transposed back in
    place (``expansion``)."""
    target = [g if i in layout.expand else 1 for i, g in enumerate(layout.view)]
    if not outer:
        return em.node(
            "Expand", [param, merged_shape_tensor(em, info.x, info.shape or (), target, info.opset)], hint=hint
        )
    perm = [*layout.expand, *(i for i in range(len(layout.view)) if i not in layout.expand)]
    moved = em.node("Transpose", [param], hint=hint, perm=perm)
    shape = merged_shape_tensor(em, info.x, info.shape or (), [target[i] for i in perm], info.opset)
    wide = em.node("Expand", [moved, shape], hint=hint)
    return em.node("Transpose", [wide], hint=hint, perm=[perm.index(i) for i in range(len(perm))])


def emit_layout(info: NodeInfo, em: Emitter, layout: Layout) -> None:
    """Nodes computing the node's output through one DequantizeLinear in ``layout``."""
    dql_t = DQL_TYPE
    shape = info.shape or ()
    x = info.x
    if layout.reshapes:
        x = reshape(em, info, x, merged_shape_tensor(em, x, shape, layout.view, info.opset), hint="x_view")
    block = None
    open_dim = None
    if layout.mode == "blocked":
        block = 1 if layout.quant[layout.axis] else layout.view_dims(info)[layout.axis]  # type: ignore[index]
        if not isinstance(block, int):  # a whole-axis block of a size known only at run time
            block = OPEN_BLOCK
            open_dim = em.node("Shape", [x], hint="dims", start=layout.axis, end=layout.axis + 1)  # type: ignore[operator]
    scale = info.scale
    if info.out_type is not dql_t:
        scale = em.node("Cast", [scale], hint="scale", to=dql_t.onnx)
    scale = _param(info, em, layout, scale, "scale", open_dim, info.scale_const)
    inputs = [x, scale]
    if info.has_zp and info.zero_point is not None:
        inputs.append(_param(info, em, layout, info.zero_point, "zero_point", open_dim, info.zp_const))
    elif info.in_type.name == "i8" and info.opset < 21 and layout.mode in ("tensor", "axis"):
        # ORT 1.32 below opset 21: an int8 DQL with a one-element scale and no zero point, followed by
        # Reshape/Transpose/..., gives wrong results (QDQ propagation inserts a uint8 QuantizeLinear);
        # an explicit zero zero point avoids it at no cost
        n = 1 if layout.mode == "tensor" else layout.scale_elements(info)
        if layout.mode == "tensor" or (info.known_shape is not None and n == 1):
            inputs.append(em.const(np.zeros(() if layout.mode == "tensor" else (1,), np.int8), hint="zero_point"))
    attrs: dict = {}
    if layout.mode in ("axis", "blocked"):
        attrs["axis"] = layout.axis
    if layout.mode == "blocked":
        attrs["block_size"] = block
    reshaped = layout.reshapes_back(info) or bool(layout.barrier)
    narrowed = info.out_type is not dql_t and not info.keep_f32
    steps_left = narrowed + reshaped
    y = em.node("DequantizeLinear", inputs, info.output if steps_left == 0 else None, hint="dql", **attrs)
    if narrowed:  # (never with a barrier: ORT's passes do not move a DQL its Cast reads)
        steps_left -= 1
        y = em.node("Cast", [y], info.output if steps_left == 0 else None, hint="cast", to=info.out_type.onnx)
    if reshaped:
        reshape_back(em, info, y, flatten=bool(layout.barrier))


def reshape_back(em: Emitter, info: NodeInfo, y: str, *, flatten: bool) -> None:
    """``info.output`` as ``y`` reshaped to the input's shape; with ``flatten``, through ``Flatten(axis=0)``
    first: the one reader ORT's QDQ passes leave a DequantizeLinear ``y`` with (neither its QDQ propagation
    nor its Transpose optimizer moves one past a Flatten, nor gives a Flatten its own copy of it)."""
    if flatten:
        y = em.node("Flatten", [y], hint="one_reader", axis=0)
    reshape(em, info, y, shape_tensor(em, info.x, info.shape or (), info.opset), info.output, hint="y")


class DQLStrategy(Strategy[Layout]):
    """A strategy that is one DequantizeLinear in some ``Layout``: subclasses say which layout they use, or
    why their layout family does not fit (``layout``); the checks every DQL needs, the cost and the
    emission are shared."""

    def layout(self, info: NodeInfo) -> Layout | Refusal:
        """The layout this family uses for the node, or why it does not fit (before every DQL's checks)."""
        raise NotImplementedError

    def check(self, info: NodeInfo) -> Layout | Refusal:
        layout = self.layout(info)
        if isinstance(layout, Refusal):
            return layout
        return dql_refusal(info) or zero_refusal(info, layout) or ort_pass_barrier(info, layout)

    def cost(self, info: NodeInfo, choice: Layout) -> float:
        return layout_cost(info, choice)

    def ort_barrier(self, choice: Layout) -> str:
        return choice.barrier

    def emit(self, info: NodeInfo, choice: Layout, em: Emitter) -> None:
        emit_layout(info, em, choice)
