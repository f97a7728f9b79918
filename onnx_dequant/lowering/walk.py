"""Walking what the pass lowers: every graph (subgraphs before the graph holding them) and model-local
function body, each as a ``Scope`` with the types and constants it sees."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import onnx

from ..contract import TensorType
from ..graphs import function_nodes, iter_graphs, subgraphs
from ..schema import is_dequantize
from .facts import Constants, Reads

__all__ = ["Survey", "survey", "Scope", "graph_scopes", "lowers_in", "UNSEEN", "QDQ_TRANSPARENT", "FUSED_WITHOUT_Q"]

UNSEEN = frozenset({"<subgraph>", "<call>", "<outer>"})
"""``Scope.consumers``' marks for readers ONNX Runtime may inline next to a value (a function's body, an
``If`` branch whose condition it folds): what they do is not seen."""

QDQ_TRANSPARENT = frozenset(
    {"MaxPool", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Flatten", "Expand", "Gather"}
    | {"GatherElements", "Tile", "Resize", "ReduceMax", "ReduceMin", "Split"}
)
"""Ops ORT 1.32's QDQ passes move a DequantizeLinear or a QuantizeLinear past, or drop the pair around: a
node unit may hold them between a DequantizeLinear, the op it fuses and a QuantizeLinear."""

FUSED_WITHOUT_Q = frozenset({"ArgMax", "MatMul", "Gemm"})
"""Ops ORT 1.32 fuses with the DequantizeLinear they read, with no QuantizeLinear after them (its DropDQ,
MatMulIntegerToFloat, QGemm and MatMulNBits rules)."""


@dataclass
class Survey:
    """What the pass needs from the whole model, gathered in one walk before it changes anything."""

    names: set[str]  # every value and node name in use (as ``graphs.names``)
    to_lower: int  # our nodes the options pick
    calls: dict[tuple[str, str], list[list[str]]]  # (domain, op type) -> the inputs of each such node


def survey(model: onnx.ModelProto, wants: Callable[[onnx.NodeProto], bool]) -> Survey:
    """One walk over every graph, subgraph and function body (``wants``: whether a node of ours is lowered)."""
    found = Survey(set(), 0, {})

    def visit(n: onnx.NodeProto) -> None:
        found.names.update(n.input)
        found.names.update(n.output)
        found.names.add(n.name)
        found.calls.setdefault((n.domain, n.op_type), []).append(list(n.input))
        if is_dequantize(n) and wants(n):
            found.to_lower += 1

    for g in iter_graphs(model.graph):
        found.names.update(v.name for v in (*g.input, *g.output, *g.value_info, *g.initializer))
        for n in g.node:
            visit(n)
    for f in model.functions:
        found.names.update(f.input)
        found.names.update(f.output)
    for n in function_nodes(model):
        visit(n)
    found.names.discard("")
    return found


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

    @property
    def fed(self) -> set[str]:
        """The model's own inputs, which no pass can fold into constants: the main graph's inputs (a
        function's or a subgraph's may be bound to constants when ONNX Runtime inlines it)."""
        return {v.name for v in self.body.input} if self.main else set()

    @cached_property
    def _readers(self) -> tuple[dict[str, list[onnx.NodeProto]], set[str]]:
        """The nodes of this body reading each value (each once), and the values a nested graph reads: the
        body as ``lower_scope`` first reads it, before it replaces the body's nodes (``forget`` after a
        change)."""
        readers: dict[str, list[onnx.NodeProto]] = {}
        inside: set[str] = set()
        for n in self.body.node:
            for i in dict.fromkeys(n.input):
                readers.setdefault(i, []).append(n)
            for sg in subgraphs(n):
                for g in iter_graphs(sg):
                    inside.update(i for m in g.node for i in m.input)
        return readers, inside

    def forget(self) -> None:
        """The body's nodes changed (``gather_first``): read them again."""
        self.__dict__.pop("_readers", None)

    def readers(self, value: str) -> list[onnx.NodeProto]:
        """The nodes of this body reading ``value`` (each once)."""
        return list(self._readers[0].get(value, ()))

    def read_inside(self, value: str) -> bool:
        """Whether a graph nested in a node of this body reads ``value``."""
        return value in self._readers[1]

    def depends_on_fed(self, value: str) -> bool:
        """Whether ``value`` is computed from one of the model's inputs (``fed``): one that is not, ONNX
        Runtime may fold into a constant when it loads the model (in a function or a subgraph nothing is
        fed, as there anything may be bound to constants)."""
        fed = self.fed
        producers = {o: n for n in self.body.node for o in n.output}
        todo, seen = [value], set()
        while todo:
            v = todo.pop()
            if v in fed:
                return True
            if v in seen or v not in producers:
                continue
            seen.add(v)
            todo.extend(i for i in producers[v].input if i)
        return False

    def consumers(self) -> dict[str, list[str]]:
        """The op types reading each value, and behind a reader ONNX Runtime may remove as a no-op before
        its other passes (``_passes_through``) the readers of that reader's output too: those are the ops ONNX
        Runtime's QDQ passes then find after the value. ``UNSEEN`` marks the readers ONNX Runtime may bring
        next to it by inlining: ``<subgraph>`` (a read from inside a nested graph), ``<call>`` (a node of a
        domain other than ONNX's: a model-local function) and ``<outer>`` (an output of a function body or a
        subgraph, read by whatever reads its caller's or its node's output)."""
        readers, inside = self._readers
        out: dict[str, list[str]] = {}
        for value, nodes in readers.items():
            for n in nodes:
                out.setdefault(value, []).append(n.op_type)
                if n.domain not in ("", "ai.onnx"):
                    out[value].append("<call>")
        for value in inside:
            out.setdefault(value, []).append("<subgraph>")
        if not self.main:
            for o in self.outputs:
                out.setdefault(o, []).append("<outer>")
        for value, ops in out.items():
            seen, todo = {value}, [value]
            while todo:
                v = todo.pop()
                for r in readers.get(v, ()):
                    behind = r.output[0] if r.output else ""
                    if behind and behind not in seen and self._passes_through(r, v, may=True):
                        seen.add(behind)
                        todo.append(behind)
                        ops.extend(out.get(behind, ()))
        return out

    def reads(self, value: str) -> Reads:
        """How ONNX Runtime's optimized graph reads ``value`` (``facts.Reads``): the edges counted behind the
        no-ops it removes (``_passes_through``), less a Shape or Size of a value whose shape is known (ORT
        folds those); fusing where a QuantizeLinear follows a reader (past ops in ``QDQ_TRANSPARENT``), a
        reader is in ``FUSED_WITHOUT_Q``, or a reader is one ORT may inline (a call, a nested graph, the
        caller of a function or subgraph returning it)."""
        edges, outside = self._edges(value)
        return Reads(edges, outside, self._fusing(value))

    def _edges(self, value: str) -> tuple[int, bool]:
        readers, inside = self._readers
        t = self.types.get(value)
        static = t is not None and t.shape is not None and all(isinstance(d, int) for d in t.shape)
        edges, outside = 0, value in self.outputs or value in inside
        for r in readers.get(value, ()):
            behind = r.output[0] if r.output else ""
            if behind and behind not in self.outputs and self._passes_through(r, value):
                more, out = self._edges(behind)
                edges, outside = edges + more, outside or out
            elif not (static and r.op_type in ("Shape", "Size") and r.domain in ("", "ai.onnx")):
                edges += sum(1 for i in r.input if i == value)
        return edges, outside

    def _fusing(self, value: str) -> bool:
        readers, inside = self._readers
        todo, seen = [(value, False)], set()
        while todo:
            v, crossed = todo.pop()
            if (v, crossed) in seen:
                continue
            seen.add((v, crossed))
            if v in inside or (v in self.outputs and not self.main):
                return True
            for r in readers.get(v, ()):
                if r.domain not in ("", "ai.onnx") or r.op_type in ("QuantizeLinear", "DynamicQuantizeLinear"):
                    return True
                if not crossed and r.op_type in FUSED_WITHOUT_Q:
                    return True
                through = r.op_type in QDQ_TRANSPARENT or self._passes_through(r, v, may=True)
                if through or not crossed:
                    todo.extend((o, crossed or not through) for o in r.output if o)
        return False

    def _passes_through(self, node: onnx.NodeProto, value: str, *, may: bool = False) -> bool:
        """Whether ONNX Runtime removes ``node``, a reader of ``value``, as a no-op at its default level
        (docs/ort-facts.md): Identity, Dropout, a Cast to the type it reads, Add or Sub of a constant zero,
        Mul or Div by a constant one (Sub and Div with ``value`` first), an Expand by a constant shape of
        ones or of the value's own shape. With ``may``, also where it may: the other operand or the shape
        one ORT may fold to such a constant (computed, not the model's input), the type unknown."""
        op = node.op_type
        if node.domain not in ("", "ai.onnx"):
            return False
        if op in ("Identity", "Dropout"):
            return True
        if op == "Expand":
            if len(node.input) < 2 or node.input[0] != value:
                return False
            shape = self.constants.value(node.input[1])
            if shape is None:
                return may and node.input[1] not in self.fed
            t = self.types.get(value)
            own = None if t is None or t.shape is None else tuple(t.shape)
            dims = tuple(int(d) for d in shape.reshape(-1))
            return all(d == 1 for d in dims) or (
                own is not None and len(own) >= len(dims) and dims == own[len(own) - len(dims) :]
            )
        if op == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            t = self.types.get(value)
            if t is None or t.elem_type is None:
                return may
            return t.elem_type.onnx == to
        identity = {"Add": 0, "Sub": 0, "Mul": 1, "Div": 1}.get(op)
        if identity is None or len(node.input) != 2 or value not in node.input:
            return False
        other = node.input[1] if node.input[0] == value else node.input[0]
        if op in ("Sub", "Div") and node.input[0] != value:
            return False
        v = self.constants.value(other)
        if v is None:
            return may and other not in self.fed
        return v.size > 0 and bool(np.all(v == identity))


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
