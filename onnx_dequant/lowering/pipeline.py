"""The lowering pass over a whole model, as its steps: check the options; convert opsets; settle the
opset the lowered nodes use; walk the graphs and functions; for each node, gather its facts, plan and
emit; clean up unused initializers and opsets.

Nothing else changes: names, metadata, doc strings and value_info stay; the default-domain opset stays
unless ``opset`` asks for another; our domain's opset import goes when no node needs it any more.
"""

from __future__ import annotations

import os

import onnx.inliner
from onnx import ModelProto, NodeProto, TensorProto

from ..graphs import FreshNames
from ..opsets import default_opset
from ..schema import is_dequantize
from .cleanup import drop_unused_initializers, drop_unused_opsets
from .convert import align_function_opset, convert_model, settle_opset
from .emitter import Emitter
from .facts import Constants, function_types, gather, model_types
from .gather_first import gather_first
from .options import LowerOptions
from .planner import plan
from .result import LoweredNode, LowerResult
from .run_once import run_once
from .walk import Scope, graph_scopes, lowers_in, survey

__all__ = ["lower_model", "lower_scope"]


def lower_model(
    model: ModelProto, options: LowerOptions | None = None, *, base_dir: str | os.PathLike[str] | None = None
) -> LowerResult:
    """Lower ``model``'s Dequantize nodes as ``options`` say (default: all, for ONNX Runtime).

    Works on ``model`` itself (callers copy); the result's model is ``model`` unless the opset was
    converted or, for ``target="openvino"``, its local functions inlined. ``base_dir`` is the model's
    folder, for reading small external constants.
    """
    options = options or LowerOptions()
    options.check()
    changes: list[str] = []
    if options.target == "openvino" and model.functions:  # OpenVINO (2026.4) converts no model-local function
        model = onnx.inliner.inline_local_functions(model)
        changes.append("inlined the model's local functions (OpenVINO converts none)")
    before = default_opset(model.opset_import)
    if options.opset is not None and options.opset != before:
        model = convert_model(model, options.opset)
        changes.append(f"converted the default-domain opset {before} to {options.opset} (opset= / --opset)")
    found = survey(model, options.wants)
    opset = settle_opset(model, found.to_lower > 0, changes)
    result = LowerResult(model, changes=changes)
    if not found.to_lower or opset is None:
        return result
    names = FreshNames(found.names)
    types = model_types(model)
    constants = Constants(None if base_dir is None else os.fspath(base_dir))
    for scope in graph_scopes(model.graph, model.graph.name or "main", constants, types, main=True):
        result.nodes += lower_scope(scope, options, opset, names)
    for fn in model.functions:
        if lowers_in(fn):
            calls = found.calls.get((fn.domain, fn.name), [])
            fn_types = {**types, **function_types(model, fn, types, calls)}
            align_function_opset(fn, opset)
            own = Constants(constants.base_dir)  # a function body sees no graph's constants
            for scope in graph_scopes(fn, f"function {fn.name}", own, fn_types, function=True):
                result.nodes += lower_scope(scope, options, opset, names)
    drop_unused_opsets(model, changes)
    return result


def lower_scope(scope: Scope, options: LowerOptions, opset: int, names: FreshNames) -> list[LoweredNode]:
    """Lower the Dequantize nodes of one graph or function body (not its subgraphs), in place."""
    body = scope.body
    if not any(is_dequantize(n) for n in body.node):
        return []
    moved = gather_first(scope, options, names)
    consumers, fed = scope.consumers(), scope.fed
    outputs = scope.outputs
    new_nodes: list[NodeProto] = []
    new_initializers: list[TensorProto] = []
    read_by_lowered: set[str] = set()
    lowered: list[LoweredNode] = []
    for n in body.node:
        if not is_dequantize(n) or not (options.wants(n) or n.output[0] in moved):  # (moved: wanted before)
            new_nodes.append(n)
            continue
        read_by_lowered.update(n.input)
        info = gather(
            n,
            types=scope.types,
            consts=scope.constants,
            consumers=consumers.get(n.output[0], []),
            reads=scope.reads(n.output[0]),
            fed=fed,
            graph_output=n.output[0] in outputs,
            main_graph=scope.main,
            options=options,
            opset=opset,
        )
        chosen = plan(info, options.strategies)
        em = Emitter(n.name or info.output, names, function=scope.function, constants=scope.constants.tensors)
        chosen.emit(info, em)
        runs_saved = run_once(info, chosen.cost, em)  # (a form that put the pair after its DQL ends in a Reshape)
        if em.nodes:  # a folded weight is an initializer named as the output, with no node
            _carry_identity(n, em.nodes[-1], names)
        new_nodes.extend(em.nodes)
        new_initializers.extend(em.initializers)
        lowered.append(
            LoweredNode(
                info.name,
                scope.label,
                chosen.strategy.name,
                chosen.cost,
                chosen.refused,
                weight=info.fusable_weight,
                dropped_axes=chosen.unit.dropped,
                adopted_axes=chosen.unit.adopted,
                runs_saved=runs_saved,
                barrier=chosen.strategy.ort_barrier(chosen.choice),
                gather_moved=moved.get(info.output, ""),
            )
        )
    del body.node[:]
    body.node.extend(new_nodes)
    if new_initializers:
        body.initializer.extend(new_initializers)
    if not scope.function:
        drop_unused_initializers(body, read_by_lowered)
    return lowered


def _carry_identity(node: NodeProto, last: NodeProto, names: FreshNames) -> None:
    """The node computing the output takes the original node's name and doc string."""
    assert list(last.output) == list(node.output[:1])
    if node.name:
        names.release(last.name)
        last.name = node.name
    if node.doc_string:
        last.doc_string = node.doc_string
