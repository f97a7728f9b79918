"""What each ONNX Runtime kernel the lowered forms use costs, from the calibrated table ``ort_costs``
(written by ``scripts/calibrate_costs.py``): copy bytes per element (``*_row``: per row), the mean of
its single-thread and all-cores figures, so a kernel ORT runs single-threaded costs more than one it
spreads over threads."""

from __future__ import annotations

from functools import cache

from ... import dtypes
from ..facts import NodeInfo
from .ort_costs import COSTS

__all__ = ["kernel_cost", "narrowing_cast_cost", "memory_bound_share", "reshaped_output_cost"]


@cache
def kernel_cost(name: str) -> float:
    """The calibrated cost of kernel ``name`` (a key of the table), averaged over its thread counts."""
    values = [by_name[name] for by_name in COSTS.values()]
    return sum(values) / len(values)


def reshaped_output_cost(info: NodeInfo) -> float:
    """What a form's final Reshape costs: nothing inside a graph (ORT reshapes in place), a copy of the
    output where the node's output is a graph output."""
    return info.size() * kernel_cost("copy_f32") * info.out_type.bits / 32 if info.graph_output else 0.0


def narrowing_cast_cost(out: dtypes.DType) -> float:
    """The calibrated cost of ORT's Cast to ``out`` from a wider float, per element moving 6 bytes (f32 ->
    16 bits): to bf16 its own (ORT 1.32 rounds to bf16 element by element, about three times f16's cost), to any
    other type the f16 one."""
    return kernel_cost("cast_to_bf16" if out.name == "bf16" else "cast_to_f16")


def memory_bound_share(out: dtypes.DType) -> float:
    """The share of a narrowing Cast's time that is its memory traffic: 1 for f16 (calibrated at a copy's
    speed), less for a Cast slower than that (bf16), whose input read from cache instead of memory
    saves only that share (the rest is compute)."""
    return min(1.0, kernel_cost("cast_to_f16") / narrowing_cast_cost(out))
