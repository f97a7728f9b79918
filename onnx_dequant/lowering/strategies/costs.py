"""What each ONNX Runtime kernel the lowered forms use costs, from the calibrated table ``ort_costs``
(written by ``scripts/calibrate_costs.py``): copy bytes per element (``*_row``: per row), the mean of
its single-thread and all-cores figures, so a kernel ORT runs single-threaded costs more than one it
spreads over threads."""

from __future__ import annotations

from functools import cache

from ... import dtypes
from ..facts import NodeInfo
from .ort_costs import COSTS

__all__ = [
    "CACHE_BYTES",
    "chunked_cast_saving",
    "kernel_cost",
    "narrowing_cast_cost",
    "nodes_cost",
    "reshaped_output_cost",
    "scale_cast_cost",
]


CACHE_BYTES = 2 << 20
"""Data of at most this many bytes stays in a core's cache whole (the Xeon's L2 is 2 MB): a Scan row's
intermediates, a broadcast scale Cast/Sub/Mul reads again for each run of the input over it. A view
that reshapes the input into other rows, whose final Reshape may copy, is not charged as saving them
(standalone (3455,122) {0} i8 -> bf16, 1.7 MB of f32: 4.6x ORT's f32 DequantizeLinear whole, 5.2x in
joined rows)."""


@cache
def kernel_cost(name: str) -> float:
    """The calibrated cost of kernel ``name`` (a key of the table), averaged over its thread counts."""
    values = [by_name[name] for by_name in COSTS.values()]
    return sum(values) / len(values)


def nodes_cost(count: int) -> float:
    """What running ``count`` nodes costs whatever they compute (a Reshape a form adds: in place in a graph,
    yet run): ORT's fixed cost of a node, ``node``."""
    return count * kernel_cost("node")


def reshaped_output_cost(info: NodeInfo) -> float:
    """What a form's final Reshape costs: nothing inside a graph (ORT reshapes in place), a copy of the
    output where the node's output is a graph output."""
    return info.size() * kernel_cost("copy_f32") * info.out_type.bits / 32 if info.graph_output else 0.0


def _cast(out: dtypes.DType) -> str:
    """The table's Cast to ``out`` from f32: bf16's own (ORT 1.32 rounds to bf16 element by element), any other
    type's the f16 one."""
    return "cast_to_bf16" if out.name == "bf16" else "cast_to_f16"


def narrowing_cast_cost(out: dtypes.DType) -> float:
    """The calibrated cost of ORT's Cast to ``out`` from a wider float, its input read from memory, per element
    moving 6 bytes (f32 -> 16 bits)."""
    return kernel_cost(_cast(out))


def scale_cast_cost(t: dtypes.DType) -> float:
    """The calibrated cost of ORT's Cast of a fed scale of type ``t`` to the form's work type, per element
    moving 6 bytes: from f16 or bf16 to f32 its own (``cast_f16_to_f32``, ``cast_bf16_to_f32``), any other
    (f32 to f64, f64 to f32) the Cast to f16's."""
    return kernel_cost(f"cast_{t.name}_to_f32") if t.name in ("f16", "bf16") else narrowing_cast_cost(t)


def chunked_cast_saving(out: dtypes.DType) -> float:
    """What a DequantizeLinear and its Cast to ``out`` save per element (the Cast's 6 bytes) where the f32
    product between them is a Scan row's, in cache, and not a whole tensor's: the calibrated Cast against its
    cost in a row (``*_chunked``: the row's pair less the whole DequantizeLinear), none where that is more."""
    return max(0.0, narrowing_cast_cost(out) - kernel_cost(_cast(out) + "_chunked"))
