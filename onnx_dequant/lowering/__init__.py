"""The lowering pass: every Dequantize node of ``DOMAIN`` (main graph, subgraphs, model-local functions)
to standard ONNX, in the cheapest exact form, nothing else changed.

``lower(model)`` and ``lower_file(src, dst)`` are the entry points, ``lower_model`` the pass itself
(``pipeline.py``). For one node, ``plan(info)`` picks a strategy (``planner.py``) among
``strategies/``, one module per form, and ``strategy.emit(info, em)`` writes its nodes into an
``Emitter``.
"""

from __future__ import annotations

from .pipeline import LoweredNode, lower, lower_file, lower_model
from .planner import STRATEGIES, TARGETS, Plan, check_target, plan
from .strategies.base import DQL_TYPE, Emitter, NodeInfo, Strategy, dql_reason

__all__ = [
    "DQL_TYPE",
    "Emitter",
    "LoweredNode",
    "NodeInfo",
    "Plan",
    "STRATEGIES",
    "Strategy",
    "TARGETS",
    "check_target",
    "dql_reason",
    "lower",
    "lower_file",
    "lower_model",
    "plan",
]
