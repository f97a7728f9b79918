"""Cast/Sub/Mul: ``Cast(x, w) - Cast(zp, w)`` times ``Cast(s, w)``, then Cast to the output type, in the
narrowest work type w (f32 or f64) that rounds like the reference; scale and zero point Unsqueezed to
broadcast. Exact for every type pair and every opset (no int32 wrap: i32 works in f64)."""

from __future__ import annotations

from ... import dtypes
from ...exactness import work_type
from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal, Strategy, openvino_refusal

__all__ = ["BARRIER", "CastSubMul"]

BARRIER = 3.0e38
"""Above every difference of two quantized values: ``Min(d, BARRIER)`` is ``d``, and hides the Sub from a
runtime that would fold it with the Mul (strategies/openvino.py)."""


class CastSubMul(Strategy[dtypes.DType]):
    """The choice is the work type."""

    name = "cast-sub-mul"
    barrier = False  # a Min(d, BARRIER) between Sub and Mul

    def applies(self, info: NodeInfo) -> Refusal | None:
        """The checks every Cast/Sub/Mul form needs."""
        if info.axes and info.rank is None:
            return Refusal("the input's rank is unknown")
        if info.in_type.bits < 8 and info.opset < 21:
            return Refusal(f"Cast from {info.in_type.name} needs opset 21")
        return None

    def check(self, info: NodeInfo) -> dtypes.DType | Refusal:
        work = work_type(info.in_type, info.out_type)
        return self.applies(info) or openvino_refusal(info, work=work) or work

    def cost(self, info: NodeInfo, choice: dtypes.DType) -> float:
        n = info.size()
        in_bytes, work_bytes, out_bytes = max(info.in_type.bits, 8) / 8, choice.bits / 8, info.out_type.bits / 8
        cost = n * (in_bytes + work_bytes) + 2 * n * work_bytes
        if info.has_zp:
            cost += 2 * n * work_bytes
        if choice is not info.out_type:
            cost += n * (work_bytes + out_bytes)
        return cost

    def _broadcast(self, info: NodeInfo, em: Emitter, tensor: str) -> str:
        rank = info.rank or 0
        missing = [i for i in range(rank) if i not in info.axes]
        if not info.axes or not missing:
            return tensor
        return em.node("Unsqueeze", [tensor, em.i64(missing, "axes")], hint="bcast")

    def emit(self, info: NodeInfo, choice: dtypes.DType, em: Emitter) -> None:
        w = choice
        xw = em.node("Cast", [info.x], hint="x_cast", to=w.onnx)
        if info.has_zp and info.zero_point is not None:
            zp = em.node("Cast", [info.zero_point], hint="zp_cast", to=w.onnx)
            xw = em.node("Sub", [xw, self._broadcast(info, em, zp)], hint="diff")
            if self.barrier:
                xw = em.node("Min", [xw, em.const(BARRIER, w.numpy, hint="barrier")], hint="diff_kept")
        s = info.scale
        if info.out_type is not w:
            s = em.node("Cast", [s], hint="scale_cast", to=w.onnx)
        last = w is info.out_type
        y = em.node("Mul", [xw, self._broadcast(info, em, s)], info.output if last else None, hint="y")
        if not last:
            em.node("Cast", [y], info.output, hint="y_cast", to=info.out_type.onnx)
