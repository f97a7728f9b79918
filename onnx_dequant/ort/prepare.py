"""The session's private copy of a model: every Dequantize node either bound to a kernel or lowered.

``prepare(model)`` copies the model (the caller's model and file are never touched), checks every
node against the contract with the element types and shapes that ONNX shape inference finds, lowers
the nodes no kernel can carry (f16 / bf16 output, 4-bit input) with ``onnx_dequant.lower(only=...)``,
and rewrites the others into kernel nodes: op name per type pair, ``axes`` bridged to the string
attribute ``odq_axes``, and one extra graph input, the run token, fed to every kernel node. The
extension copies every op input at every call, so a main-graph node takes from the session instead
(``Prepared.params``) a scale and zero point that are initializers the caller cannot override (held
by the session) or graph inputs (read from the caller's feed), and its ``x`` too where that is either
(a constant weight, say); ``read_feeds`` (``Prepared.fed``: the graph inputs so read). A main-graph
node's output whose shape is known before a run (such an ``x``'s, or where another node computes ``x``,
the shape the model states for it whole, else the one shape inference finds for each run's input
shapes: ``Prepared.inferred``) is one a run can bind to an array the kernel computes into
(``Prepared.placeable``) where it is a graph output, or where it is an activation's (``x`` read from
the feed or computed) that another node reads; such an output that is not a graph output is made one
(``Prepared.hidden``, which the session does not show, and refuses as ONNX Runtime refuses an inner
value's name). Nothing is renamed: subgraphs and local functions may use the same name for values of
their own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.inliner
import onnx.shape_inference
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from .. import dtypes, modelio
from ..contract import TensorType
from ..errors import DequantizeError
from ..graphs import (
    FreshNames,
    dequantize_nodes,
    function_nodes,
    iter_nodes,
    shapes_only,
    value_types,
    without_large_initializers,
)
from ..schema import OPSET_VERSION, check_node, is_dequantize, node_attributes
from .kernels import KERNEL_DOMAIN, kernel_carries, kernel_op_type, kernel_reads
from .runs import Fed, NodeInputs, Params, Source

__all__ = ["Prepared", "prepare", "load_copy", "static_shapes"]

TOKEN_INPUT = "onnx_dequant.run_token"
"""Name (made unique per model) of the hidden graph input that carries the run token."""


@dataclass
class Prepared:
    """The rewritten copy and what happened to each Dequantize node (names as the caller knows them)."""

    model: ModelProto
    kernel_nodes: tuple[str, ...] = ()
    lowered: dict[str, str] = field(default_factory=dict)  # node name -> why it was lowered
    token_input: str | None = None
    path: str | None = None
    params: Params = field(default_factory=dict)  # node name -> the inputs the session hands its kernel
    fed: dict[str, np.dtype] = field(default_factory=dict)  # graph inputs kernels read from the feed -> dtype
    # graph outputs a kernel node gives, whose shape (x's) is known before a run -> (node name, dtype, the
    # shape the model states where another node computes x; None: x's as the session reads it, or inferred)
    placeable: dict[str, tuple[str, np.dtype, tuple[int, ...] | None]] = field(default_factory=dict)
    inner: tuple[str, ...] = ()  # those other nodes read (activations'): a run may bind them, asked for or not
    # every graph output a main-graph kernel node gives -> its node: a caller may bind it to an array
    kernel_outputs: dict[str, str] = field(default_factory=dict)
    hidden: tuple[str, ...] = ()  # those made graph outputs here, so a run can bind them (not the caller's)
    # placeable outputs whose x another node computes, of a shape the model leaves symbolic -> x's name:
    # its shape is inferred for each run's input shapes, from ``shapes_model`` (large constants' data left out)
    inferred: dict[str, str] = field(default_factory=dict)
    shapes_model: ModelProto | None = None


def load_copy(model: Any) -> tuple[ModelProto, str | None]:
    """A private copy of ``model`` (a ModelProto, a path, or serialized bytes) and its path, if any."""
    if isinstance(model, ModelProto):
        copy = ModelProto()
        copy.CopyFrom(model)
        return copy, None
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            return onnx.load_from_string(bytes(model)), None
        except Exception as e:  # noqa: BLE001 - protobuf raises several types
            raise DequantizeError(f"not a serialized ONNX model: {e}") from None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not Path(path).is_file():
            raise DequantizeError("no such model file", path=path)
        return modelio.load(path), path
    raise DequantizeError(f"model must be an onnx.ModelProto, a path or bytes, got {type(model).__name__}")


def _name_nodes(model: ModelProto) -> None:
    """Give every Dequantize node a unique name (unnamed ones: ``Dequantize->OUTPUT``), for messages."""
    seen = FreshNames(set())
    for node in dequantize_nodes(model):
        node.name = seen.fresh(node.name or f"Dequantize->{node.output[0] if node.output else '?'}", sep="#")


def _infer_shapes(model: ModelProto, path: str | None) -> ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(without_large_initializers(model), strict_mode=False)
    except DequantizeError as e:
        raise e.at(path=path) from None
    except Exception:  # noqa: BLE001 - a standard op's inference or a huge model: check with what we have
        return model


# ---- the pass ----


def _route(node: NodeProto, types: dict[str, TensorType], path: str | None) -> tuple[tuple[Any, Any] | None, str]:
    """``((input type, output type), "")`` for a node a kernel can run, ``(None, reason)`` for one to lower."""
    try:
        in_type, out = check_node(node, types)
    except DequantizeError as e:
        raise e.at(path=path) from None
    if not kernel_carries(in_type, out.elem_type):
        return None, f"{in_type.name} -> {out.elem_type.name}: onnxruntime-extensions cannot carry this type pair"
    return (in_type, out.elem_type), ""


def _constants(model: ModelProto) -> dict[str, TensorProto]:
    """The main graph's initializers that hold their data and that no graph input overrides."""
    inputs = {i.name for i in model.graph.input}
    return {
        t.name: t for t in model.graph.initializer if t.name not in inputs and t.data_location != TensorProto.EXTERNAL
    }


