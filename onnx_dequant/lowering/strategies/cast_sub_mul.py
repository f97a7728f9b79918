"""Cast/Sub/Mul: ``Cast(x, w) - Cast(zp, w)`` times ``Cast(s, w)``, then Cast to the output type, in the
narrowest work type w (f32 or f64) that rounds like the reference; scale and zero point Unsqueezed to
broadcast. Exact for every type pair and every opset (no int32 wrap: i32 works in f64)."""

from __future__ import annotations

from ... import dtypes
from ...exactness import work_type
from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal, Strategy, openvino_refusal
from .costs import CACHE_BYTES, kernel_cost, narrowing_cast_cost, nodes_cost, scale_cast_cost
from .shapes import groups

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
        # each op at its calibrated cost (measured int8 -> f32, f32 * f32, f32 -> f16), scaled by its bytes
        cost = n * kernel_cost("cast_int_to_f32") * (in_bytes + work_bytes) / 5
        cost += n * kernel_cost("binary_f32") * work_bytes / 4 * (2 if info.has_zp else 1)
        # ORT's broadcasting Mul (and Sub) runs its inner loop once per run of the scale along the last axes
        cost += n / max(1, self.run(info)) * kernel_cost("binary_f32_row") * (2 if info.has_zp else 1)
        # the scale (and zero point, cast first) read by Mul (and Sub): once where they stay in a core's cache,
        # else again for each run of the input over them
        params = info.scale_size
        param_bytes = work_bytes * (2 if info.has_zp else 1)
        cost += (params if params * param_bytes <= CACHE_BYTES else n) * param_bytes
        if info.has_zp and not info.zp_const:  # (ORT folds a constant one's Cast when it loads the model)
            cost += params * kernel_cost("cast_int_to_f32") * (in_bytes + work_bytes) / 5
        if not info.scale_const and choice is not info.out_type:  # a fed scale's Cast to the work type
            cost += params * scale_cast_cost(info.out_type) * (out_bytes + work_bytes) / 6
        if choice is not info.out_type:
            cost += n * narrowing_cast_cost(info.out_type) * (work_bytes + out_bytes) / 6
        # the nodes over the input: Cast, Sub, Mul, Cast to the output
        return cost + nodes_cost(2 + info.has_zp + (choice is not info.out_type))

    @staticmethod
    def run(info: NodeInfo) -> int:
        """Elements per run of the broadcast scale: the trailing axes that are all quantization axes or
        all broadcast axes (the whole input for a per-tensor scale or one as large as the input)."""
        if not info.axes or info.rank is None or len(info.axes) == info.rank:
            return info.size()
        last = groups(info.rank, info.axes)[-1][1]
        return info.size(last)

    def _broadcast(self, info: NodeInfo, em: Emitter, tensor: str) -> str:
        """``tensor`` (shaped by the node's axes) with the input's rank: ORT 1.32's Sub and Mul broadcast a
        lower-rank operand element by element against an input with a trailing dim of 1 (f64
        ``(3,437226,1) * ()`` 34 ms, ``* (1,1,1)`` 1.9 ms: docs/ort-facts.md)."""
        rank = info.rank or 0
        missing = [i for i in range(rank) if i not in info.axes]
        if not missing:
            return tensor
        if not info.axes:  # a scalar (or one-element) scale: reshaped, folded when it is a constant
            return em.redim(tensor, [1] * rank, "bcast") or em.node(
                "Reshape", [tensor, em.i64([1] * rank)], hint="bcast"
            )
        return em.node("Unsqueeze", [tensor, em.i64(missing, "axes")], hint="bcast")

    def emit(self, info: NodeInfo, choice: dtypes.DType, em: Emitter) -> None:
        w = choice
        xw = em.node("Cast", [info.x], hint="x_cast", to=w.onnx)
        if info.has_zp and info.zero_point is not None:
            if info.in_type.bits < 8:  # ORT has no Reshape or Unsqueeze for 4-bit types: placed after the Cast
                zp = self._broadcast(info, em, em.node("Cast", [info.zero_point], hint="zp_cast", to=w.onnx))
            else:  # placed first, so that a constant is reshaped in the file
                zp = em.node("Cast", [self._broadcast(info, em, info.zero_point)], hint="zp_cast", to=w.onnx)
            xw = em.node("Sub", [xw, zp], hint="diff")
            if self.barrier:
                xw = em.node("Min", [xw, em.const(BARRIER, w.numpy, hint="barrier")], hint="diff_kept")
        s = self._broadcast(info, em, info.scale)
        if info.out_type is not w:
            s = em.node("Cast", [s], hint="scale_cast", to=w.onnx)
        last = w is info.out_type
        y = em.node("Mul", [xw, s], info.output if last else None, hint="y")
        if not last:
            em.node("Cast", [y], info.output, hint="y_cast", to=info.out_type.onnx)
