"""Empty: an input known to hold no elements (a dim of 0) -> its output, an empty constant of the output's
shape and type. Nothing is computed, and no Reshape is emitted (a 0 in a Reshape's shape means "copy that
dim" at opsets below 14, or without ``allowzero``)."""

from __future__ import annotations

import numpy as np

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
        em.constant_output(np.zeros(info.known_shape or (0,), info.out_type.numpy), info.output)
