"""Quantize and Dequantize: every round mode on .5 ties (and the f64 neighbour of 0.5), saturation, signed
zeros, subnormals; every axes pattern of a rank-3 input; every type pair nGraph 0.26 accepts."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np

from onnx_dequant import dtypes
from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph, importable

SHAPE = (2, 3, 4)
AXES = [c for r in range(4) for c in itertools.combinations(range(3), r)]
REALS = ("f32", "f64", "bf16")  # not f16: nGraph 0.26 reads float16 as bf16
QUANT = ("i8", "u8", "i32")  # nGraph 0.26's quantized types


def _quantize(real: str, quant: str, axes: tuple[int, ...], modes, shape=SHAPE) -> list:
    """One Quantize per round mode, on the same inputs (one Result each)."""
    w = FunctionWriter()
    x = w.parameter(real, list(shape))
    s = w.parameter(real, [shape[a] for a in axes])
    z = w.parameter(quant, [shape[a] for a in axes])
    for mode in modes:
        w.result(w.op("Quantize", x, s, z, type=quant, axes=list(axes), round_mode=mode))
    return graph(w)


def _dequantize(quant: str, real: str, rng: np.random.Generator) -> tuple[list, dict[str, np.ndarray]]:
    """One Dequantize per axes pattern of a rank-3 input (one Result each), with its inputs."""
    w = FunctionWriter()
    qt = dtypes.parse(quant).numpy
    info = np.iinfo(qt)
    lo, hi = (int(info.min), int(info.max)) if quant != "i32" else (-(2**30), 2**30)
    inputs = {}
    x = w.parameter(quant, list(SHAPE))
    inputs[x] = rng.integers(lo, hi, SHAPE, endpoint=True).astype(qt)
    inputs[x].flat[:2] = (lo, hi)
    for axes in AXES:
        sshape = [SHAPE[a] for a in axes]
        s, z = w.parameter(real, sshape), w.parameter(quant, sshape)
        scale = rng.uniform(0.001, 3.0, sshape).astype(np.float64)
        inputs[s] = scale.astype(ml_dtypes.bfloat16 if real == "bf16" else dtypes.parse(real).numpy)
        inputs[z] = rng.integers(lo // 2, hi // 2, sshape, endpoint=True).astype(qt)
        w.result(w.op("Dequantize", x, s, z, type=real, axes=list(axes)))
    return graph(w), {str(k): v for k, v in inputs.items()}


def _ties(real: str, quant: str) -> np.ndarray:
    """Quotients (with scale 1) on and beside .5 ties, signed zeros, subnormals, values beyond every range."""
    k = np.arange(-6, 6, dtype=np.float64)
    v = list(k + 0.5) + [-0.0, 0.0, 0.25, -0.75, 1e-40, -1e-40, 126.5, 127.5, 128.5, -128.5, -129.5, 255.5, 256.5]
    v += [1e6, -1e6, -3e9, 2.0**24 + 2, 8388609.0]
    if not (quant == "i32" and real != "f64"):  # nGraph clamps to float(INT32_MAX) = 2^31 and casts: undefined
        v += [3e9]
    if real == "f64":
        v += [0.49999999999999994, -0.49999999999999994, 2.0**52 + 1, 2.5 + 2.0**-51]
    dt = dtypes.parse(real).numpy
    return np.array(v, np.float64).astype(dt)


def cases() -> list[GoldenCase]:
    out: list[GoldenCase] = []

    def add(case: GoldenCase) -> None:
        if importable(case.graph):
            out.append(case)

    # every round mode (one Result each) x real type x quantized type, per tensor, scale 1, offset 0 and 3
    for real, quant in itertools.product(REALS, QUANT):
        x = _ties(real, quant)
        dt = dtypes.parse(real).numpy
        for zp in (0, 3):
            add(
                GoldenCase(
                    f"quantize_{real}_{quant}_zp{zp}",
                    _quantize(real, quant, (), range(9), x.shape),
                    {
                        "Parameter_0": x,
                        "Parameter_1": np.array(1.0, dt),
                        "Parameter_2": np.array(zp, dtypes.parse(quant).numpy),
                    },
                    note=f"Quantize in round modes 0-8 (Results in order), {real} -> {quant}, ties, saturation, "
                    f"offset {zp}",
                )
            )
    # every axes pattern, scales that make ties (x / 0.5, x / 0.25), both directions of saturation
    rng = np.random.default_rng(11)
    for axes in AXES:
        tag = "".join(map(str, axes)) or "none"
        sshape = [SHAPE[a] for a in axes]
        x = (rng.integers(-300, 300, SHAPE) / 4).astype(np.float32)
        s = rng.choice([0.25, 0.5, 1.0, 2.0], sshape).astype(np.float32)
        for quant in ("i8", "u8"):
            z = rng.integers(-5, 6, sshape) + (128 if quant == "u8" else 0)
            add(
                GoldenCase(
                    f"quantize_axes{tag}_{quant}",
                    _quantize("f32", quant, axes, (0, 4)),
                    {"Parameter_0": x, "Parameter_1": s, "Parameter_2": z.astype(dtypes.parse(quant).numpy)},
                    note=f"Quantize on axes {axes}, f32 -> {quant}, half away from zero and half to even",
                )
            )
    # Dequantize: every type pair, each with every axes pattern
    for quant, real in itertools.product(QUANT, REALS):
        g, inputs = _dequantize(quant, real, rng)
        inexact = quant == "i32" and real != "f64"
        add(
            GoldenCase(
                f"dequantize_{quant}_{real}",
                g,
                inputs,
                note=f"Dequantize {quant} -> {real} on every axes pattern of a rank-3 input (Results in order)",
                ulp=1 if inexact else None,
                why="nGraph converts the i32 difference to the output type and multiplies there (two roundings); "
                "ours rounds once"
                if inexact
                else "",
            )
        )
    return out
