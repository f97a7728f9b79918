"""What the lowering pass gives back: the model and, for every node it lowered, the form chosen."""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx import ModelProto

__all__ = ["LoweredNode", "LowerResult"]


@dataclass
class LoweredNode:
    """One lowered node: where it was, the strategy chosen, its cost, why each other form was refused, the
    axes of size 1 planned as the other kind (``unit_axes``), the DequantizeLinear runs ``run_once`` saves,
    and the ORT pass a Flatten/Reshape pair keeps off its DequantizeLinear."""

    node: str
    graph: str
    strategy: str
    cost: float
    refused: dict[str, str] = field(default_factory=dict)
    weight: bool = False  # a constant weight feeding MatMul/Gemm/Conv
    dropped_axes: tuple[int, ...] = ()  # quantization axes of size 1 planned as broadcast ones
    adopted_axes: tuple[int, ...] = ()  # trailing broadcast axes of size 1 planned as quantization ones
    runs_saved: int = 0  # DequantizeLinear runs ORT would add, one per reader, that run_once's pair saves
    barrier: str = ""  # how ORT's passes would break the DequantizeLinear a Flatten/Reshape pair follows ("": none;
    # such a pair runs it once too, not counted in runs_saved)
    gather_moved: str = (
        ""  # the Gather or Slice moved before the node ("'reader' of 'dequantize'"), which it was split from
    )


@dataclass
class LowerResult:
    """The lowered model, the nodes lowered (in the order lowered), the files written (``lower_file``) and
    the model-level changes (opset, IR version, opset imports), one line each."""

    model: ModelProto
    nodes: list[LoweredNode] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
