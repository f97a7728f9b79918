"""Helpers shared by the ``ops_*`` golden families: one-op graphs from FunctionWriter."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph


def one_op(name: str, op: str, inputs: list[np.ndarray], *, note: str = "", binary: str | None = None, **attrs: Any):
    """A case: Parameters of the inputs' types and shapes -> ``op`` -> Result."""
    w = FunctionWriter()
    ps = [w.parameter(x.dtype, list(x.shape)) for x in inputs]
    if binary is not None:
        y = w.binary(op, *ps, broadcast=binary, **attrs)
    else:
        y = w.op(op, *ps, **attrs)
    w.result(y)
    return GoldenCase(name, graph(w), {p: x for p, x in zip(ps, inputs)}, note=note or f"{op} {attrs or ''}".strip())


def ulp(case: GoldenCase, n: int, why: str) -> GoldenCase:
    case.ulp = n
    case.why = why
    return case
