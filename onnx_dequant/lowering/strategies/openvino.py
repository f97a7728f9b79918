"""OpenVINO's exact form with a constant zero point: ``Min(Cast(x) - Cast(zp), BIG) * s`` (+ Cast).

OpenVINO (2026.4, CPU) folds Subtract(constant zero point) -> Multiply(constant scale) into
``fma(x, s, -zp*s)``, which is not the reference's single rounding (9e8 ULP where x equals the zero
point). A Min with a constant above every difference sits between them: the difference and the
product stay two exact steps, run in one fused pass (1.0-1.25x OpenVINO's own DequantizeLinear; an
int32 subtraction before the float cast is exact too, but 4-10x slower). Only for ``target="openvino"``,
8/16-bit inputs with a constant zero point and scale, in float32 (exact where the reference's work type is
float32; 16-bit inputs to f16/bf16 round twice, at most 1 ULP, as in ONNX Runtime); every other case is
exact in OpenVINO in the plain DequantizeLinear or Cast/Sub/Mul forms.
"""

from __future__ import annotations

from ... import dtypes
from .base import NodeInfo
from .cast_sub_mul import CastSubMul

F32 = dtypes.parse("f32")

__all__ = ["OpenVinoBarrier"]


class OpenVinoBarrier(CastSubMul):
    name = "cast-sub-min-mul"
    barrier = True

    def check(self, info: NodeInfo) -> str | None:
        if info.target != "openvino":
            return "only for target 'openvino'"
        if not (info.has_zp and info.zp_const and info.scale_const):
            return "only needed with a constant zero point and scale"
        if info.in_type.bits > 16 or info.out_type.name == "f64":
            return "OpenVINO's CPU computes f64 in f32"
        return self.applies(info)

    def work(self, info: NodeInfo) -> dtypes.DType:
        # f32 always: exact where the reference's work type is f32; 16-bit inputs to f16/bf16 round twice
        # (at most 1 ULP, as ONNX Runtime's DequantizeLinear + Cast)
        return F32

    def cost(self, info: NodeInfo) -> float:
        return super().cost(info) + 2 * info.size() * 4
