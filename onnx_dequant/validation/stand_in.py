"""When the reference cannot run a model: ONNX Runtime with optimizations off stands in for it.

The reference evaluator runs the standard ops and ours; a model with ops of other domains (ONNX
Runtime's ``com.microsoft`` contrib ops such as QLinearAdd, which its quantization tool writes in the
QOperator format) has no exact oracle. Validation then still compares ONNX Runtime at its default
level (where its graph rewrites change results) against ONNX Runtime with optimizations off, and says
plainly that no reference ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from ..graphs import has_dequantize, iter_nodes
from ..schema import DOMAIN
from .runners import OrtRunner

__all__ = ["STAND_IN_LEVEL", "OrtStandIn", "foreign_ops"]

STAND_IN_LEVEL = "off"
"""The ONNX Runtime optimization level that stands in for the reference."""

_KNOWN = ("", "ai.onnx", DOMAIN)


def foreign_ops(model: onnx.ModelProto) -> list[str]:
    """``domain.op_type`` of every op the reference evaluator has no kernel for: ops outside the standard
    domain and ours that are not model-local functions (sorted, each once)."""
    local = {(f.domain, f.name) for f in model.functions}
    found = {
        f"{n.domain}.{n.op_type}"
        for n in iter_nodes(model)
        if n.domain not in _KNOWN and (n.domain, n.op_type) not in local
    }
    return sorted(found)


class OrtStandIn:
    """ONNX Runtime at ``STAND_IN_LEVEL`` in the reference's place (``run`` as ``ReferenceRunner.run``;
    no intermediates, so no localisation)."""

    def __init__(
        self, model: onnx.ModelProto, arrays: Mapping[str, np.ndarray], config: Mapping[str, str] | None
    ) -> None:
        self.kernel = has_dequantize(model)
        self._runner = OrtRunner(model, STAND_IN_LEVEL, kernel=self.kernel, config=config, arrays=arrays)

    def same_as(self, path: str, level: str) -> bool:
        """Whether ``path`` at ``level`` is this stand-in itself (nothing to compare)."""
        return level == STAND_IN_LEVEL and path == ("kernel" if self.kernel else "ort")

    def run(self, feeds: Mapping[str, np.ndarray], *, intermediate: bool = False, into: Any = None) -> dict[str, Any]:
        return self._runner.run(feeds)
