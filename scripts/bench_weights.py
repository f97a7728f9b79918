"""The cost of each choice for a quantized constant weight (issue 14), side by side in one run.

An int8 per-channel weight [K, N] (K = N = 1024, axis 1, with zero points) dequantized by our op and
feeding a MatMul with activations [M, K], for M = 1 and M = 512, ONNX Runtime on one thread:

- ``quantized`` (``lower --weights quantized``, the default) at ORT's default level: ORT fuses the
  DequantizeLinear -> MatMul into MatMulNBits, whose default ``session.qdq_matmulnbits_accuracy_level``
  quantizes the activations to int8;
- the same model with ``--ort-config session.qdq_matmulnbits_accuracy_level=0``: f32 activations, the
  weight dequantized on every run;
- ``float`` (``lower --weights float``): the weight folded into an f32 initializer by the exact
  reference (four times the bytes).

Each row also gives the largest error against the exact result, relative to max |y| (the float-folded
MatMul is as exact as ORT's f32 MatMul). Run: ``python scripts/bench_weights.py [--quick]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Bench  # noqa: E402

import onnx_dequant as odq  # noqa: E402


def weight_model(k: int, n: int, rng: np.random.Generator) -> tuple[onnx.ModelProto, np.ndarray]:
    """Our op on an int8 [k, n] weight (per-channel on axis 1) feeding MatMul; and the exact f64 weight."""
    w = rng.integers(-128, 128, (k, n), dtype=np.int8)
    s = rng.uniform(0.001, 0.01, n).astype(np.float32)
    z = rng.integers(-8, 8, n, dtype=np.int8)
    g = helper.make_graph(
        [odq.make_node(["w", "s", "z"], ["wd"], axes=(1,), name="dq"), helper.make_node("MatMul", ["x", "wd"], ["y"])],
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)])
    exact = (w.astype(np.float64) - z) * s.astype(np.float64)
    return model, exact


def session(model: onnx.ModelProto, config: dict[str, str]) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    for key, value in config.items():
        so.add_session_config_entry(key, value)
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def main() -> int:
    bench = Bench("Weights: quantized (ORT's fusion), accuracy_level=0, float-folded")
    args = bench.args
    k = n = 256 if args.quick else 1024
    rng = np.random.default_rng(0)
    model, exact_w = weight_model(k, n, rng)
    quantized, folded = odq.lower(model, weights="quantized"), odq.lower(model, weights="float")
    sessions = {
        "quantized, ORT default (MatMulNBits)": session(quantized, {}),
        "quantized, accuracy_level=0": session(quantized, {"session.qdq_matmulnbits_accuracy_level": "0"}),
        "float-folded": session(folded, {}),
    }
    sizes = {
        "quantized": sum(t.ByteSize() for t in quantized.graph.initializer),
        "float": sum(t.ByteSize() for t in folded.graph.initializer),
    }
    print(
        f"# K = N = {k}; initializer bytes: quantized {sizes['quantized']}, float {sizes['float']} "
        f"({sizes['float'] / sizes['quantized']:.2f}x)"
    )
    for m in (1, 512):
        x = rng.standard_normal((m, k)).astype(np.float32)
        exact = x.astype(np.float64) @ exact_w
        for name, sess in sessions.items():
            y = sess.run(None, {"x": x})[0]
            err = float(np.max(np.abs(y - exact)) / np.max(np.abs(exact)))
            print(f"# M={m} {name}: max |y - exact| / max |exact| = {err:.1e}")
        runs = {name: (lambda sess=sess: sess.run(None, {"x": x})) for name, sess in sessions.items()}
        bench.case(f"M={m}, K=N={k}, 1 thread", runs, "quantized, ORT default (MatMulNBits)")
    return bench.finish()


if __name__ == "__main__":
    sys.exit(main())
