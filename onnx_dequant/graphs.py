"""Walking ONNX models: every graph and node (subgraphs and model-local functions too), and every
value's stated type."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, NodeProto, TensorProto, numpy_helper

from . import dtypes
from .contract import TensorType
from .errors import DequantizeError
from .schema import is_dequantize, tensor_type_of

__all__ = [
    "without_large_initializers",
    "shapes_only",
    "large_data_hidden",
    "LARGE_BYTES",
    "subgraphs",
    "iter_graphs",
    "iter_nodes",
    "function_nodes",
    "dequantize_nodes",
    "count_dequantize",
    "has_dequantize",
    "constants",
    "names",
    "FreshNames",
    "value_types",
]


def subgraphs(node: NodeProto) -> Iterator[GraphProto]:
    """The graphs held in a node's attributes (If branches, Loop and Scan bodies)."""
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def iter_graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """``graph`` and every graph nested in its nodes' attributes, outer graphs first."""
    yield graph
    for n in graph.node:
        for g in subgraphs(n):
            yield from iter_graphs(g)


def function_nodes(model: ModelProto) -> Iterator[NodeProto]:
    """Every node of the model-local functions, their subgraphs included."""
    for f in model.functions:
        for n in f.node:
            yield n
            for sg in subgraphs(n):
                for g in iter_graphs(sg):
                    yield from g.node


def iter_nodes(model: ModelProto) -> Iterator[NodeProto]:
    """Every node: the main graph, its subgraphs, and model-local functions with their subgraphs."""
    for g in iter_graphs(model.graph):
        yield from g.node
    yield from function_nodes(model)


def dequantize_nodes(model: ModelProto) -> Iterator[NodeProto]:
    """Every node of our op, wherever it is."""
    return (n for n in iter_nodes(model) if is_dequantize(n))


def has_dequantize(model: ModelProto) -> bool:
    """Whether the model holds our op anywhere: main graph, subgraphs or model-local functions."""
    return next(dequantize_nodes(model), None) is not None


def count_dequantize(model: ModelProto) -> int:
    """How many nodes of our op the model holds, wherever they are."""
    return sum(1 for _ in dequantize_nodes(model))


_CONSTANT_VALUES = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
}
"""A Constant node's other value attributes, and the element type each gives its tensor."""


def constants(graph: GraphProto | onnx.FunctionProto) -> Iterator[tuple[str, TensorProto]]:
    """The constant tensors one graph or function body (not its subgraphs) defines, by the name of the
    value: initializers, then Constant nodes' values (a ``value`` tensor, or ``value_float(s)`` and
    ``value_int(s)``, as ONNX Runtime folds them)."""
    for t in getattr(graph, "initializer", ()):
        yield t.name, t
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output:
            for a in n.attribute:
                if a.name == "value":
                    yield n.output[0], a.t
                elif a.name in _CONSTANT_VALUES:
                    v = onnx.helper.get_attribute_value(a)
                    yield n.output[0], numpy_helper.from_array(np.asarray(v, _CONSTANT_VALUES[a.name]), n.output[0])


def names(model: ModelProto) -> set[str]:
    """Every value and node name in use: graphs, subgraphs and functions."""
    out: set[str] = set()
    for g in iter_graphs(model.graph):
        out.update(v.name for v in (*g.input, *g.output, *g.value_info, *g.initializer))
    for f in model.functions:
        out.update(f.input)
        out.update(f.output)
    for n in iter_nodes(model):
        out.update(n.input)
        out.update(n.output)
        out.add(n.name)
    out.discard("")
    return out


class FreshNames:
    """Names no value or node uses yet, handed out once each: ``base``, else ``base`` + ``sep`` + 2, 3..."""

    def __init__(self, used: set[str]) -> None:
        self.used = used

    @classmethod
    def of(cls, model: ModelProto) -> FreshNames:
        """The names of ``model`` (graphs, subgraphs and functions, see ``names``)."""
        return cls(names(model))

    def fresh(self, base: str, sep: str = "_") -> str:
        name, k = base, 2
        while name in self.used:
            name, k = f"{base}{sep}{k}", k + 1
        self.used.add(name)
        return name

    def release(self, name: str) -> None:
        """Give ``name`` back (a node renamed after all)."""
        self.used.discard(name)


def _elem(data_type: int) -> dtypes.DType | None:
    try:
        return dtypes.parse(data_type)
    except DequantizeError:
        return None


def value_types(
    graph: GraphProto, types: dict[str, TensorType] | None = None, *, subgraphs: bool = True
) -> dict[str, TensorType]:
    """Types stated in ``graph`` and its subgraphs (``subgraphs=False``: in ``graph`` alone, whose own
    values a subgraph's of the same name do not describe): initializers, inputs, outputs, value_info
    and Constant nodes, added to ``types``; a later statement fills only what earlier ones left unknown."""
    types = {} if types is None else types

    def merge(name: str, t: TensorType) -> None:
        old = types.get(name)
        if old is None:
            types[name] = t
        else:
            types[name] = TensorType(old.elem_type or t.elem_type, old.shape if old.shape is not None else t.shape)

    for g in iter_graphs(graph) if subgraphs else (graph,):
        for name, t in constants(g):
            merge(name, TensorType(_elem(t.data_type), tuple(int(d) for d in t.dims)))
        for v in (*g.input, *g.output, *g.value_info):
            merge(v.name, tensor_type_of(v.type))
    return types


