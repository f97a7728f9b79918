"""Wrapped i32 without a DequantizeLinear: ``Cast(x - zp, f32) * s`` (+ Cast to the output), the Sub in
int32. With ``wrap_int32`` an i32 node computes what ORT's int32 DequantizeLinear does, and this is that
computation spelled in other ops: the int32 difference wraps as the kernel's does, the Cast rounds it to
f32 and the Mul rounds once more, bit for bit (docs/ort-facts.md). The planner takes it by its cost like
any form: where the DequantizeLinear forms cost more (a scale along one axis before opset 21, where ORT
has no blocked DequantizeLinear, or over dims it does not know), and where ORT 1.32's QDQ passes would
break the DequantizeLinear (``dql.ort_pass_hazard``: a per-tensor one before Reshape & co., one with a
zero point before Transpose) and no Flatten/Reshape pair can keep them off it (below opset 14, over dims
not known when lowering), which otherwise leaves the float64 Cast/Sub/Mul. Per tensor, (1024, 1024) read
by a Reshape: 0.44-0.48 ms (0.52 with a zero point) against 1.52 (1.64) for the float64 form and 0.23-0.24
for the DequantizeLinear with the pair (``scripts/bench_readers.py``, one thread; AMD EPYC Zen 4, ORT
1.32, 2026-12-06)."""

from __future__ import annotations

from ... import dtypes
from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal
from .cast_sub_mul import CastSubMul

__all__ = ["WrappedSubCastMul"]

F32 = dtypes.parse("f32")


class WrappedSubCastMul(CastSubMul):
    """The choice is the work type (always f32)."""

    name = "sub-cast-mul"
    portable = False  # ORT's wrapping int32 arithmetic is what it computes

    def check(self, info: NodeInfo) -> dtypes.DType | Refusal:
        if info.in_type.name != "i32" or not info.int32_wrap:
            return Refusal("only an i32 input with wrap_int32 (ORT's int32 arithmetic)")
        if info.out_type.name == "f64":
            return Refusal("ORT's int32 DequantizeLinear computes in f32 (no f64 output)")
        return self.applies(info) or F32

    def emit(self, info: NodeInfo, choice: dtypes.DType, em: Emitter) -> None:
        x = info.x
        if info.has_zp and info.zero_point is not None:
            x = em.node("Sub", [x, self._broadcast(info, em, info.zero_point)], hint="diff")
        xf = em.node("Cast", [x], hint="diff_cast", to=F32.onnx)
        s = self._broadcast(info, em, info.scale)
        if info.out_type is not F32:
            s = em.node("Cast", [s], hint="scale_cast", to=F32.onnx)
        last = info.out_type is F32
        y = em.node("Mul", [xf, s], info.output if last else None, hint="y")
        if not last:
            em.node("Cast", [y], info.output, hint="y_cast", to=info.out_type.onnx)
