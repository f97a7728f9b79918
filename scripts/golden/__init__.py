"""Golden cases: small nGraph graphs whose expected outputs come from real nGraph 0.26.0 (INTERPRETER).

Each module ``scripts/golden/<family>.py`` defines ``cases() -> list[GoldenCase]``; ``scripts/make_golden.py``
discovers every module here (this one excepted), runs each case through nGraph and writes
``tests/golden/<family>/<name>.json`` (the graph) and ``<name>.npz`` (inputs, nGraph's outputs, metadata);
``tests/test_golden.py`` converts each case and compares ONNX Runtime with nGraph. The format is in
docs/ngraph.md ("Golden cases").
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

__all__ = ["GoldenCase", "families", "load_family", "graph", "importable", "specials"]


@dataclass
class GoldenCase:
    """One golden case.

    ``graph``: the nGraph serialized JSON (a list of functions; the last one runs). ``inputs``: one array per
    Parameter, keyed by the Parameter's name. ``note``: what the case is about. ``expected``: outputs keyed by
    Result name, given ONLY where nGraph 0.26 cannot deserialize or run the op (the values then come from the
    op's definition; no runner is called and the case's source is "definition"). ``ulp`` (with ``why``): the
    budget for an inexact op (nGraph and ONNX Runtime may round differently); None means bit-identical.
    """

    name: str
    graph: list
    inputs: dict[str, np.ndarray]
    note: str = ""
    expected: dict[str, np.ndarray] | None = None
    ulp: int | None = None
    why: str = ""

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-." for c in self.name):
            raise ValueError(f"golden case name {self.name!r}: letters, digits, '_', '-', '.' only")
        if self.ulp is not None and not self.why:
            raise ValueError(f"golden case {self.name}: a ULP budget needs its reason (why=...)")


def graph(*functions: FunctionWriter | dict[str, Any]) -> list:
    """The ``graph`` of a case from FunctionWriters (or function objects already serialized)."""
    return [f.to_json() if isinstance(f, FunctionWriter) else f for f in functions]


def families() -> list[str]:
    """Every family module in this package, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load_family(name: str) -> list[GoldenCase]:
    """The cases of one family, checked for unique names."""
    cases: Sequence[GoldenCase] = importlib.import_module(f"{__name__}.{name}").cases()
    seen: set[str] = set()
    for c in cases:
        if c.name in seen:
            raise ValueError(f"family {name}: two cases named {c.name}")
        seen.add(c.name)
    return list(cases)


def importable(graph_: list, opset: int | None = None) -> bool:
    """Whether the importer converts the graph and ONNX Runtime builds sessions for it (lowered and with the
    kernel): cases outside that are refused by name elsewhere (tests/test_ngraph.py) and have nothing to compare."""
    import onnxruntime as ort

    import onnx_dequant as odq
    from onnx_dequant.errors import DequantizeError

    try:
        model = odq.ngraph.convert(graph_) if opset is None else odq.ngraph.convert(graph_, opset=opset)
        ort.InferenceSession(odq.lower(model).SerializeToString(), providers=["CPUExecutionProvider"])
        odq.session(model)
    except Exception as e:  # refused by name, or ORT's NotImplemented / InvalidGraph
        if isinstance(e, DequantizeError) or type(e).__module__.startswith("onnxruntime"):
            return False
        raise
    return True


def specials(et: str) -> np.ndarray:
    """Edge values of an element type: integer extremes and their neighbours; for reals signed zeros, NaN,
    infinities, the largest finite value, subnormals, .5 ties and ordinary values."""
    from onnx_dequant import dtypes

    dt = dtypes.parse(et)
    npdt = dt.numpy
    if dt.kind == "boolean":
        return np.array([False, True], npdt)
    if dt.kind == "real":
        import ml_dtypes

        fi = ml_dtypes.finfo(npdt)
        vals = [-0.0, 0.0, 0.5, -0.5, 1.5, -2.5, 3.0, -7.25, np.inf, -np.inf, np.nan]
        vals += [float(fi.max), -float(fi.max), float(fi.smallest_subnormal), -float(fi.smallest_subnormal)]
        vals += [float(fi.smallest_normal), 1.0 + float(fi.eps)]
        return np.array(vals, np.float64).astype(npdt)
    info = np.iinfo(npdt)
    vals = {int(info.min), int(info.min) + 1, -2, -1, 0, 1, 2, 7, int(info.max) - 1, int(info.max)}
    return np.array(sorted(v for v in vals if info.min <= v <= info.max), npdt)
