"""The lowering pass: every Dequantize node of ``DOMAIN`` (main graph, subgraphs, model-local functions)
to standard ONNX, in the cheapest exact form, nothing else changed.

Its parts, in the order a model meets them:

- ``api``: the entry points, ``lower`` (a model or a path) and ``lower_file`` (file to file);
- ``options`` / ``result``: ``LowerOptions`` in, ``LowerResult`` (model, ``LoweredNode`` per node) out;
- ``pipeline``: ``lower_model``, the pass as its steps;
- ``convert``: opset conversion of the model and its functions;
- ``walk``: every graph and function body as a ``Scope``;
- ``facts``: types, constants, and each node's ``NodeInfo``;
- ``planner``: the cheapest exact strategy for a node (the rule set ``STRATEGIES``);
- ``strategies/``: one module per form; ``emitter``: where they write their nodes;
- ``cleanup``: unused initializers and opset imports.
"""

from __future__ import annotations

from .api import lower, lower_file
from .emitter import Emitter
from .facts import NodeInfo
from .options import TARGETS, LowerOptions, check_target
from .pipeline import lower_model
from .planner import STRATEGIES, plan
from .result import LoweredNode, LowerResult
from .strategies.base import DQL_TYPE, Plan, Refusal, Strategy

__all__ = [
    "DQL_TYPE",
    "Emitter",
    "LowerOptions",
    "LowerResult",
    "LoweredNode",
    "NodeInfo",
    "Plan",
    "Refusal",
    "STRATEGIES",
    "Strategy",
    "TARGETS",
    "check_target",
    "lower",
    "lower_file",
    "lower_model",
    "plan",
]