def _fed_inputs(model: ModelProto) -> dict[str, np.dtype]:
    """The main graph's inputs that no initializer gives a default and whose element type a kernel can
    read (``kernel_reads``), with that type's NumPy dtype."""
    defaults = {t.name for t in model.graph.initializer}
    found = {}
    for i in model.graph.input:
        elem = i.type.tensor_type.elem_type if i.type.HasField("tensor_type") else 0
        if i.name not in defaults and kernel_reads(elem):
            found[i.name] = np.dtype(dtypes.parse(elem).numpy)
    return found


def _array(t: TensorProto) -> np.ndarray:
    """The initializer's data as a read-only contiguous array."""
    a = numpy_helper.to_array(t)
    a = a if a.flags.c_contiguous and a.flags.owndata else a.copy(order="C")  # not ascontiguousarray: 0-d stays 0-d
    a.flags.writeable = False
    return a


SKELETON_BYTES = 4096
"""Tensors of at most this many bytes keep their data in ``Prepared.shapes_model`` (``graphs.shapes_only``):
the values a Reshape's or an Expand's shape is read from."""


def static_shapes(
    skeleton: ModelProto, inputs: dict[str, tuple[int, ...]], names: set[str]
) -> dict[str, tuple[int, ...]]:
    """The shapes of the values ``names`` that ONNX shape inference finds whole, every dim a size, where
    the graph inputs have the shapes ``inputs`` (the others as the model states them); {} where it fails."""
    model = ModelProto()
    model.CopyFrom(skeleton)
    for i in model.graph.input:
        shape = inputs.get(i.name)
        if shape is None or not i.type.HasField("tensor_type"):
            continue
        i.type.tensor_type.shape.Clear()
        for d in shape:
            i.type.tensor_type.shape.dim.add().dim_value = d
    try:
        done = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - not bound then: ONNX Runtime's own output
        return {}
    found = {}
    for v in (*done.graph.value_info, *done.graph.output):
        if v.name in names and v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
            dims = v.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
                found[v.name] = tuple(int(d.dim_value) for d in dims)
    return found


