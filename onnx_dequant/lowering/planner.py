"""The planner: for one node, the cheapest exact strategy (by bytes moved) for the opset and target.

A dequantized constant weight that feeds MatMul/Gemm/Conv gets a form ORT fuses (a plain per-tensor or
per-axis DequantizeLinear) where one applies (ORT fuses those into MatMulIntegerToFloat/QLinear*/
MatMulNBits), whatever its cost; with ``weights="float"`` a constant input is folded into a float
constant instead (``fold-weight``). The rule set, every strategy in order of preference, is at the bottom.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..errors import DequantizeError
from .facts import NodeInfo
from .options import check_target
from .strategies.base import Plan, Refusal, Strategy
from .strategies.blocked import Blocked
from .strategies.cast_sub_mul import CastSubMul
from .strategies.chunked import Chunked
from .strategies.dql_expanded import DQLExpanded
from .strategies.dql_tiled import DQLTiled
from .strategies.empty import Empty
from .strategies.folded import Folded
from .strategies.guarded import Guarded
from .strategies.merged import Merged
from .strategies.openvino import OpenVinoBarrier
from .strategies.per_axis import PerAxis
from .strategies.per_tensor import PerTensor
from .strategies.row_switch import RowSwitch
from .strategies.tiled import Tiled
from .strategies.wrapped import WrappedSubCastMul
from .unit_axes import unit_axes, with_unit_axes

__all__ = ["STRATEGIES", "ROW_STRATEGIES", "Plan", "choose", "plan"]


def choose(info: NodeInfo, strategies: Sequence[Strategy[Any]], names: Sequence[str] | None = None) -> Plan:
    """The plan for ``info`` among ``strategies`` (those named in ``names``, when given): a form ORT fuses
    for a fusable weight, else the cheapest; ``DequantizeError`` listing every refusal when none applies."""
    refused: dict[str, str] = {}
    costs: dict[str, float] = {}
    usable: list[tuple[Strategy[Any], Any]] = []
    for s in strategies:
        if names is not None and s.name not in names:
            refused[s.name] = "not among the strategies asked for"
            continue
        if info.target in ("portable", "openvino") and not s.portable:
            refused[s.name] = "not a portable form"
            continue
        decision = s.check(info)
        if isinstance(decision, Refusal):
            refused[s.name] = decision.reason
            continue
        costs[s.name] = s.cost(info, decision)
        usable.append((s, decision))
    if not usable:
        detail = "; ".join(f"{k}: {v}" for k, v in refused.items())
        raise DequantizeError(f"No exact lowering for this node ({detail})", node=info.name)
    if info.fusable_weight and not info.fold:  # a weight folded to float needs no form ORT fuses
        for s, choice in usable:
            if s.ort_fuses:
                return Plan(s, choice, costs[s.name], refused, costs)
    s, choice = min(usable, key=lambda sc: costs[sc[0].name])
    return Plan(s, choice, costs[s.name], refused, costs)


def plan(info: NodeInfo, names: Sequence[str] | None = None) -> Plan:
    """The strategy to lower ``info`` with, among ``STRATEGIES``; ``DequantizeError`` when none applies.

    Axes of size 1 are planned as the kind that suits the kernels (``unit_axes``). ``names`` limits the
    choice to those strategies (tests and benchmarks force a form this way).
    """
    check_target(info.target)
    unit = unit_axes(info)
    if not unit:
        return choose(info, STRATEGIES, names)
    return dataclasses.replace(choose(with_unit_axes(info, unit), STRATEGIES, names), unit=unit)


_PER_TENSOR, _PER_AXIS, _MERGED, _BLOCKED, _DQL_TILED = PerTensor(), PerAxis(), Merged(), Blocked(), DQLTiled()
_CAST_SUB_MUL, _TILED, _DQL_EXPANDED = CastSubMul(), Tiled(), DQLExpanded()
_DQL_FORMS = (_PER_TENSOR, _PER_AXIS, _MERGED, _DQL_EXPANDED, _BLOCKED, _DQL_TILED)


def _guarded(exact: Sequence[Strategy[Any]]) -> Guarded:
    """i32-guarded over the DequantizeLinear forms and the exact forms ``exact``."""
    return Guarded(lambda i: choose(i, _DQL_FORMS), lambda i: choose(i, exact))


ROW_STRATEGIES: tuple[Strategy[Any], ...] = (
    *_DQL_FORMS,
    _guarded((_CAST_SUB_MUL, _TILED)),  # its passes after the first read the row from cache
    _CAST_SUB_MUL,
    _TILED,
)
"""The forms one row of a Scan can take: every strategy but the Scan itself."""

_CHUNKED = Chunked(lambda row: choose(row, ROW_STRATEGIES))

_EMPTY, _FOLDED = Empty(), Folded()
_SINGLE_FORMS: tuple[Strategy[Any], ...] = (
    *_DQL_FORMS,
    _guarded((_CHUNKED, _CAST_SUB_MUL, _TILED)),
    _CHUNKED,
    _CAST_SUB_MUL,
    _TILED,
    WrappedSubCastMul(),
    OpenVinoBarrier(),
)

STRATEGIES: tuple[Strategy[Any], ...] = (
    _EMPTY,  # preferred where it applies: a form that computes nothing may cost as little (0 elements)
    _FOLDED,
    RowSwitch(lambda i: choose(i, _SINGLE_FORMS)),  # ties with its long branch, and wins
    *_SINGLE_FORMS,
)
"""Every strategy, in order of preference when costs tie."""
