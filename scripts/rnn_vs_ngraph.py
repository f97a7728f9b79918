#!/usr/bin/env python3
"""How far ONNX's RNN / GRU / LSTM (ONNX Runtime's kernels) and nGraph's decomposition (the importer's other
form) are from real nGraph 0.26 on the recurrent cells of the golden suite (tests/golden/ops_rnn, f32).

    python scripts/rnn_vs_ngraph.py [--speed]

Prints, per case and output, the largest error in ULP of the output's largest magnitude (the golden budget's
unit) and the largest error in ULP of the element itself, for both forms. The importer uses the ONNX op only
where the two agree (docs/ngraph.md, "Recurrent ops"). ``--speed`` times both forms in ONNX Runtime (one
thread, the median of 40 calls, each model twice, interleaved) on chains of cells from scripts/bench_vs_ngraph.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from test_golden import load_case  # noqa: E402

import onnx_dequant as odq  # noqa: E402
from onnx_dequant.ngraph.ops import rnn  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "ops_rnn"
CASES = ("lstm_cell", "lstm_cell_clip_input_forget", "gru_cell", "gru_cell_linear_before_reset", "rnn_cell")


def _errors(want: np.ndarray, got: np.ndarray) -> str:
    d = np.abs(want.astype(np.float64) - got.reshape(want.shape).astype(np.float64))
    eps = np.finfo(want.dtype).eps
    return f"{d.max() / (np.abs(want).max() * eps):.1f} ({(d / np.spacing(np.abs(want))).max():.0f})"


def _session(model) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _onnx_op(op: dict, vals: list[np.ndarray]) -> list[np.ndarray]:
    """The cell as one ONNX op (0.26's inputs: X, W, R, H[, C], B[, P]; its gate orders are ONNX's)."""
    kind = {"LSTMCell": "LSTM", "GRUCell": "GRU", "RNNCell": "RNN"}[op["op"]]
    names = ["X", "W", "R", "initial_h"] + (["initial_c", "B", "P"] if kind == "LSTM" else ["B"])
    feeds = {n: v[None] for n, v in zip(names, vals)}
    order = ["X", "W", "R", "B", "", "initial_h"] + (["initial_c", "P"] if kind == "LSTM" else [])
    attrs = {"hidden_size": op["hidden_size"]}
    if op.get("clip"):
        attrs["clip"] = float(op["clip"])
    if kind == "LSTM":
        attrs["input_forget"] = int(op["input_forget"])
    if kind == "GRU":
        attrs["linear_before_reset"] = int(op["linear_before_reset"])
    outs = ["Y_h", "Y_c"] if kind == "LSTM" else ["Y_h"]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape)) for n, v in feeds.items()]
    g = helper.make_graph(
        [helper.make_node(kind, order, ["", *outs], **attrs)],
        "cell",
        vi,
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
    )
    return _session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])).run(None, feeds)


def _rnn_chain(graph: list) -> ort.InferenceSession:
    """The RNNCell chain of ``cells`` as ONNX RNN nodes (the importer always decomposes RNNCell)."""
    ops = {o["name"]: o for o in graph[-1]["ops"]}
    steps = [o for o in graph[-1]["ops"] if o["op"] == "RNNCell"]
    _, w, r, h0, b = steps[0]["inputs"]
    inits = []
    for n in (w, r, b, h0):  # a Constant's value: one string per element, or one for all
        v = np.array(ops[n]["value"], np.float32)
        v = v.reshape(ops[n]["shape"]) if v.size > 1 else np.broadcast_to(v, ops[n]["shape"])
        inits.append(helper.make_tensor(n, TensorProto.FLOAT, [1, *v.shape], v.reshape(-1)))
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    nodes, inputs, h = [], [], h0
    for k, op in enumerate(steps):
        x = op["inputs"][0]
        inputs.append(helper.make_tensor_value_info(x, TensorProto.FLOAT, ops[x]["shape"]))
        nodes += [
            helper.make_node("Unsqueeze", [x, "axes"], [f"x{k}"]),
            helper.make_node("RNN", [f"x{k}", w, r, b, "", h], ["", f"y{k}"], hidden_size=op["hidden_size"]),
            helper.make_node("Squeeze", [f"y{k}", "axes"], [f"h{k}"]),
            helper.make_node("Unsqueeze", [f"h{k}", "axes"], [f"h{k}_3d"]),
        ]
        h = f"h{k}_3d"
    out = [helper.make_tensor_value_info(f"h{len(steps) - 1}", TensorProto.FLOAT, None)]
    g = helper.make_graph(nodes, "rnn_chain", inputs, out, [*inits, axes])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _time(graph: list, feeds: dict[str, np.ndarray], onnx_ops: bool) -> float:
    from bench_vs_ngraph import ort_session

    if onnx_ops and graph[-1]["name"] == "rnncell":
        sess = _rnn_chain(graph)
    else:
        if not onnx_ops:
            keep, rnn._onnx_matches = rnn._onnx_matches, lambda cell, defaults: False
        try:
            sess = ort_session(graph, 1)
        finally:
            if not onnx_ops:
                rnn._onnx_matches = keep
    for _ in range(3):
        sess.run(None, feeds)
    times = []
    for _ in range(40):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def speed() -> None:
    from bench_vs_ngraph import cells

    print("cells (batch, input, hidden, steps) | ONNX op ms | decomposition ms  (each twice)")
    for op in ("RNNCell", "GRUCell", "LSTMCell"):
        for size in ((16, 128, 256, 16), (1, 64, 128, 32), (64, 256, 512, 8)):
            w, feeds = cells(op, *size)
            g = [w.to_json()]
            a, b, c, d = (_time(g, feeds, k % 2 == 0) for k in range(4))
            print(f"{op} {size} | {a:.2f} / {c:.2f} | {b:.2f} / {d:.2f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed", action="store_true", help="time both forms instead of measuring their errors")
    if ap.parse_args().speed:
        speed()
        return 0
    print("case | output | ONNX op | decomposition  (ULP of the largest |output|; of the element)")
    decompose = rnn._onnx_matches
    for name in CASES:
        path = GOLDEN / f"{name}.json"
        inputs, expected, _ = load_case(path)
        op = next(o for o in json.loads(path.read_text())[-1]["ops"] if o["op"].endswith("Cell"))
        onnx_outs = _onnx_op(op, list(inputs.values()))
        rnn._onnx_matches = lambda cell, defaults: False
        try:
            model = odq.ngraph.convert(path)
        finally:
            rnn._onnx_matches = decompose
        feeds = {i.name: x for i, x in zip(model.graph.input, inputs.values())}
        ours = _session(model).run(None, feeds)
        for (rname, want), a, b in zip(expected.items(), onnx_outs, ours):
            print(f"{name} | {rname} | {_errors(want, a)} | {_errors(want, b)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
