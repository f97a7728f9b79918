"""An ``If`` of two forms of one node (``guarded``, ``row_switch``): each branch a subgraph computing the
node, its output left in its form's view of the input (``NodeInfo.keep_view``), and one Reshape after the
``If`` where a branch leaves a view. A Reshape inside a branch would copy: ORT 1.32 writes a branch's output
into the ``If``'s own buffer (``bench_switch.py --kernels``: a per-axis DequantizeLinear of 4M elements
0.65 ms in an ``If``, 1.78 ms with a Reshape after it in the branch)."""

from __future__ import annotations

import dataclasses

from onnx import helper

from ..emitter import Emitter
from ..facts import NodeInfo
from .base import DQL_TYPE, Plan
from .costs import reshaped_output_cost
from .dql import Layout, reshape
from .shapes import shape_tensor

__all__ = ["as_branch", "emit_if", "reshape_after_cost"]


def as_branch(info: NodeInfo, *, keep_view: bool = True, **changes: object) -> NodeInfo:
    """The node as a branch computes it: its output a subgraph's (a Reshape there copies), left in its form's
    view of the input where ``keep_view``, and no weight ORT fuses; with ``changes``."""
    return dataclasses.replace(
        info,
        keep_view=keep_view,
        graph_output=True,
        model_output=False,
        fusable_weight=False,
        **changes,  # type: ignore[arg-type]
    )


def _views(plan: Plan, branch: NodeInfo) -> bool:
    """Whether ``plan`` leaves its output in a view of another shape."""
    return isinstance(plan.choice, Layout) and plan.choice.reshapes and branch.keep_view


def reshape_after_cost(info: NodeInfo, branches: list[tuple[Plan, NodeInfo]]) -> float:
    """What the Reshape after the ``If`` costs (a copy where the graph returns the node's output)."""
    return reshaped_output_cost(info) if any(_views(p, b) for p, b in branches) else 0.0


def emit_if(info: NodeInfo, em: Emitter, cond: str, then: tuple[Plan, NodeInfo], orelse: tuple[Plan, NodeInfo]) -> None:
    """``info.output`` as ``If(cond)`` of the two plans, each over its branch's facts. Where both are
    DequantizeLinear forms of an f16/bf16 output, their Cast follows the ``If`` too (``keep_f32``): ORT
    1.32 fuses no Cast across an ``If``, and a reader without an f16 kernel (Relu) then gets Casts of its own
    around it (`(256,256,16)` i8 -> f16 -> Relu: 0.99 ms in an ``If``, 0.55 ms inlined)."""
    views = any(_views(p, b) for p, b in (then, orelse))
    f32 = info.out_type is not DQL_TYPE and all(isinstance(p.choice, Layout) for p, _ in (then, orelse))
    out = em.fresh("y_view") if views or f32 else info.output
    graphs = {}
    for key, (plan, branch) in (("then_branch", then), ("else_branch", orelse)):
        sub = dataclasses.replace(branch, output=em.fresh("y_" + key[:4]), keep_f32=f32)
        sub_em = em.child(f"{em.prefix}_{key[:4]}")
        plan.emit(sub, sub_em)
        value = helper.make_tensor_value_info(sub.output, (DQL_TYPE if f32 else info.out_type).onnx, None)
        graphs[key] = helper.make_graph(sub_em.nodes, em.fresh(key[:4]), [], [value])
    em.node("If", [cond], out, hint="branches", **graphs)  # type: ignore[list-item]
    if views:
        shape = shape_tensor(em, info.x, info.shape or (), info.opset)
        out = reshape(em, info, out, shape, None if f32 else info.output, hint="y")
    if f32:
        em.node("Cast", [out], info.output, hint="y", to=info.out_type.onnx)
