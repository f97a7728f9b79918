"""What the lowering pass is asked to do: ``LowerOptions`` (the opset, the target runtime, which nodes,
int32 semantics, which forms) and the targets it knows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onnx import NodeProto

from ..errors import DequantizeError
from ..opsets import check_opset

__all__ = ["TARGETS", "WEIGHTS", "LowerOptions", "check_target"]

TARGETS = ("ort", "portable", "openvino")
"""Lowering targets: "ort" (the fastest exact forms for ONNX Runtime), "portable" (per-tensor/per-axis
DequantizeLinear and Cast/Sub/Mul/Reshape only) or "openvino" (the portable forms OpenVINO computes
exactly: a constant zero point and scale get Cast/Sub/Min/Mul, which it does not fold into an fma)."""

WEIGHTS = ("quantized", "float")
"""What ``weights`` does with a constant weight's dequantization: "quantized" keeps DequantizeLinear (ONNX
Runtime fuses it with the MatMul/Conv: fast, not exact at ORT's default MatMulNBits accuracy level);
"float" folds it into a float initializer computed by the exact reference (exact everywhere, 4x bytes)."""


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
    limit the forms to these names (tests and benchmarks force a form this way). ``weights``: one of
    ``WEIGHTS`` (keep constant weights quantized, or fold them to float with the exact reference).
    """

    opset: int | None = None
    target: str = "ort"
    only: Callable[[NodeProto], bool] | None = None
    wrap_int32: bool = False
    strategies: Sequence[str] | None = None
    weights: str = "quantized"

    def check(self) -> None:
        """``DequantizeError`` for an unknown target or an unsupported opset."""
        check_target(self.target)
        if self.only is not None and not callable(self.only):
            raise DequantizeError(f"only must be a function of a node (or None), got {type(self.only).__name__}")
        if self.weights not in WEIGHTS:
            raise DequantizeError(f"Unknown weights mode '{self.weights}' (expected one of: {', '.join(WEIGHTS)})")
        if self.opset is not None:
            object.__setattr__(self, "opset", check_opset(self.opset))  # a NumPy integer as an int

    def wants(self, node: NodeProto) -> bool:
        """Whether ``node`` (one of ours) is to be lowered."""
        return self.only is None or self.only(node)