def _static_shape(t: Any) -> tuple[int, ...] | None:
    """A type's shape where every dim is a size, else None."""
    if t is None or t.shape is None or not all(isinstance(d, int) and not isinstance(d, bool) for d in t.shape):
        return None
    return tuple(t.shape)


def _drop_unused(model: ModelProto, names: set[str]) -> None:
    """Remove the initializers among ``names`` that no node (subgraphs included) or output reads."""
    used = {i for n in iter_nodes(model) for i in n.input} | {o.name for o in model.graph.output}
    keep = [t for t in model.graph.initializer if t.name not in names or t.name in used]
    if len(keep) < len(model.graph.initializer):
        del model.graph.initializer[:]
        model.graph.initializer.extend(keep)


def _lower_nodes(model: ModelProto, names: set[str], path: str | None, opset: int | None) -> ModelProto:
    try:
        from ..lowering import lower
    except ImportError as e:  # the lowering pass is not part of this build
        raise DequantizeError(
            f"nodes {sorted(names)} need lowering (no kernel can carry their types), but "
            f"onnx_dequant.lower is unavailable: {e}",
            path=path,
        ) from None
    try:
        return lower(model, opset=opset, target="ort", only=lambda n: n.name in names)
    except DequantizeError as e:
        raise DequantizeError(
            f"{e.rule} (lowering {', '.join(sorted(names))}: no kernel can carry their types)",
            node=e.node,
            path=e.path or path,
        ) from None


