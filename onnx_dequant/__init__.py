"""onnx_dequant: nGraph's multi-axis Dequantize in ONNX and ONNX Runtime, exact and fast.

The op's contract (``infer``), its exact NumPy reference (``dequantize``), the op as an ONNX node
(``DOMAIN``, ``make_node``, a registered schema), a lowering pass to standard ONNX (``lower``), a Python
kernel for ONNX Runtime (``session``), nGraph's JSON importer (``ngraph.convert``) and validation
(``validate``).
"""

from __future__ import annotations

from . import dtypes, ngraph
from .compare import same_bits, ulp_distance
from .contract import TensorType, infer
from .errors import DequantizeError
from .lowering import lower
from .ort import KernelSession, session
from .reference import DequantizeOp, dequantize
from .schema import DOMAIN, OP_TYPE, make_node
from .validation import Policy, Report, validate

__version__ = "0.1.0"

__all__ = [
    "DOMAIN",
    "OP_TYPE",
    "DequantizeError",
    "DequantizeOp",
    "KernelSession",
    "Policy",
    "Report",
    "TensorType",
    "dequantize",
    "dtypes",
    "infer",
    "lower",
    "make_node",
    "ngraph",
    "same_bits",
    "session",
    "ulp_distance",
    "validate",
]
