"""Which graph inputs reach which operands: the value flow that input generation follows.

A generated input must give the ops that read it what they need (indices within an axis, divisors that
are not 0, lengths within a time axis, a loop count that ends). An input's values reach an operand
unchanged through ops that move, cast or select them (Identity, Cast, Reshape, Concat, Where, a Gather's
data...) and across control flow: a Scan or Loop body's input holds what its node passes in and what the
body carries to the next iteration, and a control-flow node's output holds its body's. Each graph is a
scope: a body reads an outer value by a name it does not define itself.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from ..graphs import constants, iter_graphs, subgraphs
from ..schema import tensor_type_of

__all__ = ["Operands", "Size", "Sizes", "operand_inputs", "trip_sources"]

PRESERVING = frozenset(
    {"Identity", "Cast", "CastLike", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Expand"}
)
"""Ops whose first input's values reach their output unchanged (moved, repeated, or cast)."""

IN_PLACE = frozenset({"Identity", "Cast", "CastLike"})
"""Of ``PRESERVING``, the ops that keep each value at its place (a Scatter's no-repeat rule holds through them)."""

CLAMPING = PRESERVING | {"Max", "Min", "Clip"}
"""Ops a sequence length is traced back through (its first input: a length clamped to a range)."""

SELECTING = {"Where": (1, 2), "Gather": (0,), "GatherElements": (0,), "GatherND": (0,)}
"""Ops whose output holds some of these inputs' values (a choice of them, or a gathered part)."""

RECURRENT = frozenset({"RNN", "GRU", "LSTM"})

INDEXING = {
    "Gather": "axis",
    "GatherElements": "axis",
    "GatherND": "batch_dims",
    "ScatterElements": "axis",
    "ScatterND": "batch_dims",  # ScatterND has no batch dims: the attribute is absent, 0
}
"""Ops that index their input 0 with their input 1, and the attribute that says which axis (for
GatherND and ScatterND, the first axis of those their indices' last dim spans)."""

TUPLES = frozenset({"GatherND", "ScatterND"})
"""Of ``INDEXING``, the ops whose indices' last dim is a tuple of indices into consecutive axes."""

MAX_CASTS = 16
"""A path is followed through at most this many Casts (a Cast in a loop body carries values round)."""

MAX_VARIANTS = 32
"""A value is followed with at most this many different Casts on the way (a loop body that joins several
cast values with a Where or a Concat has as many sequences as choices per round, to the power of the rounds
``MAX_CASTS`` allows: 5 of them joined in a body, 390,625 sequences and a minute spent)."""

Size = int | str | tuple[str, int]
"""An axis's size: known, a dim's name (generated with the size the name gets), or ``(input, axis)``: a
generated input's own."""

Sizes = dict[str, list[Size]]

Key = tuple[int, str]
"""A value: the scope (``id`` of its graph) and its name there."""