def prepare(model: Any, *, opset: int | None = None, read_feeds: bool = True) -> Prepared:
    """The model, copied and rewritten so ONNX Runtime runs every Dequantize node (see module doc).

    ``opset``: the default-domain opset to convert to when some nodes must be lowered (None: keep).
    ``read_feeds``: kernels read the graph inputs they take from the caller's feed (not op inputs,
    which the extension copies); False: every input but a held constant goes through ONNX Runtime.
    """
    copy, path = load_copy(model)
    if any(is_dequantize(n) for n in function_nodes(copy)):  # the kernels run in the main graph only
        try:
            copy = onnx.inliner.inline_local_functions(copy)
        except Exception as e:  # noqa: BLE001
            raise DequantizeError(f"cannot inline the model's local functions: {e}", path=path) from None
    _name_nodes(copy)
    nodes = list(dequantize_nodes(copy))
    if not nodes:
        return Prepared(copy, path=path)

    inferred = _infer_shapes(copy, path)
    types = value_types(inferred.graph)
    # a main-graph node's values are the main graph's own (a subgraph may name a value of its own alike)
    main_types = value_types(inferred.graph, subgraphs=False)
    main_ids = {id(n) for n in copy.graph.node}
    routes: dict[str, tuple[Any, Any]] = {}
    lowered: dict[str, str] = {}
    for node in nodes:
        pair, reason = _route(node, main_types if id(node) in main_ids else types, path)
        if pair is None:
            lowered[node.name] = reason
        else:
            routes[node.name] = pair

    if lowered:
        copy = _lower_nodes(copy, set(lowered), path, opset)
    if not routes:
        return Prepared(copy, (), lowered, None, path)

    names = FreshNames.of(copy)
    skeleton = shapes_only(copy, SKELETON_BYTES)  # before the kernels' rewriting: inferred through the op's schema
    token = names.fresh(TOKEN_INPUT, sep=".")
    done = set()
    shape_nodes: dict[int, NodeProto] = {}  # kernel node id -> the Shape node its x's shape comes from
    params: Params = {}
    arrays: dict[str, np.ndarray] = {}  # the initializers now held by the session, by name
    constants = _constants(copy)
    fed_inputs = _fed_inputs(copy) if read_feeds else {}
    fed: dict[str, np.dtype] = {}
    in_main = {id(n) for n in copy.graph.node}
    graph_outputs = {o.name for o in copy.graph.output}
    read = {i for n in iter_nodes(copy) for i in n.input}  # subgraphs' nodes read outer values too
    placeable: dict[str, tuple[str, np.dtype, tuple[int, ...] | None]] = {}
    inferred: dict[str, str] = {}
    kernel_outputs: dict[str, str] = {}
    inner: list[str] = []
    hidden: list[str] = []

    def source(name: str) -> Source:
        if name in fed_inputs:
            fed[name] = fed_inputs[name]
            return Fed(name)
        if name not in arrays:  # one array per initializer, however many nodes read it
            arrays[name] = _array(constants[name])
        return arrays[name]

    for node in dequantize_nodes(copy):
        pair = routes.get(node.name)
        if pair is None:
            raise DequantizeError("the lowering pass left a node it was asked to lower", node=node.name, path=path)
        axes, _ = node_attributes(node)
        inputs = [i for i in node.input if i]
        takes = "all" if len(inputs) == 3 else "nozp"
        if id(node) in in_main and all(i in constants or i in fed_inputs for i in inputs[1:]):
            x = source(inputs[0]) if inputs[0] in fed_inputs or inputs[0] in constants else None
            zp = source(inputs[2]) if len(inputs) == 3 else None
            params[node.name] = NodeInputs(x, source(inputs[1]), zp)  # type: ignore[arg-type]
            if x is None:
                takes, inputs = "x", inputs[:1]
            else:  # the op takes x's shape (a few int64s): the kernel knows its output's shape even in error
                takes, shape = "shape", names.fresh(f"{node.name}.x_shape", sep=".")
                if isinstance(x, Fed):
                    shape_nodes[id(node)] = helper.make_node("Shape", [inputs[0]], [shape], name=shape)
                else:
                    copy.graph.initializer.append(numpy_helper.from_array(np.array(x.shape, np.int64), shape))
                inputs = [shape]
        if id(node) in in_main:
            # the output's shape before a run: x's where the session reads x (fed or held); else a guess,
            # the shape the model states for x whole or, where it does not, the one inferred for each run's
            # input shapes (a run whose kernel then gives another is stopped and made again unbound)
            x_read = node.name in params and params[node.name].x is not None
            stated = None if x_read else _static_shape(main_types.get(node.input[0]))
            y, out_type = node.output[0], dtypes.parse(pair[1])
            # an activation's: x fed or computed (a held weight's output stays ORT's to reuse)
            activation = isinstance(params[node.name].x, Fed) if x_read else node.input[0] not in constants
            read_on = y in read and activation
            if y in graph_outputs or read_on:
                placeable[y] = (node.name, np.dtype(out_type.numpy), stated)
                if not x_read and stated is None:
                    inferred[y] = node.input[0]
            if read_on:
                inner.append(y)
                if y not in graph_outputs:  # another node's input only: made a graph output too
                    copy.graph.output.append(helper.make_tensor_value_info(y, out_type.onnx, None))
                    hidden.append(y)
        if id(node) in in_main and node.output[0] in graph_outputs:
            kernel_outputs[node.output[0]] = node.name
        op = kernel_op_type(*pair, takes)
        assert op is not None  # the route checked the type pair
        inputs.append(token)
        node.op_type = op
        node.domain = KERNEL_DOMAIN
        del node.input[:]
        node.input.extend(inputs)
        del node.attribute[:]
        node.attribute.extend(
            [helper.make_attribute("odq_axes", ",".join(map(str, axes))), helper.make_attribute("odq_node", node.name)]
        )
        done.add(node.name)
    missing = set(routes) - done
    if missing:
        raise DequantizeError(f"the lowering pass dropped nodes {sorted(missing)}", path=path)
    if shape_nodes:
        ordered = [m for n in copy.graph.node for m in ((shape_nodes[id(n)], n) if id(n) in shape_nodes else (n,))]
        del copy.graph.node[:]
        copy.graph.node.extend(ordered)
    _drop_unused(copy, set(arrays))

    copy.graph.input.append(helper.make_tensor_value_info(token, TensorProto.INT64, []))
    if not any(op.domain == KERNEL_DOMAIN for op in copy.opset_import):
        copy.opset_import.append(helper.make_opsetid(KERNEL_DOMAIN, OPSET_VERSION))
    return Prepared(
        copy,
        tuple(routes),
        lowered,
        token,
        path,
        params,
        fed,
        placeable,
        tuple(inner),
        kernel_outputs,
        tuple(hidden),
        inferred,
        skeleton if inferred else None,
    )
