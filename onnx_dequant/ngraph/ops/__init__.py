"""The op table: nGraph op name -> converter, and the names of backend-internal ops.

A converter is ``fn(ctx: OpContext) -> list[TensorType]``: it reads the op's attributes, checks its
inputs with nGraph's rules, adds ONNX nodes whose last one writes ``ctx.outputs``, and returns the
outputs' types. ``register`` puts one in ``OPS`` for the op versions it understands.
"""

from __future__ import annotations

from collections.abc import Callable

from ...contract import TensorType
from ..context import OpContext

__all__ = ["OPS", "BACKEND_OPS", "register", "Converter"]

Converter = Callable[[OpContext], "list[TensorType]"]

OPS: dict[str, dict[int, Converter]] = {}
"""``OPS[op][version]``: the converter for that op version."""


def register(*names: str, versions: tuple[int, ...] = (0,)) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for n in names:
            for v in versions:
                OPS.setdefault(n, {})[v] = fn
        return fn

    return deco


BACKEND_OPS = frozenset(
    {
        # fusions of nGraph's core and CPU backend passes (not readable by nGraph's own deserializer,
        # or only produced by its optimization passes)
        "QuantizedMatmul",
        "QuantizedAvgPool",
        "QuantizedMaxPool",
        "QuantizedConcat",
        "ConvolutionAdd",
        "ConvolutionRelu",
        "ConvolutionBiasRelu",
        "GroupConvolutionBias",
        "DeconvolutionBias",
        "BatchNormInferenceRelu",
        "BatchNormTrainingRelu",
        "MatmulBias",
        "ConvertLayout",
        "LoopKernel",
        "CompiledKernel",
        "SigmoidMultiply",
        "SigmoidMultiplyBackprop",
        "MaxPoolWithIndices",
        "MaxPoolWithIndicesBackprop",
        "Lstm",
        "Rnn",
        "UpdateSlice",
        "BoundedRelu",
        "CPULeakyRelu",
        "LeakyRelu",
        "Dropout",
        "HalideOp",
        "ConvolutionBiasAddBackpropFiltersBias",
        "GPUBroadcast",
        "LRN_Fused",
    }
)
"""Ops that appear only in graphs serialized after nGraph's backend optimization passes."""

from . import (  # noqa: E402, F401  (registers the converters, after OPS exists)
    activation,
    atan2,
    binary_conv,
    compare,
    conv,
    crop_and_resize,
    cumsum,
    deformable_conv,
    detection,
    dot,
    dynamic,
    elementwise,
    fake_quantize,
    group_conv,
    index,
    interpolate,
    io,
    layout,
    like,
    loop,
    losses,
    math,
    matmul,
    moments,
    movement,
    norm,
    norm_training,
    pad,
    quant,
    quantized,
    reduce,
    rnn,
    scatter,
    sequence,
    shape,
    split,
    stack,
    strided,
    training,
    window_backprop,
)