@dataclass
class Operands:
    """What the main graph's inputs are to the ops that read them (``InputSpec``'s fields of the same names)."""

    divisors: dict[str, set[tuple[int, ...]]] = field(default_factory=dict)
    indexes: Sizes = field(default_factory=dict)
    lengths: Sizes = field(default_factory=dict)
    distinct: dict[str, list[int | str]] = field(default_factory=dict)
    power: dict[str, set[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Path:
    source: str  # the main graph's input
    casts: tuple[int, ...]  # the types it is cast to on the way, in order
    in_place: bool  # every op on the way keeps each value at its place


def _attr(n: onnx.NodeProto, name: str, default: int) -> int:
    return next((int(a.i) for a in n.attribute if a.name == name), default)


def _text_attr(n: onnx.NodeProto, name: str, default: str) -> str:
    return next((a.s.decode(errors="replace") for a in n.attribute if a.name == name), default)


class _Flow:
    """The model's graphs as scopes, and the values each value's values come from."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        g = model.graph
        self.main = id(g)
        self.graphs: dict[int, onnx.GraphProto] = {}
        self.parent: dict[int, int | None] = {}
        self.owner: dict[int, onnx.NodeProto | None] = {}
        self.defined: dict[int, set[str]] = {}
        self.producer: dict[Key, onnx.NodeProto] = {}
        self.body_of: dict[tuple[int, str], int] = {}  # (id of a node, attribute name) -> the body's scope
        self._walk(g, None, None)
        inits = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
        self.inputs = {vi.name for vi in g.input if vi.name not in inits}
        self.declared = {vi.name: tensor_type_of(vi.type).shape for vi in g.input if vi.type.HasField("tensor_type")}
        self.tensors = dict(constants(g))
        self.dim_names = {d for shape in self.declared.values() if shape for d in shape if isinstance(d, str)}
        self._inferred: dict[str, onnx.TypeProto] | None = None
        self._traced: dict[tuple[Key, frozenset[str]], list[_Path]] = {}

    def _walk(self, graph: onnx.GraphProto, parent: int | None, owner: onnx.NodeProto | None) -> None:
        scope = id(graph)
        self.graphs[scope], self.parent[scope], self.owner[scope] = graph, parent, owner
        self.defined[scope] = {
            *(vi.name for vi in graph.input),
            *(t.name for t in graph.initializer),
            *(t.values.name for t in graph.sparse_initializer),
            *(o for n in graph.node for o in n.output if o),
        }
        for n in graph.node:
            for o in n.output:
                if o:
                    self.producer[(scope, o)] = n
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    self.body_of[(id(n), a.name)] = id(a.g)
                    self._walk(a.g, scope, n)
                elif a.type == onnx.AttributeProto.GRAPHS:  # no standard op's: a custom op's bodies, read as scopes
                    for sub in a.graphs:
                        self._walk(sub, scope, n)

    def resolve(self, scope: int, name: str) -> Key | None:
        """The value ``name`` read in ``scope`` names: the nearest scope that defines it."""
        at: int | None = scope
        while at is not None:
            if name in self.defined[at]:
                return (at, name)
            at = self.parent[at]
        return None

    # ---- where values come from ----

    def _sources(self, key: Key, through: frozenset[str]) -> list[tuple[Key, int | None, bool]]:
        """One step back from ``key``: ``(value, cast, in place)`` for each value whose values reach it."""
        scope, name = key
        n = self.producer.get(key)
        if n is not None:
            return self._from_node(scope, name, n, through)
        owner = self.owner[scope]
        if owner is None or owner.domain not in ("", "ai.onnx"):  # the main graph's: an initializer, a constant
            return []
        graph = self.graphs[scope]
        names = [vi.name for vi in graph.input]
        if name not in names:
            return []
        i, outer = names.index(name), self.parent[scope]
        assert outer is not None
        inner = [vi.name for vi in graph.output]
        if owner.op_type == "Scan":  # states, then scan inputs; Scan-8 has sequence_lens before them
            states = len(names) - _attr(owner, "num_scan_inputs", 0)
            passed = list(owner.input)[len(owner.input) - len(names) :]
            carried = inner[i] if i < states else ""
        elif owner.op_type == "Loop" and i >= 2:  # the iteration number and the condition come from none
            passed, carried = list(owner.input), inner[i - 1] if i - 1 < len(inner) else ""
        else:
            return []
        out = [] if i >= len(passed) or not passed[i] else [(self.resolve(outer, passed[i]), None, False)]
        if carried:
            out.append((self.resolve(scope, carried), None, False))
        return [(k, c, p) for k, c, p in out if k is not None]

    def _from_node(
        self, scope: int, name: str, n: onnx.NodeProto, through: frozenset[str]
    ) -> list[tuple[Key, int | None, bool]]:
        if n.domain not in ("", "ai.onnx"):
            return []
        op = n.op_type
        ins: list[tuple[str, int | None, bool]] = []
        if op == "Concat":  # every input's values reach the output
            ins = [(i, None, False) for i in n.input]
        elif op in through and n.input:
            cast = _attr(n, "to", 0) if op == "Cast" else onnx.TensorProto.INT8 if op == "CastLike" else None
            ins = [(n.input[0], cast, op in IN_PLACE)]
        elif op in SELECTING:
            ins = [(n.input[i], None, False) for i in SELECTING[op] if i < len(n.input)]
        elif op in ("If", "Loop", "Scan"):  # the body's output (Loop: after its condition)
            k = list(n.output).index(name) + (1 if op == "Loop" else 0)
            out = []
            for attr in ("then_branch", "else_branch") if op == "If" else ("body",):
                body = self.body_of.get((id(n), attr))
                outputs = [] if body is None else [vi.name for vi in self.graphs[body].output]
                key = self.resolve(body, outputs[k]) if body is not None and k < len(outputs) else None
                if key is not None:
                    out.append((key, None, False))
            return out
        return [(k, c, p) for i, c, p in ins if i and (k := self.resolve(scope, i)) is not None]

    def traced(self, key: Key | None, through: frozenset[str] = PRESERVING) -> list[_Path]:
        """The main graph's inputs whose values reach ``key`` unchanged, each path with the types it casts
        to (a CastLike's, unknown here, as int8: a value not 0 or -1 there is neither in any integer type)."""
        if key is not None and (key, through) in self._traced:
            return self._traced[(key, through)]
        start = key
        found: list[_Path] = []
        todo: deque[tuple[Key, tuple[int, ...], bool]] = deque([] if key is None else [(key, (), True)])
        seen: set[tuple[Key, tuple[int, ...], bool]] = set()
        variants: dict[Key, int] = {}
        while todo:
            key, casts, kept = todo.popleft()  # casts from ``key`` to the operand, last first (fewest first)
            if key[0] == self.main and key[1] in self.inputs:
                found.append(_Path(key[1], tuple(reversed(casts)), kept))
                continue
            # a value an earlier trace started from: its paths, not its values again (a long chain of
            # Wheres that each feed a Div is traced once, not once per Div)
            if (done := self._traced.get((key, through))) is not None:
                tail = tuple(reversed(casts))
                found.extend(_Path(p.source, p.casts + tail, kept and p.in_place) for p in done)
                continue
            # a value is followed once per casts on the way (a Concat may join it cast and not)
            if (key, casts, kept) in seen or len(casts) > MAX_CASTS or variants.get(key, 0) >= MAX_VARIANTS:
                continue
            seen.add((key, casts, kept))
            variants[key] = variants.get(key, 0) + 1
            for src, cast, in_place in self._sources(key, through):
                todo.append((src, casts if cast is None else (*casts, cast), kept and in_place))
        found = list(dict.fromkeys(found))  # each path once (a Where joining a value with itself)
        if start is not None:
            self._traced[(start, through)] = found
        return found

    # ---- what is known of a value ----

    def _inferred_type(self, name: str) -> onnx.TypeProto | None:
        """A main-graph value's type as ONNX shape inference finds it, or None."""
        if self._inferred is None:
            self._inferred = {}
            try:
                found = onnx.shape_inference.infer_shapes(self.model).graph.value_info
                self._inferred.update({vi.name: vi.type for vi in found if vi.type.HasField("tensor_type")})
            except Exception:  # noqa: BLE001 - a model inference cannot follow: no shape known
                pass
        return self._inferred.get(name)

    def _body_type(self, key: Key) -> onnx.TypeProto | None:
        """A body's value's type as the body declares it (an input, output or value_info), or None."""
        graph = self.graphs[key[0]]
        return next((vi.type for vi in (*graph.input, *graph.value_info, *graph.output) if vi.name == key[1]), None)

    def shape(self, key: Key | None) -> Any:
        """A value's shape (sizes, dim names, None): a constant's, an input's as declared, a computed main-graph
        value's as ONNX shape inference finds it, a body's value's as its body declares it; None where unknown."""
        if key is None:
            return None
        scope, name = key
        if scope != self.main:
            t = next((t for n, t in constants(self.graphs[scope]) if n == name), None)
            return tuple(int(d) for d in t.dims) if t is not None else tensor_type_of(self._body_type(key)).shape
        if name in self.tensors:
            return tuple(int(d) for d in self.tensors[name].dims)
        if name in self.inputs and self.declared.get(name) is not None:
            return self.declared[name]
        found = self._inferred_type(name)
        return None if found is None else tensor_type_of(found).shape

    def sizes(self, key: Key | None, axes: range, unknown: int | None = 1) -> list[Size]:
        """The sizes of a value's ``axes``: a size, ``(input, axis)`` for a generated input's, a dim's name
        (the size it is generated with); ``unknown`` where none is known (None: none listed)."""
        shape = self.shape(key)
        fed = key is not None and key[0] == self.main and key[1] in self.inputs
        out: list[Size] = []
        for a in axes:
            d = None if shape is None or not -len(shape) <= a < len(shape) else shape[a % len(shape)]
            if isinstance(d, int):
                out.append(d)
            elif fed and shape is self.declared.get(key[1]):  # type: ignore[index]
                out.append((key[1], a % len(shape)))  # type: ignore[index]
            elif isinstance(d, str) and d and (fed or d in self.dim_names):  # not inference's ``unk__0``
                out.append(d)
            elif unknown is not None:  # only 0 and -1 are sure to be in range
                out.append(unknown)
        return out

    def is_integer(self, key: Key | None) -> bool:
        """Whether a value is known to hold integers."""
        if key is None:
            return False
        scope, name = key
        elem = 0
        if scope == self.main:
            vi = next((v for v in self.model.graph.input if v.name == name), None)
            if name in self.tensors:
                elem = self.tensors[name].data_type
            elif vi is not None and vi.type.HasField("tensor_type"):
                elem = vi.type.tensor_type.elem_type
            elif (found := self._inferred_type(name)) is not None:
                elem = found.tensor_type.elem_type
        elif (found := self._body_type(key)) is not None and found.HasField("tensor_type"):
            elem = found.tensor_type.elem_type
        try:
            return bool(elem) and np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).kind in "iu"
        except (KeyError, TypeError, ValueError):  # a type NumPy has not
            return False

    def one_value(self, key: Key | None) -> bool:
        """Whether a main-graph value is a constant of one value repeated (or one Expanded, as nGraph's
        ScatterND writes zeros before it adds): a Scatter writing it is defined with repeats."""
        if key is None or key[0] != self.main:
            return False
        n = self.producer.get(key)
        name = key[1]
        if n is not None and n.op_type == "Expand" and n.domain in ("", "ai.onnx") and n.input:
            name = n.input[0]
        t = self.tensors.get(name)
        if t is None or math.prod(t.dims) > 1 << 16:
            return False
        try:
            v = onnx.numpy_helper.to_array(t)
        except Exception:  # noqa: BLE001 - a tensor NumPy cannot read (external data): not known
            return False
        return v.size <= 1 or bool(np.all(v.reshape(-1) == v.reshape(-1)[0]))


def operand_inputs(model: onnx.ModelProto) -> Operands:
    """What each of the main graph's inputs is to the ops of any graph that read its values (traced back
    through ``_Flow``): an integer divisor, indices and the sizes of the axes they index, sequence lengths
    (ReverseSequence's, an RNN's, GRU's or LSTM's) and their time axes' sizes (through ``CLAMPING`` ops
    too), a Scatter's indices written without repeats, an integer Pow's base or exponent."""
    flow = _Flow(model)
    found = Operands()
    for scope, graph in flow.graphs.items():
        for n in graph.node:
            if n.domain in ("", "ai.onnx"):
                _classify(flow, scope, n, found)
    return found


def _classify(flow: _Flow, scope: int, n: onnx.NodeProto, found: Operands) -> None:
    def key(i: int) -> Key | None:
        return flow.resolve(scope, n.input[i]) if len(n.input) > i and n.input[i] else None

    op = n.op_type
    if op == "ReverseSequence" or op in RECURRENT:  # X's time axis: an attribute's, or the layout's
        t = _attr(n, "time_axis", 0) if op == "ReverseSequence" else _attr(n, "layout", 0)
        for source in _sources(flow.traced(key(1 if op == "ReverseSequence" else 4), CLAMPING)):
            found.lengths.setdefault(source, []).extend(flow.sizes(key(0), range(t, t + 1)))
    elif op in ("Div", "Mod"):
        for p in flow.traced(key(1)):
            found.divisors.setdefault(p.source, set()).add(p.casts)
    elif op == "Pow":
        if flow.is_integer(key(0)):
            for role, i in (("base", 0), ("exponent", 1)):
                for source in _sources(flow.traced(key(i))):
                    found.power.setdefault(source, set()).add(role)
    elif op in INDEXING:
        at = _attr(n, INDEXING[op], 0)
        axes = range(at, at + 1)
        if op in TUPLES:  # the axes a tuple spans: as many as the indices' last dim, else all from ``at``
            ind = flow.shape(key(1))
            k = ind[-1] if ind else None
            axes = range(at, at + k) if isinstance(k, int) else range(at, max(len(flow.shape(key(0)) or ()), at + 1))
        scatter = op.startswith("Scatter") and _text_attr(n, "reduction", "none") == "none"
        scatter = scatter and not flow.one_value(key(2))
        paths = flow.traced(key(1))
        for source in _sources(paths):
            found.indexes.setdefault(source, []).extend(flow.sizes(key(0), axes))
            # the rule holds in the indices' own layout: for an input that reaches them in place, once
            mine = [q for q in paths if q.source == source]
            if scatter and len(mine) == 1 and mine[0].in_place:
                found.distinct.setdefault(source, []).append("nd" if op == "ScatterND" else at)


def _sources(paths: list[_Path]) -> list[str]:
    """The inputs the paths start from, each once, in order."""
    return list(dict.fromkeys(p.source for p in paths))


def trip_sources(model: onnx.ModelProto) -> set[str]:
    """The values a Loop's trip count ``M`` is computed from, in any graph: ``M`` itself and, back to the
    graph inputs, every value read by the nodes that compute one of them (a node with subgraphs reads
    every value its subgraphs' nodes read). A name a subgraph reuses counts for every value it names:
    an input kept small that need not be costs coverage; one drawn from its type's whole range may run
    the loop for ever."""
    reads: dict[str, list[str]] = {}  # value -> the values the node computing it reads
    wanted: list[str] = []
    for g in iter_graphs(model.graph):
        for n in g.node:
            read = [i for i in n.input if i]
            read += [i for sg in subgraphs(n) for inner in iter_graphs(sg) for m in inner.node for i in m.input if i]
            for o in n.output:
                if o:
                    reads.setdefault(o, []).extend(read)
            if n.op_type == "Loop" and n.domain in ("", "ai.onnx") and n.input and n.input[0]:
                wanted.append(n.input[0])
    seen: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name not in seen:
            seen.add(name)
            wanted.extend(reads.get(name, ()))
    return seen
