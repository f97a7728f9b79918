"""Walking what the pass lowers: every graph (subgraphs before the graph holding them) and model-local
function body, each as a ``Scope`` with the types and constants it sees."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import onnx

from ..contract import TensorType
from ..graphs import iter_graphs, subgraphs
from ..schema import is_dequantize
from .facts import Constants

__all__ = ["Scope", "graph_scopes", "lowers_in"]


@dataclass
class Scope:
    """One graph or function body whose Dequantize nodes the pass lowers."""

    body: Any  # onnx.GraphProto | onnx.FunctionProto
    label: str  # where it is, for reports: "main", "main/loop", "function f"
    constants: Constants  # what it sees: its own and its enclosing graphs' constants
    types: dict[str, TensorType]
    function: bool = False  # a function body: constants become Constant nodes
    main: bool = False  # the model's main graph

    @property
    def outputs(self) -> set[str]:
        return set(self.body.output) if self.function else {v.name for v in self.body.output}

    def consumers(self) -> dict[str, list[str]]:
        """The op types reading each value (``<subgraph>`` for a read from inside a nested graph)."""
        out: dict[str, list[str]] = {}
        for n in self.body.node:
            for i in n.input:
                out.setdefault(i, []).append(n.op_type)
            for sg in subgraphs(n):
                for g in iter_graphs(sg):
                    for m in g.node:
                        for i in m.input:
                            out.setdefault(i, []).append("<subgraph>")
        return out


def graph_scopes(
    body: Any, label: str, outer: Constants, types: dict[str, TensorType], *, function: bool = False, main: bool = False
) -> Iterator[Scope]:
    """``body`` and the graphs nested in its nodes, the nested ones first (lowering them changes what
    ``body`` reads), each seeing the constants of the graphs around it."""
    constants = outer.scope(body)
    for n in body.node:
        for sg in subgraphs(n):
            yield from graph_scopes(sg, f"{label}/{n.name or n.op_type}", constants, types)
    yield Scope(body, label, constants, types, function, main)


def lowers_in(fn: onnx.FunctionProto) -> bool:
    """Whether a function body may hold a node to lower (one of ours, or a subgraph)."""
    return any(is_dequantize(n) or any(True for _ in subgraphs(n)) for n in fn.node)
