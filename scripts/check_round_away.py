#!/usr/bin/env python3
"""Check exhaustively that ``floor(|v| + 0.49999997)`` is C's ``round(v)`` (half away from zero) for every f32.

    python scripts/check_round_away.py     # every non-negative f32 below 2^25 (about 1.3e9 values; minutes)

The importer's requantization of nGraph's quantized ops (``onnx_dequant/ngraph/ops/quantized.py``,
``round_half_away``) relies on it; the sign is restored by ``sign(v)``, and from 2^24 on every f32 is an
integer that the sum leaves unchanged. With 0.5 instead, the sum rounds up at 0.49999997 and at odd
integers from 2^23.
"""

import time

import numpy as np


def main() -> int:
    t = time.time()
    c = np.float32(0.5) - np.float32(2.0**-25)  # 0.49999997
    assert c == np.nextafter(np.float32(0.5), np.float32(0))
    end = int(np.float32(2.0**25).view(np.uint32))  # every non-negative f32 below 2^25 (beyond: integers)
    bad = 0
    for start in range(0, end, 1 << 26):
        bits = np.arange(start, min(end, start + (1 << 26)), dtype=np.uint32)
        v = bits.view(np.float32)
        r = np.floor(v + c)
        f = np.floor(v)
        want = np.where(v - f >= np.float32(0.5), f + np.float32(1), f)
        bad += int(np.count_nonzero(r != want))
    print("mismatches:", bad, "in", end, "values", round(time.time() - t), "s")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
