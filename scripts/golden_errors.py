#!/usr/bin/env python3
"""How far ONNX Runtime is from each golden case's expected outputs, against the case's stated budget.

    python scripts/golden_errors.py FAMILY [FAMILY ...]        # e.g. ops_layers

For every case of the families (tests/golden/<family>/), converts it, runs it as tests/test_golden.py does
(lowered and with the Python kernel, ORT's default level and optimizations off) and prints the budget and the
largest error over those runs: in ULP of the output's largest magnitude (the unit a budget for sums is counted
in), and in parentheses in ULP of the element itself. Integer outputs print 0 when equal, "differs" otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_golden import _runs, load_case  # noqa: E402

import onnx_dequant as odq  # noqa: E402


def _error(want: np.ndarray, got: np.ndarray) -> tuple[float, float]:
    if want.dtype.kind != "f":
        return (0.0, 0.0) if np.array_equal(want, got) else (float("inf"), float("inf"))
    if not want.size:
        return 0.0, 0.0
    w, g = np.atleast_1d(want.astype(np.float64)), np.atleast_1d(got.reshape(want.shape).astype(np.float64))
    d = np.abs(w - g)
    d[np.isnan(w) & np.isnan(g)] = 0
    largest = np.spacing(np.max(np.abs(want[np.isfinite(want)]), initial=0).astype(want.dtype))
    return float(np.max(d) / largest), float(np.max(d / np.atleast_1d(np.spacing(np.abs(want))).astype(np.float64)))


def main(families: list[str]) -> int:
    for family in families:
        for path in sorted((ROOT / "tests" / "golden" / family).glob("*.json")):
            inputs, expected, meta = load_case(path)
            model = odq.ngraph.convert(path)
            feeds = {i.name: x for i, x in zip(model.graph.input, inputs.values())}
            of_largest, of_element = 0.0, 0.0
            for _, got in _runs(model, feeds):
                for want, g in zip(expected.values(), got):
                    a, b = _error(want, g)
                    of_largest, of_element = max(of_largest, a), max(of_element, b)
            text = "differs" if of_largest == float("inf") else f"{of_largest:.1f} ({of_element:.0f})"
            print(f"{family}/{path.stem}: budget {meta['ulp'] if meta['ulp'] is not None else 'exact'}, largest {text}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
