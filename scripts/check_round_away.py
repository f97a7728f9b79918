#!/usr/bin/env python3
"""Check exhaustively that both forms of the importer's ``std::round`` (half away from zero) are exact.

    python scripts/check_round_away.py     # every f32 of either sign below 2^30 (about 2.6e9 values; minutes)

The requantization of nGraph's quantized ops (``onnx_dequant/ngraph/ops/quantized.py``,
``round_half_away``) rounds with

- ``trunc(2v) - trunc(v)`` (ONNX Runtime's Cast to int32 truncates) where ``|v| < 2^30`` is known: run
  here through ONNX Runtime on every such f32;
- otherwise ``floor(|v| + 0.49999997) * sign(v)``: checked here in NumPy for every non-negative f32 below
  2^25 (the sign is restored by ``sign(v)``, and from 2^24 on every f32 is an integer that the sum leaves
  unchanged). With 0.5 instead, the sum rounds up at 0.49999997 and at odd integers from 2^23.
"""

import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

CHUNK = 1 << 26


def _away(v: np.ndarray) -> np.ndarray:
    """C's round() of f32 values, in f64 (exact)."""
    m = np.abs(v.astype(np.float64))
    return np.copysign(np.floor(m + 0.5), v)


def _bits(end: int):
    for start in range(0, end, CHUNK):
        yield np.arange(start, min(end, start + CHUNK), dtype=np.uint32).view(np.float32)


def _truncating_session() -> ort.InferenceSession:
    n = helper.make_node
    g = helper.make_graph(
        [
            n("Add", ["v", "v"], ["w"]),
            n("Cast", ["w"], ["t2"], to=TensorProto.INT32),
            n("Cast", ["v"], ["t1"], to=TensorProto.INT32),
            n("Sub", ["t2", "t1"], ["r"]),
        ],
        "round_away",
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("r", TensorProto.INT32, [None])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])


def main() -> int:
    t = time.time()
    c = np.float32(0.5) - np.float32(2.0**-25)  # 0.49999997
    assert c == np.nextafter(np.float32(0.5), np.float32(0))
    bad_floor = 0
    for v in _bits(int(np.float32(2.0**25).view(np.uint32))):  # every non-negative f32 below 2^25
        bad_floor += int(np.count_nonzero(np.floor(v + c) != _away(v)))
    print("floor(|v| + 0.49999997):", bad_floor, "mismatches", round(time.time() - t), "s")
    s = _truncating_session()
    bad_trunc = total = 0
    for v in _bits(int(np.float32(2.0**30).view(np.uint32))):  # every non-negative f32 below 2^30
        for signed in (v, -v):
            (r,) = s.run(None, {"v": signed})
            bad_trunc += int(np.count_nonzero(r.astype(np.float64) != _away(signed)))
            total += signed.size
    print("trunc(2v) - trunc(v):", bad_trunc, "mismatches in", total, "values", round(time.time() - t), "s")
    return 0 if bad_floor == bad_trunc == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
