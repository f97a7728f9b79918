#!/usr/bin/env python
"""ONNX Runtime on the converted model against nGraph 0.26's own CPU backend, side by side in one run.

    python scripts/bench_vs_ngraph.py [--runner PATH] [--repeat N] [--trials K] [--threads T] [--quick]

Graphs: the samples of models/ (``quantized_mlp`` with its Adds in nGraph 0.26's spelling and a static batch;
``conv_block`` only where nGraph's CPU backend can JIT its convolutions), an MLP and an LSTM generated here
(i8 per-channel weights dequantized in the graph), and graphs of the ops that are no Dequantize: chains of
nGraph's LSTMCell, GRUCell and RNNCell (ONNX LSTM / GRU / RNN after conversion), BatchNormInference, and an MLP
of opset-0 Gemm (f32 weights). LSTMSequence is not among them: nGraph 0.26 has no such op.
nGraph: ``ngraph-run --backend CPU --repeat M`` prints the
mean of M calls, the first included; two runs (``M = N/5`` and ``N/5 + N``) take the first call out:
``(total_long - total_short) / N``. ONNX Runtime: the lowered model at the default level with
``session.disable_quant_qdq=1``, warmed up, then the median of N timed calls. Each side is measured
``--trials`` times, interleaved; the table shows medians and the ratio ORT / nGraph; the target is a geometric
mean <= 1.0x. Both sides get ``--threads`` threads (default 1: on a loaded machine nGraph's OpenMP threads
spin-wait and its times grow tenfold).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import benchlib  # noqa: E402

import onnx_dequant as odq  # noqa: E402
from onnx_dequant.ngraph.writer import FunctionWriter  # noqa: E402

DEFAULT_RUNNER = "/work/shared/ngraph-oracle/ngraph-run"


def _quantized(w: FunctionWriter, rng: np.random.Generator, k: int, n: int):
    """An f32 (k, n) weight stored as i8 with one scale per output column, dequantized in the graph."""
    q = w.constant(rng.integers(-127, 128, (k, n), dtype=np.int8))
    s = w.constant((rng.uniform(0.5, 2.0, n) / (8 * math.sqrt(k))).astype(np.float32))
    z = w.constant(np.zeros(n, np.int8))
    return w.op("Dequantize", q, s, z, type="f32", axes=[1])


def mlp(batch: int, sizes: list[int]) -> tuple[FunctionWriter, dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    w = FunctionWriter("mlp")
    x = w.parameter("f32", [batch, sizes[0]])
    h = x
    for i, (k, n) in enumerate(zip(sizes, sizes[1:])):
        h = w.op("Dot", h, _quantized(w, rng, k, n), reduction_axes_count=1)
        h = w.binary("Add", h, w.constant(rng.uniform(-0.1, 0.1, n).astype(np.float32)))
        if i < len(sizes) - 2:
            h = w.op("Relu", h)
    w.result(w.op("Softmax", h, softmax_axes=[1]))
    return w, {"Parameter_0": rng.standard_normal((batch, sizes[0])).astype(np.float32)}


def lstm(batch: int, inputs: int, hidden: int, steps: int) -> tuple[FunctionWriter, dict[str, np.ndarray]]:
    """An LSTM unrolled over ``steps``: gates = [x_t, h] . W + b, split four ways; c and h updated."""
    rng = np.random.default_rng(2)
    w = FunctionWriter("lstm")
    xs = [w.parameter("f32", [batch, inputs]) for _ in range(steps)]
    weight = _quantized(w, rng, inputs + hidden, 4 * hidden)
    bias = w.constant(rng.uniform(-0.1, 0.1, 4 * hidden).astype(np.float32))
    h = w.constant(np.zeros((batch, hidden), np.float32))
    c = w.constant(np.zeros((batch, hidden), np.float32))

    def gate(g, k: int):
        return w.op("Slice", g, lower_bounds=[0, k * hidden], upper_bounds=[batch, (k + 1) * hidden], strides=[1, 1])

    for x in xs:
        g = w.binary("Add", w.op("Dot", w.op("Concat", x, h, axis=1), weight, reduction_axes_count=1), bias)
        i, f, o = (w.op("Sigmoid", gate(g, k)) for k in range(3))
        u = w.op("Tanh", gate(g, 3))
        c = w.binary("Add", w.binary("Multiply", f, c), w.binary("Multiply", i, u))
        h = w.binary("Multiply", o, w.op("Tanh", c))
    w.result(h)
    w.result(c)
    feeds = {str(p): rng.standard_normal((batch, inputs)).astype(np.float32) for p in xs}
    return w, feeds


_CELL_ATTRS = {"clip": 0.0, "activation_alpha": [], "activation_beta": []}
_GATES = {"RNNCell": 1, "GRUCell": 3, "LSTMCell": 4}
_ACTS = {"RNNCell": ["tanh"], "GRUCell": ["sigmoid", "tanh"], "LSTMCell": ["sigmoid", "tanh", "tanh"]}


def cells(op: str, batch: int, inputs: int, hidden: int, steps: int) -> tuple[FunctionWriter, dict[str, np.ndarray]]:
    """``steps`` of one recurrent cell (nGraph 0.26's RNNCell, GRUCell or LSTMCell; f32 weights as Constants)."""
    rng = np.random.default_rng(3)
    w = FunctionWriter(op.lower())
    xs = [w.parameter("f32", [batch, inputs]) for _ in range(steps)]
    g = _GATES[op]
    scale = 1 / math.sqrt(inputs + hidden)
    W = w.constant((rng.standard_normal((g * hidden, inputs)) * scale).astype(np.float32))
    R = w.constant((rng.standard_normal((g * hidden, hidden)) * scale).astype(np.float32))
    B = w.constant(rng.uniform(-0.1, 0.1, 2 * g * hidden).astype(np.float32))
    h = c = w.constant(np.zeros((batch, hidden), np.float32))
    attrs = dict(_CELL_ATTRS, hidden_size=hidden, activations=_ACTS[op])
    for x in xs:
        if op == "LSTMCell":
            p = w.constant(np.zeros(3 * hidden, np.float32))
            y = w.op(op, x, W, R, h, c, B, p, input_forget=False, **attrs)
            h, c = w.op("GetOutputElement", y, n=0), w.op("GetOutputElement", y, n=1)
        elif op == "GRUCell":
            h = w.op(op, x, W, R, h, B, linear_before_reset=False, **attrs)
        else:
            h = w.op(op, x, W, R, h, B, **attrs)
    w.result(h)
    if op == "LSTMCell":
        w.result(c)
    return w, {str(p): rng.standard_normal((batch, inputs)).astype(np.float32) for p in xs}


def batch_norm(shape: list[int]) -> tuple[FunctionWriter, dict[str, np.ndarray]]:
    """BatchNormInference (nGraph's inputs: gamma, beta, input, mean, variance) on ``shape``, channels axis 1."""
    rng = np.random.default_rng(4)
    w = FunctionWriter("batch_norm")
    x = w.parameter("f32", shape)
    c = shape[1]
    gamma, beta, mean = (w.constant(rng.standard_normal(c).astype(np.float32)) for _ in range(3))
    var = w.constant(rng.uniform(0.5, 2, c).astype(np.float32))
    w.result(w.op("BatchNormInference", gamma, beta, x, mean, var, eps=1e-5))
    return w, {str(x): rng.standard_normal(shape).astype(np.float32)}


def gemm_mlp(batch: int, sizes: list[int]) -> tuple[FunctionWriter, dict[str, np.ndarray]]:
    """An MLP of nGraph's opset-0 Gemm (``alpha * A . B + beta * C``, B transposed) and Relu, f32 weights."""
    rng = np.random.default_rng(5)
    w = FunctionWriter("gemm_mlp")
    x = w.parameter("f32", [batch, sizes[0]])
    h = x
    for i, (k, n) in enumerate(zip(sizes, sizes[1:])):
        b = w.constant((rng.standard_normal((n, k)) / math.sqrt(k)).astype(np.float32))
        bias = w.constant(np.tile(rng.uniform(-0.1, 0.1, n).astype(np.float32), (batch, 1)))
        h = w.op("Gemm", h, b, bias, alpha=1.0, beta=1.0, transA=False, transB=True)
        if i < len(sizes) - 2:
            h = w.op("Relu", h)
    w.result(h)
    return w, {str(x): rng.standard_normal((batch, sizes[0])).astype(np.float32)}


def samples() -> list[tuple[str, list, dict[str, np.ndarray]]]:
    from golden.samples import cases  # the golden suite's sample cases: nGraph 0.26 spelling, fixed inputs

    out = []
    for c in cases():
        g, feeds = c.graph, dict(c.inputs)
        if c.name == "quantized_mlp":  # a static batch (nGraph's dynamic wrapper recompiles)
            for op in g[-1]["ops"]:
                if op["op"] == "Parameter":
                    op["shape"] = list(feeds[op["name"]].shape)
        out.append((c.name, g, feeds))
    return out


def time_ngraph(runner: str, path: str, feeds: dict[str, np.ndarray], repeat: int, tmp: str, threads: int) -> float:
    """Seconds per call on nGraph's CPU backend, the first call taken out."""
    args = [runner, path, "--backend", "CPU", "-o", tmp]
    for k, x in enumerate(feeds.values()):
        p = os.path.join(tmp, f"in_{k}.npy")
        np.save(p, x)
        args += ["-i", p]

    def call(n: int) -> float:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        proc = subprocess.run(args + ["--repeat", str(n)], capture_output=True, text=True, timeout=600, env=env)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "runner failed")
        return json.loads(proc.stdout)["call_s"]

    short, long = max(repeat // 5, 2), max(repeat // 5, 2) + repeat
    t_short, t_long = call(short) * short, call(long) * long  # both include the first call
    per_call = (t_long - t_short) / repeat
    return per_call if per_call > 0 else t_long / long  # under heavy load the difference can go negative


def ort_session(graph: list, threads: int) -> ort.InferenceSession:
    model = odq.lower(odq.ngraph.convert(graph))
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    # exact and fast: the weights' DequantizeLinear stays a node (no MatMulNBits fusion, whose default accuracy
    # level quantizes activations and whose f32 level 0 is 40-60x slower at batch 1, docs/ngraph.md)
    so.add_session_config_entry("session.disable_quant_qdq", "1")
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def time_ort(sess: ort.InferenceSession, feeds: dict[str, np.ndarray], repeat: int) -> float:
    for _ in range(3):
        sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", default=os.environ.get("NGRAPH_RUN", DEFAULT_RUNNER))
    ap.add_argument("--repeat", type=benchlib.count, default=50, help="calls per measurement (default 50)")
    ap.add_argument("--trials", type=benchlib.count, default=5, help="interleaved measurements per side (default 5)")
    ap.add_argument(
        "--threads", type=benchlib.count, default=1, help="threads for each side (nGraph: OMP_NUM_THREADS; default 1)"
    )
    ap.add_argument("--quick", action="store_true", help="small graphs, few calls (a smoke run)")
    a = ap.parse_args(argv)
    repeat, trials = (5, 1) if a.quick else (a.repeat, a.trials)
    graphs = samples()
    if a.quick:
        generated = [
            ("mlp_64x256", *mlp(8, [64, 256, 10])),
            ("lstm_h64_t4", *lstm(4, 32, 64, 4)),
            ("lstm_cell_h64_t4", *cells("LSTMCell", 4, 32, 64, 4)),
            ("gru_cell_h64_t4", *cells("GRUCell", 4, 32, 64, 4)),
            ("rnn_cell_h64_t4", *cells("RNNCell", 4, 32, 64, 4)),
            ("batch_norm_8x16x8x8", *batch_norm([8, 16, 8, 8])),
            ("gemm_mlp_64x256", *gemm_mlp(8, [64, 256, 10])),
        ]
    else:
        generated = [
            ("mlp_b64_784-1024-1024-10", *mlp(64, [784, 1024, 1024, 10])),
            ("mlp_b1_784-1024-1024-10", *mlp(1, [784, 1024, 1024, 10])),
            ("lstm_b16_i128_h256_t16", *lstm(16, 128, 256, 16)),
            ("lstm_b1_i64_h128_t32", *lstm(1, 64, 128, 32)),
            ("lstm_cell_b16_i128_h256_t16", *cells("LSTMCell", 16, 128, 256, 16)),
            ("lstm_cell_b1_i64_h128_t32", *cells("LSTMCell", 1, 64, 128, 32)),
            ("gru_cell_b16_i128_h256_t16", *cells("GRUCell", 16, 128, 256, 16)),
            ("rnn_cell_b16_i128_h256_t16", *cells("RNNCell", 16, 128, 256, 16)),
            ("batch_norm_32x64x28x28", *batch_norm([32, 64, 28, 28])),
            ("batch_norm_b64_c1024", *batch_norm([64, 1024])),
            ("gemm_mlp_b64_784-1024-1024-10", *gemm_mlp(64, [784, 1024, 1024, 10])),
        ]
    graphs += [(name, [w.to_json()], feeds) for name, w, feeds in generated]
    print(f"{'graph':28} {'nGraph CPU ms':>14} {'ORT ms':>10} {'ORT/nGraph':>11}")
    ratios = []
    with tempfile.TemporaryDirectory(prefix="bench_ngraph_") as tmp:
        for name, g, feeds in graphs:
            path = os.path.join(tmp, f"{name}.json")
            Path(path).write_text(json.dumps(g))
            sess = ort_session(g, a.threads)
            ng, ox = [], []
            try:
                for _ in range(trials):
                    ng.append(time_ngraph(a.runner, path, feeds, repeat, tmp, a.threads))
                    ox.append(time_ort(sess, feeds, repeat))
            except RuntimeError as e:
                print(f"{name:28} {'not run':>14} {'':>10} {'':>11}  nGraph CPU: {str(e)[:90]}")
                continue
            n, o = float(np.median(ng)), float(np.median(ox))
            ratios.append(o / n)
            spread = f"  (nGraph {min(ng) * 1e3:.3f}-{max(ng) * 1e3:.3f}, ORT {min(ox) * 1e3:.3f}-{max(ox) * 1e3:.3f})"
            print(f"{name:28} {n * 1e3:14.3f} {o * 1e3:10.3f} {o / n:10.2f}x{spread}", flush=True)
    if ratios:
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        verdict = "" if a.quick else ("  (target <= 1.0x: met)" if gm <= 1.0 else "  (target <= 1.0x: MISSED)")
        print(f"geometric mean over {len(ratios)} graph(s): {gm:.2f}x{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
