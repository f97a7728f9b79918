"""Helpers shared by the ``ops_*`` golden families: one-op graphs from FunctionWriter."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
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


def run_ngraph(w: FunctionWriter, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Real nGraph's outputs of a graph (the runner of make_golden.py: $NGRAPH_RUN or the oracle's ngraph-run)."""
    runner = os.environ.get("NGRAPH_RUN") or "/work/shared/ngraph-oracle/ngraph-run"
    with tempfile.TemporaryDirectory(prefix="golden_") as tmp:
        path = Path(tmp) / "g.json"
        path.write_text(json.dumps(graph(w)))
        args = [runner, str(path), "-o", tmp]
        for k, (name, x) in enumerate(feeds.items()):
            np.save(Path(tmp) / f"in_{k}.npy", x)
            args += ["-i", f"{name}={Path(tmp) / f'in_{k}.npy'}"]
        out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True, timeout=600).stdout)
        return [np.load(r["file"]) for r in out["results"]]