LARGE_BYTES = 1 << 20
"""Initializers over this size are left out of the copies that ONNX's checker and shape inference see
(shape computations never read one this large)."""


def _nbytes(t: onnx.TensorProto) -> int:
    """An initializer's size from its declared type and dims (its data is not read)."""
    try:
        item = dtypes.parse(t.data_type).numpy.itemsize
    except DequantizeError:  # outside the table (string, float8, ...): a guess is enough here
        item = 8
    return int(np.prod(t.dims, dtype=np.int64)) * item


def without_large_initializers(model: ModelProto, limit: int | None = None, *, external: bool = False) -> ModelProto:
    """``model`` itself, or a copy whose main-graph initializers over ``limit`` bytes (default
    ``LARGE_BYTES``) are graph inputs of the same type and shape, their data left out: what ONNX's
    checker and shape inference need, without serializing the weights for them. ``external=True``:
    initializers whose data is in an external file are left out too (the checker would look for the
    file relative to the working folder)."""
    limit = LARGE_BYTES if limit is None else limit
    g = model.graph

    def large(t: onnx.TensorProto) -> bool:
        return _nbytes(t) > limit or (external and t.data_location == onnx.TensorProto.EXTERNAL)

    if not any(large(t) for t in g.initializer):
        return model
    typed = ModelProto(ir_version=model.ir_version)
    typed.opset_import.extend(model.opset_import)
    typed.functions.extend(model.functions)
    typed_graph = typed.graph
    typed_graph.name = g.name
    for part in ("node", "input", "output", "value_info", "sparse_initializer"):
        getattr(typed_graph, part).extend(getattr(g, part))
    declared = {vi.name for vi in g.input}
    for t in g.initializer:
        if not large(t):
            typed_graph.initializer.append(t)
        elif t.name not in declared:
            typed_graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return typed


def shapes_only(model: ModelProto, limit: int) -> ModelProto:
    """A copy of ``model`` for shape inference alone, without the data of its tensors over ``limit``
    bytes (or in external files): the main graph's initializers made typed graph inputs
    (``without_large_initializers``), the other graphs' initializers and the Constant values of every
    graph and local function kept with their type and dims only; sparse initializers dropped."""
    copy = without_large_initializers(model, limit, external=True)
    if copy is model:
        copy = ModelProto()
        copy.CopyFrom(model)

    def bare(t: onnx.TensorProto) -> None:
        if _nbytes(t) > limit or t.data_location == onnx.TensorProto.EXTERNAL:
            t.CopyFrom(onnx.TensorProto(name=t.name, data_type=t.data_type, dims=t.dims))

    tops = [copy.graph, *(sub for f in copy.functions for n in f.node for sub in subgraphs(n))]
    graphs = [g for top in tops for g in iter_graphs(top)]
    for g in graphs:
        for t in g.initializer:
            bare(t)
        del g.sparse_initializer[:]
    for node in [*(n for g in graphs for n in g.node), *(n for f in copy.functions for n in f.node)]:
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            continue
        for a in node.attribute:
            if a.name == "value":
                bare(a.t)
            elif a.name == "sparse_value":  # a dense tensor of its type and dims, no data
                dense = onnx.TensorProto(data_type=a.sparse_tensor.values.data_type, dims=a.sparse_tensor.dims)
                a.CopyFrom(onnx.helper.make_attribute("value", dense))
            elif a.name in ("value_floats", "value_ints") and 8 * max(len(a.floats), len(a.ints)) > limit:
                kind = onnx.TensorProto.FLOAT if a.name == "value_floats" else onnx.TensorProto.INT64
                size = len(a.floats) if a.name == "value_floats" else len(a.ints)
                a.CopyFrom(onnx.helper.make_attribute("value", onnx.TensorProto(data_type=kind, dims=[size])))
    return copy


@contextmanager
def large_data_hidden(model: ModelProto, limit: int | None = None) -> Iterator[dict[tuple[int, str], bytes]]:
    """Within the block, the raw data of every initializer over ``limit`` bytes (default ``LARGE_BYTES``;
    every graph) is cleared, for ONNX's C++ passes that copy the model; yields that data by (graph index
    in ``iter_graphs`` order, name), to put into their result; the data is back in ``model`` after."""
    limit = LARGE_BYTES if limit is None else limit
    stash = []
    for gi, g in enumerate(iter_graphs(model.graph)):
        for t in g.initializer:
            if t.raw_data and _nbytes(t) > limit:
                stash.append((gi, t, t.raw_data))
                t.ClearField("raw_data")
    try:
        yield {(gi, t.name): raw for gi, t, raw in stash}
    finally:
        for _, t, raw in stash:
            t.raw_data = raw
