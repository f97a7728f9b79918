"""What the lowering pass gives back: the model and, for every node it lowered, the form chosen."""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx import ModelProto

__all__ = ["LoweredNode", "LowerResult"]


@dataclass
class LoweredNode:
    """One lowered node: where it was, the strategy chosen, its cost, and why each other form was refused."""

    node: str
    graph: str
    strategy: str
    cost: float
    refused: dict[str, str] = field(default_factory=dict)


@dataclass
class LowerResult:
    """The lowered model, the nodes lowered (in the order lowered) and the files written (``lower_file``)."""

    model: ModelProto
    nodes: list[LoweredNode] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
