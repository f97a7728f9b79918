"""What the lowering pass is asked to do: ``LowerOptions`` (the opset, the target runtime, which nodes,
int32 semantics, which forms) and the targets it knows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onnx import NodeProto

from ..errors import DequantizeError
from ..opsets import check_opset

__all__ = ["TARGETS", "LowerOptions", "check_target"]

TARGETS = ("ort", "portable")
"""Lowering targets: "ort" (the fastest exact forms for ONNX Runtime) or "portable" (per-tensor/per-axis
DequantizeLinear and Cast/Sub/Mul/Reshape only)."""


def check_target(target: str) -> None:
    """``DequantizeError`` unless ``target`` is one of ``TARGETS``."""
    if target not in TARGETS:
        raise DequantizeError(f"Unknown target '{target}' (expected one of: {', '.join(TARGETS)})")


@dataclass(frozen=True)
class LowerOptions:
    """How to lower a model.

    ``opset``: None keeps the model's default-domain opset, else the model is converted to it (13 to 27).
    ``target``: one of ``TARGETS``. ``only``: lower the nodes where ``only(node)`` is true (None: all).
    ``wrap_int32``: let i32 nodes use ORT's wrapping int32 arithmetic, for speed. ``strategies``:
    limit the forms to these names (tests and benchmarks force a form this way).
    """

    opset: int | None = None
    target: str = "ort"
    only: Callable[[NodeProto], bool] | None = None
    wrap_int32: bool = False
    strategies: Sequence[str] | None = None

    def check(self) -> None:
        """``DequantizeError`` for an unknown target or an unsupported opset."""
        check_target(self.target)
        if self.only is not None and not callable(self.only):
            raise DequantizeError(f"only must be a function of a node (or None), got {type(self.only).__name__}")
        if self.opset is not None:
            check_opset(self.opset)

    def wants(self, node: NodeProto) -> bool:
        """Whether ``node`` (one of ours) is to be lowered."""
        return self.only is None or self.only(node)
