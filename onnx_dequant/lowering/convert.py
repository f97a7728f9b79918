"""Converting opsets: the model (``onnx.version_converter``, with our nodes and big tensors hidden from
it) and its model-local functions to the asked opset; settling the opset the lowered nodes use."""

from __future__ import annotations

from typing import Any

import onnx
from onnx import ModelProto, TensorProto, helper

from ..errors import DequantizeError
from ..graphs import iter_graphs, iter_nodes, large_data_hidden
from ..opsets import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, default_opset, set_default_opset
from ..schema import DOMAIN
from .facts import function_as_model

__all__ = ["convert_model", "settle_opset", "align_function_opset"]

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
        m2 = _convert_version(function_as_model(fn), opset)
    except Exception as e:  # noqa: BLE001 - the converter raises many types
        raise DequantizeError(f"Cannot convert function '{fn.name}' from opset {old} to {opset}: {e}") from None
    del fn.node[:]
    fn.node.extend(m2.graph.node)
    set_default_opset(fn.opset_import, opset)


def convert_model(model: ModelProto, opset: int) -> ModelProto:
    """``model`` converted to default-domain ``opset``, keeping value_info, functions and metadata."""
    old = default_opset(model.opset_import)
    if old == opset:
        return model
    if old is None:
        set_default_opset(model.opset_import, opset)
        return model
    value_info = list(model.graph.value_info)
    functions = list(model.functions)
    with large_data_hidden(model) as hidden:
        try:
            converted = _convert_version(model, opset)
        except Exception as e:  # noqa: BLE001 - the converter raises many types
            raise DequantizeError(f"Cannot convert the model from opset {old} to {opset}: {e}") from None
    # the converter copies the model: put the big tensors' data back (by graph and name) and what it drops
    for gi, g in enumerate(iter_graphs(converted.graph)):
        for t in g.initializer:
            raw = hidden.get((gi, t.name))
            if raw is not None and not t.raw_data and t.data_location != TensorProto.EXTERNAL:
                t.raw_data = raw
    del converted.graph.value_info[:]
    converted.graph.value_info.extend(value_info)
    del converted.functions[:]
    converted.functions.extend(functions)
    for fn in converted.functions:
        _convert_function(fn, converted, opset)
    return converted


def settle_opset(model: ModelProto, lowering: bool, changes: list[str]) -> int | None:
    """The default-domain opset the lowered nodes use (``lowering``: some node is to be lowered; a model
    without one gets ``DEFAULT_OPSET``; one outside the supported range is refused), and the IR version
    that opset needs when the opset imports changed (``changes`` lists what changed; it gets the lines
    for what this adds)."""
    current = default_opset(model.opset_import)
    if lowering:
        if current is None:
            current = DEFAULT_OPSET
            set_default_opset(model.opset_import, current)
            changes.append(f"added the default-domain opset import {current} (the lowered nodes need one)")
        elif not MIN_OPSET <= current <= MAX_OPSET:
            raise DequantizeError(
                f"The model's opset {current} is outside {MIN_OPSET} to {MAX_OPSET}: pass opset= (or --opset) "
                "to convert it"
            )
    if changes:  # only changed opset imports can need a newer IR version
        min_ir = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        if model.ir_version < min_ir:
            changes.append(f"IR version {model.ir_version} -> {min_ir} (the new opset imports need it)")
            model.ir_version = min_ir
    return current


def align_function_opset(fn: onnx.FunctionProto, model_opset: int) -> None:
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
