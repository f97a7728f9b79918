#!/usr/bin/env python3
"""Benchmark the NumPy reference against a casting copy and the naive expression, side by side.

    python scripts/bench.py            # 64M int8 elements per case
    python scripts/bench.py --quick    # 4M elements, 3 runs (smoke test)
    python scripts/bench.py --all      # then every other scripts/bench_*.py, one after another

Targets (issue 2): the reference at most 2x a casting copy (int8 -> f32 into a preallocated array) on
64M int8 elements with a multi-axis scale, and its peak allocation at most 1.25x the output's size.
A fresh output array costs the kernel's page zeroing (about one more copy's worth of memory traffic);
the ``out=`` row shows the reference writing into a preallocated array, like the copy does.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
from benchlib import Bench, Row, case_data

import onnx_dequant as odq
from onnx_dequant import reference

HERE = Path(__file__).resolve().parent

# (name, shape, axes) on 64M elements
CASES = [
    ("rank4 axes{0,1}", (64, 16, 256, 256), (0, 1)),
    ("rank3 axes{0,2}", (256, 512, 512), (0, 2)),
    ("rank4 axes{1,3}", (16, 64, 256, 256), (1, 3)),
    ("rank3 axes{}", (256, 512, 512), ()),
    ("rank3 axes{last}", (256, 512, 512), (2,)),
]


def peak_ratio(fn, out_nbytes: int) -> float:
    """Peak bytes NumPy allocates during ``fn()`` (the result included) over the output's size."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return peak / out_nbytes


def numpy_loop(x, s, z, axes):
    """The reference with its compiled loop switched off (what a machine without Numba runs)."""
    saved = reference.FUSED_MIN_ELEMENTS
    reference.FUSED_MIN_ELEMENTS = 1 << 62
    try:
        return odq.dequantize(x, s, z, axes=axes)
    finally:
        reference.FUSED_MIN_ELEMENTS = saved


def main() -> int:
    bench = Bench("onnx_dequant reference: NumPy reference vs casting copy vs naive expression")
    bench.parser.add_argument("--all", action="store_true", help="also run every scripts/bench_*.py")
    args = bench.args
    scale_down = 16 if args.quick else 1
    rng = np.random.default_rng(0)
    for name, shape, axes in CASES:
        shape = (shape[0] // scale_down,) + shape[1:]
        if not bench.wants(name):
            continue
        x, s, z = case_data(rng, shape, axes)
        b = tuple(shape[i] if i in axes else 1 for i in range(len(shape)))
        pre = np.empty(shape, np.float32)
        pre2 = np.empty(shape, np.float32)
        sb, zb = s.reshape(b), z.reshape(b)
        case = f"{name} {x.size / 2**20:.0f}M int8->f32"
        bench.case(
            case,
            {
                "casting copy (np.copyto into preallocated)": lambda: np.copyto(pre, x),
                "odq.dequantize": lambda: odq.dequantize(x, s, z, axes=axes),
                "odq.dequantize(out=preallocated)": lambda: odq.dequantize(x, s, z, axes=axes, out=pre2),
                "odq.dequantize, NumPy loop (no Numba)": lambda: numpy_loop(x, s, z, axes),
                "naive (x.astype(f32) - zp) * s": lambda: (x.astype(np.float32) - zb) * sb,
            },
            baseline="casting copy (np.copyto into preallocated)",
            targets={"odq.dequantize": ("<= 2.0x copy", 2.0)},
        )
        ratio = peak_ratio(lambda: odq.dequantize(x, s, z, axes=axes), pre.nbytes)
        naive = peak_ratio(lambda: (x.astype(np.float32) - zb) * sb, pre.nbytes)
        ok = ratio <= 1.25
        print(
            f"peak allocation / output size: odq.dequantize {ratio:.3f}x  "
            f"(target <= 1.25x{'  ok' if ok else '  MISSED'}),"
            f" naive {naive:.2f}x"
        )

        bench.rows.append(Row(case, "odq.dequantize peak memory", 0.0, ratio, "output size", "<= 1.25x output", ok))
        x = pre = pre2 = None  # free before the next case allocates
    status = bench.finish()
    if args.all:
        for script in sorted(HERE.glob("bench_*.py")):
            print(f"\n==== {script.name}", flush=True)
            extra = ["--quick"] if args.quick else []
            status |= subprocess.call([sys.executable, str(script), *extra])
    return status


if __name__ == "__main__":
    sys.exit(main())
