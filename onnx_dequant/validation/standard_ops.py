"""Exact reference kernels for the standard quantization ops, at every version (10 to 25).

onnx's ``ReferenceEvaluator`` has DequantizeLinear kernels only from version 19 (so a QDQ model at opset
13-18, which is what ONNX Runtime's quantization tool writes, does not load), and its kernels compute
``(x - zero_point) * scale`` in float32 (an int32 input rounds before the subtraction). These replace
them for the oracle:

- ``DequantizeLinear``: the exact reference (``onnx_dequant.dequantize``: the difference never wraps,
  one rounding) per tensor, per axis (``axis``, 13+) and per block (``block_size``, 21+), output type
  ``output_dtype`` (23+) or the scale's; float8/4-bit float and 2-bit inputs go to onnx's own kernel.
- ``QuantizeLinear``: ``saturate(round_half_even(x / scale) + zero_point)`` with the division in float32
  (what ONNX Runtime computes for f32/f16/bf16 inputs), the sum and the clamp in float64 (no int32
  overflow for large quotients); NaN gives the zero point. Non-integer output types go to onnx's kernel.

- ``Loop``: with its optional ``cond`` omitted, ``M`` iterations with the body's condition ignored, as the
  spec says (onnx's kernel runs none: a false disagreement with ONNX Runtime).

``OPS`` is the list for ``ReferenceEvaluator(model, new_ops=...)``.
"""

from __future__ import annotations

import numpy as np
from onnx import helper
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_dequantize_linear import _CommonDequantizeLinear
from onnx.reference.ops.op_loop import Loop as _OnnxLoop
from onnx.reference.ops.op_quantize_linear import _CommonQuantizeLinear

from .. import dtypes
from ..errors import DequantizeError
from ..reference import dequantize

__all__ = ["OPS", "DequantizeLinear", "QuantizeLinear", "Loop", "expand_param"]

_INTEGER = {t.numpy: t for t in dtypes.QUANTIZED}
"""Integer input types the exact kernel takes, by NumPy dtype."""

_RANGES = {
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.uint16): (0, 65535),
}


def expand_param(value: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int) -> tuple[np.ndarray, tuple]:
    """A DequantizeLinear/QuantizeLinear scale or zero point as ``(array, axes)`` for ``dequantize``: a scalar
    (per tensor), a 1-D array along ``axis`` (per axis) or an array of ``shape`` (per block)."""
    rank = len(shape)
    if not block_size:
        if value.ndim == 0 or value.size == 1 and value.ndim == 1 and (rank == 0 or shape[axis % rank] != 1):
            return value.reshape(()), ()
        if value.ndim != 1 or rank == 0:
            raise DequantizeError(f"a per-axis scale must be 1-D, got shape {value.shape}")
        a = axis % rank
        if value.shape[0] != shape[a]:
            raise DequantizeError(f"scale length {value.shape[0]} does not match axis {axis} of shape {shape}")
        return value, (a,)
    a = axis % rank
    full = np.repeat(value, block_size, axis=a)
    full = full.take(range(shape[a]), axis=a) if full.shape[a] > shape[a] else full
    if full.shape != shape:
        raise DequantizeError(f"blocked scale of shape {value.shape} does not fit input {shape} (block {block_size})")
    return full, tuple(range(rank))


class DequantizeLinear(OpRun):
    """DequantizeLinear, versions 10-25, through the exact reference."""

    op_domain = ""

    def _run(self, x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=0):
        axis = 1 if axis is None else int(axis)
        block_size = int(block_size or 0)
        if x.dtype not in _INTEGER or (x_zero_point is not None and x_zero_point.dtype != x.dtype):
            return _CommonDequantizeLinear._run(self, x, x_scale, x_zero_point, axis, block_size, output_dtype or None)
        scale, axes = expand_param(np.asarray(x_scale), x.shape, axis, block_size)
        zp = None if x_zero_point is None else expand_param(np.asarray(x_zero_point), x.shape, axis, block_size)[0]
        out = np.dtype(helper.tensor_dtype_to_np_dtype(output_dtype)) if output_dtype else scale.dtype
        if out != scale.dtype:  # one rounding: the product in float64, then the output type
            wide = dequantize(x, scale.astype(np.float64), zp, axes=axes, dtype=np.float64)
            return (wide.astype(out),)
        return (dequantize(x, scale, zp, axes=axes),)


class QuantizeLinear(OpRun):
    """QuantizeLinear, versions 10-25, rounding half to even and saturating without integer overflow."""

    op_domain = ""

    def _run(self, x, y_scale, y_zero_point=None, axis=1, saturate=1, block_size=0, output_dtype=0, precision=0):
        axis = 1 if axis is None else int(axis)
        block_size = int(block_size or 0)
        if y_zero_point is not None:
            out = y_zero_point.dtype
        elif output_dtype:
            out = np.dtype(helper.tensor_dtype_to_np_dtype(output_dtype))
        else:
            out = np.dtype(np.uint8)
        if out not in _RANGES or precision:
            rest = (axis, bool(saturate), block_size, output_dtype or None, precision or None)
            return _CommonQuantizeLinear._run(self, x, y_scale, y_zero_point, *rest)
        s, _ = expand_param(np.asarray(y_scale), x.shape, axis, block_size)
        if s.ndim == 1:
            s = s.reshape([-1 if i == axis % x.ndim else 1 for i in range(x.ndim)])
        q = np.rint(x.astype(np.float32) / s.astype(np.float32)).astype(np.float64)
        if y_zero_point is not None:
            zp, _ = expand_param(np.asarray(y_zero_point), x.shape, axis, block_size)
            if zp.ndim == 1:
                zp = zp.reshape(s.shape)
            q = q + zp.astype(np.float64)
        else:
            zp = np.zeros((), out)
        lo, hi = _RANGES[out]
        q = np.where(np.isnan(q), np.broadcast_to(zp, q.shape).astype(np.float64), q)
        return (np.clip(q, lo, hi).astype(out),)


class Loop(_OnnxLoop):
    """onnx's Loop with the optional ``cond`` omitted as the spec says: ``M`` iterations, the body's
    condition output ignored (onnx 1.2x's kernel reads a missing ``cond`` as false and runs none)."""

    def __init__(self, onnx_node, run_params):  # type: ignore[no-untyped-def]
        super().__init__(onnx_node, run_params)
        self._ignore_cond = False
        run_body = getattr(self, "_run_body", None)
        if run_body is None:  # another onnx: its own kernel decides
            return
        cond_index = self.output_index[self.body.output_names[0]]

        def run(inputs, **kwargs):  # type: ignore[no-untyped-def]
            outputs = run_body(inputs, **kwargs)
            if self._ignore_cond:
                outputs = list(outputs)
                outputs[cond_index] = np.array(True)
            return outputs

        self._run_body = run

    def _run(self, M, cond, *args, **kwargs):  # type: ignore[no-untyped-def]  # noqa: N803 - the spec's name
        if cond is not None or M is None:
            return super()._run(M, cond, *args, **kwargs)
        self._ignore_cond = True
        try:
            return super()._run(M, np.array(True), *args, **kwargs)
        finally:
            self._ignore_cond = False


OPS: list[type[OpRun]] = [DequantizeLinear, QuantizeLinear, Loop]
"""The kernels to add to ``ReferenceEvaluator(new_ops=...)``."""
