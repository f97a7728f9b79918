"""The lowering pass over a whole model: every Dequantize node of ``DOMAIN`` in the main graph, in
nested subgraphs (If/Loop/Scan) and in model-local functions becomes standard ONNX (see ``lowering``).

Nothing else changes: names, metadata, doc strings and value_info stay; the default-domain opset stays
unless ``opset=`` asks for another (then ``onnx.version_converter`` converts the rest of the model);
our domain's opset import goes when no node needs it any more; the IR version changes only when the
opset imports need a newer one. Every such model-level change is listed (``changes=``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from .. import dtypes, modelio
from ..contract import Shape, TensorType
from ..errors import DequantizeError
from ..fileio import atomic_path
from ..graphs import constants, iter_graphs, iter_nodes, names, subgraphs, value_types, without_large_initializers
from ..opsets import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, check_opset, default_opset, set_default_opset
from ..schema import DOMAIN, check_node, is_dequantize, node_attributes, tensor_type_of
from .planner import check_target, plan
from .strategies.base import Emitter, NodeInfo

__all__ = [
    "lower",
    "lower_file",
    "lower_model",
    "default_opset",
    "MIN_OPSET",
    "MAX_OPSET",
    "DEFAULT_OPSET",
    "LoweredNode",
]

WEIGHT_CONSUMERS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose"})

WEIGHTS = ("quantized", "float")
"""What ``weights=`` does with a constant weight's dequantization: "quantized" keeps DequantizeLinear (ONNX
Runtime fuses it with the MatMul/Conv: fast, not exact at ORT's default MatMulNBits accuracy level);
"float" folds it into a float initializer computed by the exact reference (exact everywhere, 4x bytes)."""


def check_weights(weights: str) -> None:
    """``DequantizeError`` unless ``weights`` is one of ``WEIGHTS``."""
    if weights not in WEIGHTS:
        raise DequantizeError(f"Unknown weights mode '{weights}' (expected one of: {', '.join(WEIGHTS)})")


@dataclass
class LoweredNode:
    """One lowered node: where it was, and the strategy chosen."""

    node: str
    graph: str
    strategy: str
    cost: float
    refused: dict[str, str] = field(default_factory=dict)
    weight: bool = False  # a constant weight feeding MatMul/Gemm/Conv


# ---- types and shapes ----


def _strip_big(model: ModelProto) -> list[tuple[int, TensorProto, bytes]]:
    """Clear the data of initializers over 4 KiB (for ONNX's C++ passes, which copy the model); returns
    (graph index in ``iter_graphs`` order, tensor, data) to put it back."""
    stash = []
    for gi, g in enumerate(iter_graphs(model.graph)):
        for t in g.initializer:
            if len(t.raw_data) > 4096:
                stash.append((gi, t, t.raw_data))
                t.ClearField("raw_data")
    return stash


def _restore(stash: list[tuple[int, TensorProto, bytes]]) -> None:
    for _, t, raw in stash:
        t.raw_data = raw


def _infer(model: ModelProto) -> ModelProto:
    """Shape inference on the model without its big tensors' data."""
    try:
        return onnx.shape_inference.infer_shapes(without_large_initializers(model), check_type=False, strict_mode=False)
    except Exception:  # noqa: BLE001 - inference is best effort; the types we have still count
        return model


def _graph_types(model: ModelProto) -> dict[str, TensorType]:
    types: dict[str, TensorType] = {}
    value_types(model.graph, types)
    value_types(_infer(model).graph, types)
    return types


def _body_model(
    fn: onnx.FunctionProto, inputs: list[onnx.ValueInfoProto] | None = None, model: ModelProto | None = None
) -> ModelProto:
    """A function body as a model, for ONNX's passes: ``inputs`` (default: the formal inputs, untyped),
    the function's opsets, and ``model``'s functions and IR version when given."""
    if inputs is None:
        inputs = [helper.make_value_info(i, onnx.TypeProto()) for i in fn.input]
    outputs = [helper.make_value_info(o, onnx.TypeProto()) for o in fn.output]
    g = helper.make_graph(list(fn.node), "body", inputs, outputs)
    if model is None:
        return helper.make_model(g, opset_imports=list(fn.opset_import))
    m = helper.make_model(
        g, opset_imports=list(fn.opset_import) or list(model.opset_import), functions=list(model.functions)
    )
    m.ir_version = model.ir_version
    return m


def _common_shape(a: Shape, b: Shape) -> Shape:
    """The dims two shapes agree on (the others unknown); None when the ranks differ or one is unknown."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def _function_types(model: ModelProto, fn: onnx.FunctionProto, outer: dict[str, TensorType]) -> dict:
    """Types inside a function body, inferred from what every call site gives its inputs: the element
    type they agree on (a ``DequantizeError`` when they differ) and the dims they agree on, so one body
    serves every call."""
    formal: dict[str, TensorType] = {}
    for call in iter_nodes(model):
        if call.op_type != fn.name or call.domain != fn.domain:
            continue
        for name, actual in zip(fn.input, call.input):
            t = outer.get(actual, TensorType(None, None))
            old = formal.get(name)
            if old is None:
                formal[name] = t
                continue
            if old.elem_type is not None and t.elem_type is not None and old.elem_type is not t.elem_type:
                raise DequantizeError(
                    f"Function '{fn.name}' is called with input '{name}' of types {old.elem_type.name} and "
                    f"{t.elem_type.name}: one lowered body cannot serve both"
                )
            formal[name] = TensorType(old.elem_type or t.elem_type, _common_shape(old.shape, t.shape))
    types = {vi.name: tensor_type_of(vi.type) for vi in getattr(fn, "value_info", [])}
    ins = [
        helper.make_tensor_value_info(n, t.elem_type.onnx, None if t.shape is None else list(t.shape))
        for n, t in formal.items()
        if t.elem_type is not None
    ]
    m = _body_model(fn, ins, model)
    value_types(m.graph, types)
    try:
        value_types(onnx.shape_inference.infer_shapes(m, strict_mode=False).graph, types)
    except Exception:  # noqa: BLE001 - inference is best effort; the types we have still count
        pass
    return types


# ---- constants ----


class _Constants:
    """Constant tensors visible in a graph (initializers of it and enclosing graphs, Constant nodes)."""

    def __init__(self, base_dir: str | None) -> None:
        self.base_dir = base_dir
        self.tensors: dict[str, TensorProto] = {}

    def scope(self, graph: Any) -> _Constants:
        inner = _Constants(self.base_dir)
        inner.tensors = dict(self.tensors)
        inner.tensors.update(constants(graph))
        return inner

    def is_const(self, name: str | None) -> bool:
        return bool(name) and name in self.tensors

    def value(self, name: str | None, max_bytes: int = 1 << 20) -> np.ndarray | None:
        """The tensor's value if it is a constant of at most ``max_bytes`` that can be read; else None."""
        t = self.tensors.get(name or "")
        if t is None:
            return None
        try:
            if t.data_location == TensorProto.EXTERNAL:
                info = modelio.external_info(t)
                if self.base_dir is None or int(info.get("length", max_bytes + 1)) > max_bytes:
                    return None
                return modelio.read_external(t, self.base_dir)
            return numpy_helper.to_array(t)
        except Exception:  # noqa: BLE001 - unreadable constants are treated as unknown
            return None


# ---- the pass ----


@dataclass
class _Context:
    opset: int
    target: str
    only: Callable[[NodeProto], bool] | None
    wrap_int32: bool
    weights: str
    strategies: Any
    names: set[str]
    report: list[LoweredNode]


def _node_info(
    node: NodeProto,
    ctx: _Context,
    types: dict,
    consts: _Constants,
    consumers: dict[str, list[str]],
    outputs: set[str],
    top: bool,
) -> NodeInfo:
    in_type, out = check_node(node, types)  # DequantizeError naming the node and the rule
    x, scale = node.input[0], node.input[1]
    zp = node.input[2] if len(node.input) > 2 and node.input[2] else None
    axes, _ = node_attributes(node)
    cons = consumers.get(node.output[0], [])
    zp_zero = False
    if zp is not None:
        v = consts.value(zp)
        zp_zero = v is not None and not np.any(v.astype(np.int64) if v.dtype.kind in "iub" else v != 0)
    return NodeInfo(
        node=node,
        x=x,
        scale=scale,
        zero_point=zp,
        output=node.output[0],
        axes=axes,
        in_type=in_type,
        out_type=dtypes.parse(out.elem_type),
        shape=out.shape,
        opset=ctx.opset,
        target=ctx.target,
        graph_output=node.output[0] in outputs,
        model_output=top and node.output[0] in outputs,
        weight=consts.is_const(x) and any(c in WEIGHT_CONSUMERS for c in cons),
        consumers=tuple(cons),
        zp_zero=zp_zero,
        scale_const=consts.is_const(scale),
        zp_const=consts.is_const(zp),
        int32_wrap=ctx.wrap_int32,
        fold=ctx.weights == "float" and consts.is_const(x),
        read=lambda name: consts.value(name, max_bytes=1 << 62),
    )


def _consumers(nodes: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in nodes:
        for i in n.input:
            out.setdefault(i, []).append(n.op_type)
        for sg in subgraphs(n):  # outer-scope names read inside subgraphs
            for g in iter_graphs(sg):
                for m in g.node:
                    for i in m.input:
                        out.setdefault(i, []).append("<subgraph>")
    return out


def _rewrite_nodes(
    owner: Any, ctx: _Context, types: dict, consts: _Constants, *, function: bool, label: str, top: bool = False
) -> None:
    """Lower the Dequantize nodes of a graph or function body (``owner``; ``top``: the main graph),
    recursing into subgraphs."""
    consts = consts.scope(owner)
    for n in owner.node:
        for sg in subgraphs(n):
            _rewrite_nodes(sg, ctx, types, consts, function=False, label=f"{label}/{n.name or n.op_type}")
    if not any(is_dequantize(n) for n in owner.node):
        return
    outputs = set(owner.output) if function else {v.name for v in owner.output}
    consumers = _consumers(owner.node)
    new_nodes: list[NodeProto] = []
    new_inits: list[TensorProto] = []
    read_by_lowered: set[str] = set()
    for n in owner.node:
        if not is_dequantize(n) or (ctx.only is not None and not ctx.only(n)):
            new_nodes.append(n)
            continue
        read_by_lowered.update(n.input)
        info = _node_info(n, ctx, types, consts, consumers, outputs, top)
        chosen = plan(info, ctx.strategies)
        em = Emitter(n.name or info.output, ctx.names, function=function, constants=consts.tensors)
        chosen.strategy.emit(info, em)
        if em.nodes:  # a folded constant is an initializer named as the output, with no node
            last = em.nodes[-1]
            assert list(last.output) == [info.output]
            if n.name:
                ctx.names.discard(last.name)
                last.name = n.name
            if n.doc_string:
                last.doc_string = n.doc_string
        new_nodes.extend(em.nodes)
        new_inits.extend(em.initializers)
        ctx.report.append(
            LoweredNode(info.name, label, chosen.strategy.name, chosen.cost, chosen.refused, weight=info.weight)
        )
    del owner.node[:]
    owner.node.extend(new_nodes)
    if new_inits:
        owner.initializer.extend(new_inits)
    if not function:
        _drop_orphans(owner, read_by_lowered)


def _drop_orphans(graph: Any, candidates: set[str]) -> None:
    """Remove the initializers among ``candidates`` that no node (subgraphs included) and no graph output
    reads any more: scales and zero points the lowering replaced with reshaped copies. Initializers that
    are also graph inputs stay (they are part of the model's interface)."""
    inputs = {v.name for v in graph.input}
    candidates = {c for c in candidates if c and c not in inputs}
    if not candidates:
        return
    read = {v.name for v in graph.output}
    for g in iter_graphs(graph):
        for n in g.node:
            read.update(n.input)
    # deleted in place: rebuilding the list would copy every kept initializer, weights included
    for i in reversed(range(len(graph.initializer))):
        name = graph.initializer[i].name
        if name in candidates and name not in read:
            del graph.initializer[i]


_HIDDEN = DOMAIN + ".hidden"
"""A domain no schema is registered for: our nodes go there while ``onnx.version_converter`` runs, so its
shape inference does not run the contract on inputs whose types only the call site knows."""


def _rename_domain(nodes: Any, opsets: Any, old: str, new: str) -> None:
    for n in nodes:
        if n.domain == old:
            n.domain = new
    for o in opsets:
        if o.domain == old:
            o.domain = new


def _convert_version(model: ModelProto, opset: int) -> ModelProto:
    """``onnx.version_converter.convert_version`` with our nodes hidden from it (``model`` unchanged)."""
    _rename_domain(iter_nodes(model), model.opset_import, DOMAIN, _HIDDEN)
    try:
        converted = onnx.version_converter.convert_version(model, opset)
    finally:
        _rename_domain(iter_nodes(model), model.opset_import, _HIDDEN, DOMAIN)
    _rename_domain(iter_nodes(converted), converted.opset_import, _HIDDEN, DOMAIN)
    return converted


def _convert_function(fn: onnx.FunctionProto, model: ModelProto, opset: int) -> None:
    """Convert a model-local function body's default-domain ops to ``opset`` (via a temporary model)."""
    old = default_opset(fn.opset_import)
    if old is None:
        return  # no ONNX ops: nothing to convert
    if old == opset or not any(n.domain in ("", "ai.onnx") for n in fn.node):
        set_default_opset(fn.opset_import, opset)
        return
    try:
        m2 = _convert_version(_body_model(fn), opset)
    except Exception as e:  # noqa: BLE001 - the converter raises many types
        raise DequantizeError(f"Cannot convert function '{fn.name}' from opset {old} to {opset}: {e}") from None
    del fn.node[:]
    fn.node.extend(m2.graph.node)
    set_default_opset(fn.opset_import, opset)


def _convert(model: ModelProto, opset: int) -> ModelProto:
    """``model`` converted to default-domain ``opset``, keeping value_info, functions and metadata."""
    old = default_opset(model.opset_import)
    if old == opset:
        return model
    if old is None:
        set_default_opset(model.opset_import, opset)
        return model
    stash = _strip_big(model)
    value_info = list(model.graph.value_info)
    functions = list(model.functions)
    try:
        converted = _convert_version(model, opset)
    except Exception as e:  # noqa: BLE001 - the converter raises many types
        raise DequantizeError(f"Cannot convert the model from opset {old} to {opset}: {e}") from None
    finally:
        _restore(stash)
    # the converter copies the model: put the big tensors' data back (by graph and name) and what it drops
    by_name = {(gi, t.name): raw for gi, t, raw in stash}
    for gi, g in enumerate(iter_graphs(converted.graph)):
        for t in g.initializer:
            raw = by_name.get((gi, t.name))
            if raw is not None and not t.raw_data and t.data_location != TensorProto.EXTERNAL:
                t.raw_data = raw
    del converted.graph.value_info[:]
    converted.graph.value_info.extend(value_info)
    del converted.functions[:]
    converted.functions.extend(functions)
    for fn in converted.functions:
        _convert_function(fn, converted, opset)
    return converted


def _align_function_opset(fn: onnx.FunctionProto, model_opset: int) -> None:
    """Give a function the model's default-domain opset, which its lowered nodes use. A function without
    ONNX ops gets it (nothing changes meaning); one whose ONNX ops use another opset is refused, since
    the ops emitted into it could then not match both (``opset=`` converts the functions too)."""
    own = default_opset(fn.opset_import)
    has_onnx = any(n.domain in ("", "ai.onnx") for n in fn.node)
    if own is not None and own != model_opset and has_onnx:
        raise DequantizeError(
            f"Function '{fn.name}' imports opset {own} but the model {model_opset}: pass opset= (or --opset) "
            "to convert both to one opset"
        )
    set_default_opset(fn.opset_import, model_opset)


def _cleanup_opsets(model: ModelProto, changes: list[str]) -> None:
    """Drop our domain's import (model and functions) where no node needs it any more."""
    left = any(n.domain == DOMAIN for n in iter_nodes(model))
    if not left and any(o.domain == DOMAIN for o in model.opset_import):
        changes.append(f"removed the '{DOMAIN}' opset import (no node uses it any more)")
        keep = [o for o in model.opset_import if o.domain != DOMAIN]
        del model.opset_import[:]
        model.opset_import.extend(keep)
    for fn in model.functions:
        if not any(n.domain == DOMAIN for n in fn.node):
            keep = [o for o in fn.opset_import if o.domain != DOMAIN]
            del fn.opset_import[:]
            fn.opset_import.extend(keep)


def lower_model(
    model: ModelProto,
    *,
    opset: int | None = None,
    target: str = "ort",
    only: Callable[[NodeProto], bool] | None = None,
    wrap_int32: bool = False,
    base_dir: str | os.PathLike[str] | None = None,
    report: list[LoweredNode] | None = None,
    strategies: Any = None,
    weights: str = "quantized",
    changes: list[str] | None = None,
) -> ModelProto:
    """Lower ``model``'s Dequantize nodes (those where ``only(node)`` is true; all when ``only`` is None).

    Works on ``model`` itself (callers copy) and returns the result, which is ``model`` unless the opset
    was converted. ``base_dir`` is the model's folder, for reading small external constants.
    ``wrap_int32`` allows ORT's int32 semantics (wrapping subtraction) for speed. ``report`` (a list)
    receives one ``LoweredNode`` per lowered node. ``strategies`` (names) limits the forms used.
    ``weights`` (of ``WEIGHTS``) keeps constant weights quantized or folds them to float. ``changes`` (a
    list) receives a line per model-level change: opset, IR version, opset imports.
    """
    check_target(target)
    check_weights(weights)
    if opset is not None:
        check_opset(opset)
    changes = changes if changes is not None else []
    todo = [n for n in iter_nodes(model) if is_dequantize(n) and (only is None or only(n))]
    before = default_opset(model.opset_import)
    if opset is not None and opset != before:
        model = _convert(model, opset)
        changes.append(f"converted the default-domain opset {before} to {opset} (opset= / --opset)")
    current = default_opset(model.opset_import)
    if todo:
        if current is None:
            current = DEFAULT_OPSET
            set_default_opset(model.opset_import, current)
            changes.append(f"added the default-domain opset import {current} (the lowered nodes need one)")
        elif not MIN_OPSET <= current <= MAX_OPSET:
            raise DequantizeError(
                f"The model's opset {current} is outside {MIN_OPSET} to {MAX_OPSET}: pass opset= (or --opset) "
                "to convert it"
            )
    if changes:  # only a changed opset import can need a newer IR version
        min_ir = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        if model.ir_version < min_ir:
            changes.append(f"IR version {model.ir_version} -> {min_ir} (the new opset imports need it)")
            model.ir_version = min_ir
    if not todo:
        return model
    ctx = _Context(
        current, target, only, wrap_int32, weights, strategies, names(model), report if report is not None else []
    )
    types = _graph_types(model)
    consts = _Constants(None if base_dir is None else os.fspath(base_dir))
    _rewrite_nodes(model.graph, ctx, types, consts, function=False, label=model.graph.name or "main", top=True)
    for fn in model.functions:
        if any(is_dequantize(n) for n in fn.node) or any(True for n in fn.node for _ in subgraphs(n)):
            ftypes = dict(types)
            ftypes.update(_function_types(model, fn, types))
            _align_function_opset(fn, current)
            _rewrite_nodes(fn, ctx, ftypes, _Constants(consts.base_dir), function=True, label=f"function {fn.name}")
    _cleanup_opsets(model, changes)
    return model


def lower(
    model: ModelProto | str | os.PathLike[str],
    *,
    opset: int | None = None,
    target: str = "ort",
    only: Callable[[NodeProto], bool] | None = None,
    wrap_int32: bool = False,
    weights: str = "quantized",
) -> ModelProto:
    """The model with every Dequantize node (or those where ``only(node)`` is true) in standard ONNX.

    ``model`` is a ``ModelProto`` (not modified) or a path (external data is loaded). ``opset=None``
    keeps the model's default-domain opset; otherwise the model is converted to ``opset`` (13 to 27).
    ``target``: "ort" (the fastest exact forms for ONNX Runtime) or "portable" (per-tensor/per-axis
    DequantizeLinear and Cast/Sub/Mul/Reshape only). ``wrap_int32=True`` lets i32 nodes use ORT's
    wrapping int32 arithmetic. ``weights``: "quantized" (default) keeps a constant weight's
    DequantizeLinear, which ONNX Runtime fuses with its MatMul/Conv (fast; at ORT's default MatMulNBits
    accuracy level not exact), "float" folds it into a float initializer with the exact reference (exact
    in every runtime, four times the bytes of an 8-bit weight). Raises ``DequantizeError`` for a node that
    breaks the contract, an unsupported opset or target, or an unreadable file.
    """
    base_dir = None
    if isinstance(model, ModelProto):
        work = ModelProto()
        work.CopyFrom(model)
    else:
        work = modelio.load(model, load_external=True)
        base_dir = os.path.dirname(os.path.abspath(os.fspath(model)))
    try:
        return lower_model(
            work, opset=opset, target=target, only=only, wrap_int32=wrap_int32, base_dir=base_dir, weights=weights
        )
    except DequantizeError as e:
        raise (e if base_dir is None else e.at(path=os.fspath(model))) from None  # type: ignore[arg-type]


def _check_outputs(model: ModelProto, src: Any, dst: Any, base_dir: str) -> None:
    """Refuse an output that would replace a file the input reads, unless it replaces the input itself."""
    src_path, dst_path = os.path.realpath(os.fspath(src)), os.path.realpath(os.fspath(dst))
    if src_path == dst_path:
        return  # -o names the input: the model and its data are replaced, atomically
    inputs = {str(p) for p in modelio.external_files(model, base_dir)} | {src_path}
    for out in (dst_path, os.path.realpath(modelio.data_path(dst_path))):
        if out in inputs:
            raise DequantizeError(
                f"Writing {out} would overwrite a file the input model reads: choose another output name"
            )


def lower_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    opset: int | None = None,
    target: str = "ort",
    only: Callable[[NodeProto], bool] | None = None,
    wrap_int32: bool = False,
    weights: str = "quantized",
    changes: list[str] | None = None,
) -> tuple[list[LoweredNode], list[str], ModelProto]:
    """Lower the model file ``src`` into ``dst`` without loading its external weights (``weights="float"``
    reads the constant weights it folds).

    External data is checked, streamed into ``<dst>.data`` beside ``dst``, and both files are written
    atomically (``dst`` may equal ``src``). A model with nothing to change and no external data is
    copied byte for byte. Returns the lowered nodes, the files written and the lowered model (its
    tensors pointing at the new data file); ``changes`` receives the model-level changes (``lower_model``).
    """
    out_dir = os.path.dirname(os.path.abspath(os.fspath(dst)))
    if not os.path.isdir(out_dir):
        raise DequantizeError(f"The output's folder does not exist: {out_dir}")
    base_dir = os.path.dirname(os.path.abspath(os.fspath(src)))
    model = modelio.load(src, load_external=False)
    _check_outputs(model, src, dst, base_dir)
    report: list[LoweredNode] = []
    changes = changes if changes is not None else []
    try:
        model = lower_model(
            model,
            opset=opset,
            target=target,
            only=only,
            wrap_int32=wrap_int32,
            base_dir=base_dir,
            report=report,
            weights=weights,
            changes=changes,
        )
    except DequantizeError as e:
        raise e.at(path=os.fspath(src)) from None
    if not report and not changes and not modelio.external_files(model, base_dir):
        return report, _copy(src, dst), model
    files = modelio.save(model, dst, source_dir=base_dir)
    return report, files, model


def _copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> list[str]:
    """``src``'s bytes written to ``dst`` whole or not at all (nothing to write when they are one file)."""
    if os.path.realpath(os.fspath(src)) != os.path.realpath(os.fspath(dst)):
        with open(src, "rb") as f, atomic_path(dst) as tmp, open(tmp, "wb") as out:
            shutil.copyfileobj(f, out)
    return [os.fspath(dst)]
