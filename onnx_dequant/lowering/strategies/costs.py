"""What each ONNX Runtime kernel the lowered forms use costs, from the calibrated table ``ort_costs``
(written by ``scripts/calibrate_costs.py``): copy bytes per element (``*_row``: per row), the mean of
its single-thread and all-cores figures, so a kernel ORT runs single-threaded costs more than one it
spreads over threads."""

from __future__ import annotations

from functools import cache

from .ort_costs import COSTS

__all__ = ["kernel_cost"]


@cache
def kernel_cost(name: str) -> float:
    """The calibrated cost of kernel ``name`` (a key of the table), averaged over its thread counts."""
    values = [by_name[name] for by_name in COSTS.values()]
    return sum(values) / len(values)
