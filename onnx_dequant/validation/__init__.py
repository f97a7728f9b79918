"""Validation: run a model every way we can (ONNX Runtime on the lowered model, ONNX Runtime with our
Python kernel, another model given with ``against``) and compare each run with the exact reference,
in ULPs under the precision policy; name the first node that disagrees.

``validate(model, inputs=None, **options) -> Report``; ``Policy`` sets the allowed ULP.
"""

from __future__ import annotations

from .core import PATHS, RUNTIMES, load_model, validate
from .diff import OutputResult
from .inputs import DEFAULT_DIM
from .policy import Policy, Tolerance
from .report import FirstDifference, PathResult, Report

__all__ = [
    "DEFAULT_DIM",
    "PATHS",
    "RUNTIMES",
    "FirstDifference",
    "OutputResult",
    "PathResult",
    "Policy",
    "Report",
    "Tolerance",
    "load_model",
    "validate",
]
