"""The exactness rule, in one place (docs/precision.md): when float32 work gives the reference's bits,
and where ONNX Runtime can be bit-identical to the reference.

The reference computes ``(x - zero_point) * scale`` with the exact integer difference and rounds the
product once to the output type. Float32 work gives the same bits when float32 holds every difference
of the input type and either the output is f32 (the f32 product is that one rounding) or the exact
product fits float32's significand (it is then rounded once, by the Cast to the narrower output).
"""

from __future__ import annotations

import functools

import ml_dtypes

from . import dtypes

__all__ = [
    "mantissa_bits",
    "difference_bits",
    "f32_work_exact",
    "work_type",
    "fused_work_type",
    "f32_guard",
    "ort_exact",
]

_F32 = dtypes.parse("f32")
_F64 = dtypes.parse("f64")


@functools.cache
def mantissa_bits(t: dtypes.DType) -> int:
    """Significand bits of a real type, the implicit bit included (f32: 24)."""
    return int(ml_dtypes.finfo(t.numpy).nmant) + 1


def difference_bits(x: dtypes.DType) -> int:
    """Significant bits of the difference of two values of integer type ``x``: an n-bit type's (signed
    or not) lies within +-(2**n - 1), n bits and a sign, which a float keeps apart."""
    return x.bits


@functools.cache
def f32_work_exact(x: dtypes.DType, out: dtypes.DType) -> bool:
    """Whether ``(x - zp) * scale`` computed in float32 rounds exactly once to ``out``: float32 holds every
    difference, and the output is f32 or the exact product fits float32's significand (8-bit inputs with
    f16/bf16 scales: 8 + 11 bits; 16-bit inputs with bf16: 16 + 8, not with f16: 16 + 11)."""
    if out.name == "f64" or difference_bits(x) > mantissa_bits(_F32):
        return False
    return out.name == "f32" or difference_bits(x) + mantissa_bits(out) <= mantissa_bits(_F32)


@functools.cache
def work_type(x: dtypes.DType, out: dtypes.DType) -> dtypes.DType:
    """The narrowest float type in which ``(x - zp) * scale`` rounds exactly once to ``out``."""
    return _F32 if f32_work_exact(x, out) else _F64


@functools.cache
def fused_work_type(x: dtypes.DType, out: dtypes.DType) -> dtypes.DType:
    """The work type of the reference's compiled loop: also float32 for f16/bf16 outputs whenever
    float32 holds every difference (16-bit inputs to f16 too), because that loop rounds the f32 product to
    odd from its exact error (a fused multiply-add), and a second rounding to 11 significant bits from 24
    is then the one correct rounding."""
    if out.name in ("f16", "bf16") and difference_bits(x) <= mantissa_bits(_F32):
        return _F32
    return work_type(x, out)


def f32_guard(x: dtypes.DType, out: dtypes.DType, has_zero_point: bool) -> int:
    """The bound within which integer values (i32's) make float32 work give the reference's bits, or 0 where
    float32 work needs none (``fused_work_type``) or no bound makes it exact (f64 outputs: the product
    of a difference and a 53-bit scale).

    Float32 holds every integer up to 2**24 in magnitude: inputs within it, without a zero point, and
    inputs and zero points within 2**23, whose differences are then within 2**24, convert exactly (and
    subtract exactly in int32 or in float32). The product is then a float32 one of an exact difference,
    rounded once to f32 or rounded to odd on the way to f16/bf16, as 16-bit inputs' are. The reference's
    compiled loop checks the values at run time and computes those outside in float64."""
    if out.name == "f64" or fused_work_type(x, out) == _F32:
        return 0
    whole = 1 << mantissa_bits(_F32)
    return whole // 2 if has_zero_point else whole


def ort_exact(x: dtypes.DType, out: dtypes.DType) -> tuple[bool, str]:
    """Whether ONNX Runtime (lowered, or with our kernel) can be bit-identical to the reference for input
    type ``x`` and output type ``out``, and why: f32 and f64 outputs always (i32 through float64), f16 and
    bf16 where float32 work is exact (8-bit inputs; 16-bit ones to bf16); elsewhere it rounds twice
    (through f32)."""
    if out.name in ("f32", "f64"):
        if x.name == "i32":
            return True, "i32: the exact lowering subtracts without wrapping and rounds once"
        return True, f"{x.name}->{out.name} rounds once"
    if f32_work_exact(x, out):
        return True, f"{x.name}->{out.name} rounds once"
    return False, f"{x.name}->{out.name}: ONNX Runtime rounds twice (via f32)"
