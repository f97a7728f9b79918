"""nGraph's serialized JSON functions as ONNX models: ``convert(source, *, function=None)``; a whole folder
with ``convert_tree(src, out, *, lower=False, jobs=None)`` (``tree``: a ``TreeReport`` per graph).

``reader`` parses and checks the file's structure (every era of the format), ``ops`` holds one small
converter per op (``ops.OPS``), ``importer`` builds the model. See docs/ngraph.md for the supported ops
and where nGraph's semantics differ from the nearest ONNX op.
"""

from __future__ import annotations

from .catalog import OPSET0, OPSET1, REFUSED, catalog
from .importer import DEFAULT_OPSET, convert
from .ops import BACKEND_OPS, OPS
from .tree import GraphResult, TreeReport, convert_tree

__all__ = [
    "convert",
    "convert_tree",
    "TreeReport",
    "GraphResult",
    "DEFAULT_OPSET",
    "OPS",
    "BACKEND_OPS",
    "supported_ops",
    "catalog",
    "OPSET0",
    "OPSET1",
    "REFUSED",
]


def supported_ops() -> dict[str, tuple[int, ...]]:
    """Every supported op type with the op versions understood (Parameter and Result included)."""
    table = {name: tuple(sorted(v)) for name, v in OPS.items()}
    table["Parameter"] = (0,)
    table["Result"] = (0,)
    table["GetOutputElement"] = (0,)
    return dict(sorted(table.items()))
