"""onnx_dequant: nGraph's multi-axis Dequantize in ONNX and ONNX Runtime, exact and fast.

The op's contract (``infer``), its exact NumPy reference (``dequantize``), the op as an ONNX node
(``DOMAIN``, ``make_node``, a registered schema), a lowering pass to standard ONNX (``lower``), a Python
kernel for ONNX Runtime (``session``), nGraph's JSON importer (``ngraph.convert``) and validation
(``validate``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the public names for readers and type checkers; at run time each loads on first use
    from . import dtypes, ngraph
    from .compare import same_bits, ulp_distance
    from .contract import TensorType, infer
    from .errors import DequantizeError
    from .lowering import lower
    from .ort import KernelIOBinding, KernelSession, session
    from .reference import DequantizeOp, dequantize
    from .schema import DOMAIN, OP_TYPE, make_node
    from .validation import Policy, Report, validate

_WHERE = {
    "dtypes": None,
    "ngraph": None,
    "same_bits": "compare",
    "ulp_distance": "compare",
    "TensorType": "contract",
    "infer": "contract",
    "DequantizeError": "errors",
    "lower": "lowering",
    "KernelIOBinding": "ort",
    "KernelSession": "ort",
    "session": "ort",
    "DequantizeOp": "reference",
    "dequantize": "reference",
    "DOMAIN": "schema",
    "OP_TYPE": "schema",
    "make_node": "schema",
    "Policy": "validation",
    "Report": "validation",
    "validate": "validation",
}
"""Where each public name lives (None: it is a subpackage). Importing ``onnx_dequant`` loads nothing
heavy, so the command can handle Ctrl-C while NumPy, ONNX and ONNX Runtime load; the first use of a
function, class or constant also registers the op's schema with ONNX."""


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = _WHERE[name]
    module = importlib.import_module(f".{where or name}", __name__)
    if where is None:  # a subpackage (also reached here by ``from . import dtypes`` inside the package)
        return module
    value = getattr(module, name)
    importlib.import_module(".schema", __name__)  # the op's schema, registered with ONNX on first use
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


__version__ = "0.1.0"

__all__ = [
    "DOMAIN",
    "OP_TYPE",
    "DequantizeError",
    "DequantizeOp",
    "KernelIOBinding",
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
