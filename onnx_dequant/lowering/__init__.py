"""Lowering strategies for the Dequantize node: each module is one form of standard ONNX.

``plan(info)`` picks the cheapest exact strategy for a node (``NodeInfo``); ``strategy.emit(info, em)``
writes its nodes into an ``Emitter``. ``onnx_dequant.rewrite`` runs this over whole models.
"""

from __future__ import annotations

from .base import DQL_TYPE, Emitter, NodeInfo, Strategy, dql_reason
from .planner import STRATEGIES, TARGETS, Plan, check_target, plan

__all__ = [
    "DQL_TYPE",
    "Emitter",
    "NodeInfo",
    "Plan",
    "STRATEGIES",
    "Strategy",
    "TARGETS",
    "check_target",
    "dql_reason",
    "plan",
]
