"""A DequantizeLinear read by several nodes, run once.

ONNX Runtime 1.32 gives each reader of a DequantizeLinear its own copy of it, so that each reader's QDQ
node unit can fuse (its ``EnsureUniqueDQForNodeUnit``), and runs every copy that does not fuse: a lowered
node read by three Relus dequantizes its input three times. Where no reader can fuse (``Reads.fusing``),
a Flatten then a Reshape back after the DequantizeLinear leave it one reader. Both alias their input, ORT
neither removes them nor moves a DequantizeLinear past a Flatten, so the DequantizeLinear runs once
(docs/lowering.md has the measurements).
"""

from __future__ import annotations

from .emitter import Emitter
from .facts import NodeInfo
from .strategies.costs import kernel_cost, reshaped_output_cost
from .strategies.dql import qdq_propagates, reshape_back

__all__ = ["run_once", "MIN_SAVED_ELEMENTS"]

MIN_SAVED_ELEMENTS = 8192
"""The two nodes' fixed cost (about a microsecond) is what a per-tensor DequantizeLinear of about this many
elements costs: the pair is added only where the runs it saves cost more."""


def run_once(info: NodeInfo, cost: float, em: Emitter) -> int:
    """Add the Flatten/Reshape pair after the DequantizeLinear ``em`` ends with, where it computes
    ``info.output`` for ONNX Runtime, no reader can fuse with it, ORT would not move it past a Transpose
    reading it, and the runs it saves (each ``cost``, the form's bytes moved) outweigh the pair (a copy of
    the output where the graph returns it); returns the DequantizeLinear runs saved (0: nothing added)."""
    last = em.nodes[-1] if em.nodes else None
    if info.target != "ort" or info.reads.fusing or info.fusable_weight or info.shape is None:
        return 0
    if info.known_shape is None and (info.opset < 14 or info.in_type.bits < 8):
        return 0  # the Reshape's shape would be Shape(x): below opset 14 no allowzero (a dim of 0 at run
        # time would be copied), and ORT has no Shape kernel for 4-bit types
    if qdq_propagates(info, info.scale_size) and "Transpose" in info.consumers:
        return 0  # ORT moves the copy a Transpose reads past it (QDQ propagation): the Transpose then moves
        # 8-bit data, which saves more than the run (1.3-2.3x slower with the pair)
    if last is None or last.op_type != "DequantizeLinear" or list(last.output) != [info.output]:
        return 0
    saved = info.reads.dql_runs - 1
    if saved * cost - reshaped_output_cost(info) < MIN_SAVED_ELEMENTS * kernel_cost("dql_tensor"):
        return 0
    last.output[0] = em.fresh("dequantized")
    reshape_back(em, info, last.output[0], flatten=True)
    return saved
