"""OpenVINO's exact form with a constant zero point: ``Min(Cast(x) - Cast(zp), BIG) * s`` (+ Cast).

OpenVINO (2026.4, CPU) folds Subtract(constant zero point) -> Multiply(constant scale) into
``fma(x, s, -zp*s)``, which is not the reference's single rounding (9e8 ULP where x equals the zero
point). A Min with a constant above every difference sits between them: the difference and the
product stay two exact steps, run in one fused pass (measured: scripts/bench_openvino.py; an int32
subtraction before the float cast is exact too, but 4-10x slower). Only for ``target="openvino"`` and
8/16-bit inputs, in float32 (exact where the reference's work type is float32; 16-bit inputs to f16
round twice, at most 1 ULP, as in ONNX Runtime, whose Cast/Sub/Mul form works in f64, which OpenVINO's CPU
runs in f32). It costs more than a DequantizeLinear, so the planner takes it only where OpenVINO would
fold one (a constant zero point and scale) or no other form is exact enough.
"""

from __future__ import annotations

from ... import dtypes
from ..facts import NodeInfo
from .base import Refusal
from .cast_sub_mul import CastSubMul

__all__ = ["OpenVinoBarrier"]

F32 = dtypes.parse("f32")


class OpenVinoBarrier(CastSubMul):
    """The choice is the work type (always f32)."""

    name = "cast-sub-min-mul"
    barrier = True

    def check(self, info: NodeInfo) -> dtypes.DType | Refusal:
        if info.target != "openvino":
            return Refusal("only for target 'openvino'")
        if info.in_type.bits > 16 or info.out_type.name == "f64":
            return Refusal("OpenVINO's CPU computes f64 in f32")
        return self.applies(info) or F32

    def cost(self, info: NodeInfo, choice: dtypes.DType) -> float:
        return super().cost(info, choice) + 2 * info.size() * choice.bits / 8
