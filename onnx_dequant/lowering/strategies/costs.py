"""What each ONNX Runtime kernel the lowered forms use costs, from the calibrated table ``ort_costs``
(written by ``scripts/calibrate_costs.py``): copy bytes per element (``*_row``: per row), the mean of
its single-thread and all-cores figures, so a kernel ORT runs single-threaded costs more than one it
spreads over threads."""

from __future__ import annotations

from functools import cache

from ..facts import NodeInfo
from .ort_costs import COSTS

__all__ = ["kernel_cost", "reshaped_output_cost"]


@cache
def kernel_cost(name: str) -> float:
    """The calibrated cost of kernel ``name`` (a key of the table), averaged over its thread counts."""
    values = [by_name[name] for by_name in COSTS.values()]
    return sum(values) / len(values)


def reshaped_output_cost(info: NodeInfo) -> float:
    """What a form's final Reshape costs: nothing inside a graph (ORT reshapes in place), a copy of the
    output where the node's output is a graph output."""
    return info.size() * kernel_cost("copy_f32") * info.out_type.bits / 32 if info.graph_output else 0.0
