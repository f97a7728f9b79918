"""The default-domain opsets this project emits: the supported range, the default, and reading and
setting a model's default-domain version."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from .errors import DequantizeError, shown

__all__ = ["MIN_OPSET", "MAX_OPSET", "DEFAULT_OPSET", "check_opset", "default_opset", "set_default_opset"]

MIN_OPSET = 13
MAX_OPSET = 27
"""Supported default-domain opsets: DequantizeLinear has ``axis`` from 13; ONNX Runtime 1.32 has no
DequantizeLinear-28 kernel."""
DEFAULT_OPSET = 21
"""The opset of models we build, and of a model that imports no default-domain opset."""


def check_opset(opset: Any) -> int:
    """``opset`` as an ``int`` (any integer type: a NumPy one too) if it is a supported default-domain
    opset, else ``DequantizeError``."""
    if isinstance(opset, (bool, np.bool_)) or not isinstance(opset, (int, np.integer)):
        raise DequantizeError(f"The target opset must be an integer, got {shown(opset)} ({type(opset).__name__})")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise DequantizeError(
            f"Unsupported target opset {int(opset)}: supported are {MIN_OPSET} to {MAX_OPSET} "
            "(ONNX Runtime has no DequantizeLinear-28 kernel)"
        )
    return int(opset)


def default_opset(opsets: Any) -> int | None:
    """The default-domain version in an ``opset_import`` list, or None."""
    for o in opsets:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return None


def set_default_opset(opsets: Any, version: int) -> None:
    """Set (or add) the default-domain version in an ``opset_import`` list."""
    for o in opsets:
        if o.domain in ("", "ai.onnx"):
            o.version = version
            return
    opsets.append(helper.make_opsetid("", version))
