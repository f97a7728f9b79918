"""Empty: an input known to hold no elements (a dim of 0) -> its output, an empty constant of the output's
shape and type. Nothing is computed, and no Reshape is emitted (a 0 in a Reshape's shape means "copy that
dim" at opsets below 14, or without ``allowzero``). For ``target="openvino"``, a ConstantOfShape of that
shape: OpenVINO 2025 returns an empty initializer that is a graph output as a tensor of shape ``()``."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ..emitter import Emitter
from ..facts import NodeInfo
from .base import Refusal, Strategy

__all__ = ["Empty"]


class Empty(Strategy[None]):
    name = "empty-output"

    def check(self, info: NodeInfo) -> Refusal | None:
        if info.known_shape is None or info.size() != 0:
            return Refusal("the input is not known to be empty")
        return None

    def cost(self, info: NodeInfo, choice: None) -> float:
        return 0.0  # nothing is computed at run time

    def emit(self, info: NodeInfo, choice: None, em: Emitter) -> None:
        shape = info.known_shape or (0,)
        if info.target == "openvino":
            # ConstantOfShape has bf16 from opset 20: below, an f32 one and an exact Cast
            cast = info.out_type == "bf16" and info.opset < 20
            zero = numpy_helper.from_array(np.zeros(1, np.float32 if cast else info.out_type.numpy))
            dims = em.const(shape, np.int64, "shape")
            made = em.node("ConstantOfShape", [dims], None if cast else info.output, value=zero)
            if cast:
                em.node("Cast", [made], info.output, to=info.out_type.onnx)
        else:
            em.constant_output(np.zeros(shape, info.out_type.numpy), info.output)
