"""The planner: for one node, the cheapest exact strategy (by bytes moved) for the opset and target.

A dequantized constant weight that feeds MatMul/Gemm/Conv gets a plain DequantizeLinear form where
one applies (ORT fuses those into MatMulIntegerToFloat/QLinear*/MatMulNBits), whatever its cost;
with ``weights="float"`` a constant input is folded into a float constant instead (``fold-weight``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import DequantizeError
from .strategies.base import NodeInfo, Strategy
from .strategies.blocked import Blocked
from .strategies.cast_sub_mul import CastSubMul
from .strategies.chunked import Chunked
from .strategies.folded import Folded
from .strategies.merged import Merged
from .strategies.openvino import OpenVinoBarrier
from .strategies.per_axis import PerAxis
from .strategies.per_tensor import PerTensor

__all__ = ["STRATEGIES", "Plan", "plan", "TARGETS", "check_target"]

STRATEGIES: tuple[Strategy, ...] = (
    Folded(),
    PerTensor(),
    PerAxis(),
    Merged(),
    Blocked(),
    Chunked(),
    CastSubMul(),
    OpenVinoBarrier(),
)
"""Every strategy, in order of preference when costs tie."""

TARGETS = ("ort", "portable", "openvino")
"""ort: the fastest exact forms for ONNX Runtime; portable: per-tensor/per-axis DequantizeLinear and
Cast/Sub/Mul/Reshape only; openvino: the portable forms OpenVINO computes exactly, fastest first."""


def check_target(target: str) -> None:
    """``DequantizeError`` unless ``target`` is one of ``TARGETS``."""
    if target not in TARGETS:
        raise DequantizeError(f"Unknown target '{target}' (expected one of: {', '.join(TARGETS)})")


@dataclass
class Plan:
    """The chosen strategy, its cost, and why each other strategy was refused or lost."""

    strategy: Strategy
    cost: float
    refused: dict[str, str]
    costs: dict[str, float]


def plan(info: NodeInfo, strategies: Sequence[str] | None = None) -> Plan:
    """The strategy to lower ``info`` with; ``DequantizeError`` when none applies.

    ``strategies`` limits the choice to those names (tests and benchmarks force a form this way).
    """
    check_target(info.target)
    refused: dict[str, str] = {}
    costs: dict[str, float] = {}
    usable: list[Strategy] = []
    for s in STRATEGIES:
        if strategies is not None and s.name not in strategies:
            refused[s.name] = "not among the strategies asked for"
            continue
        if info.target in ("portable", "openvino") and not s.portable:
            refused[s.name] = "not a portable form"
            continue
        reason = s.check(info)
        if reason:
            refused[s.name] = reason
            continue
        costs[s.name] = s.cost(info)
        usable.append(s)
    if not usable:
        detail = "; ".join(f"{k}: {v}" for k, v in refused.items())
        raise DequantizeError(f"No exact lowering for this node ({detail})", node=info.name)
    if info.weight and not info.fold:  # a weight folded to float needs no fusible form
        plain = [s for s in usable if s.plain]
        if plain:
            return Plan(plain[0], costs[plain[0].name], refused, costs)
    best = min(usable, key=lambda s: costs[s.name])
    return Plan(best, costs[best.name], refused, costs)
