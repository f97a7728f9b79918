"""Convert between every pair of element types the importer takes: real to integer truncation, integer
wrap to narrower types, real to narrower real rounding, boolean both ways; out-of-range real to integer
values are left out (undefined in nGraph's C++, docs/ngraph.md)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from onnx_dequant import dtypes
from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph, importable, specials

TYPES = ("boolean", "f32", "f64", "bf16", "i8", "u8", "i16", "u16", "i32", "i64", "u32", "u64")


def _in_range(x: np.ndarray, src: dtypes.DType, dst: dtypes.DType) -> np.ndarray:
    """The values whose conversion C++ defines: for real -> integer, finite and inside the range after
    truncation."""
    if not (src.kind == "real" and dst.kind not in ("real", "boolean")):
        return x
    info = np.iinfo(dst.numpy)
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        t = np.trunc(wide)
        keep = np.isfinite(wide) & (t >= int(info.min)) & (t <= int(info.max))
    return x[keep]


def cases() -> list[GoldenCase]:
    out: list[GoldenCase] = []
    for s in TYPES:
        src = dtypes.parse(s)
        base = specials(s)
        if src.kind == "real":  # plus values that round in narrower reals and truncate in integers
            extra = np.array([1.0 + 2.0**-9, 1.0 + 3 * 2.0**-9, 65504.0, 65520.0, -7.9, 300.7, 70000.5, 1e10])
            base = np.concatenate([base, extra.astype(ml_dtypes.bfloat16 if s == "bf16" else src.numpy)])
        for d in TYPES:
            if d == s:
                continue
            dst = dtypes.parse(d)
            x = _in_range(base, src, dst)
            w = FunctionWriter()
            w.result(w.op("Convert", w.parameter(s, [x.size]), target_type=d))
            g = graph(w)
            if importable(g):
                out.append(GoldenCase(f"convert_{s}_{d}", g, {"Parameter_0": x}, note=f"Convert {s} -> {d}"))
    return out
