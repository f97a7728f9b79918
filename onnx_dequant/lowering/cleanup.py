"""Cleaning up after the lowering: initializers no node reads any more, and our domain's opset import
where no node of it is left (onnx-ir's RemoveUnusedOpsets, for our domain)."""

from __future__ import annotations

from typing import Any

from onnx import ModelProto

from ..graphs import iter_graphs, iter_nodes
from ..schema import DOMAIN

__all__ = ["drop_unused_initializers", "drop_unused_opsets"]


def drop_unused_initializers(graph: Any, candidates: set[str]) -> None:
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


def _drop_domain(opsets: Any) -> None:
    keep = [o for o in opsets if o.domain != DOMAIN]
    del opsets[:]
    opsets.extend(keep)


def drop_unused_opsets(model: ModelProto, changes: list[str]) -> None:
    """Drop our domain's import (model and functions) where no node needs it any more (a line in
    ``changes`` when the model's goes)."""
    if not any(n.domain == DOMAIN for n in iter_nodes(model)):
        if any(o.domain == DOMAIN for o in model.opset_import):
            changes.append(f"removed the '{DOMAIN}' opset import (no node uses it any more)")
        _drop_domain(model.opset_import)
    for fn in model.functions:
        if not any(n.domain == DOMAIN for n in fn.node):
            _drop_domain(fn.opset_import)
