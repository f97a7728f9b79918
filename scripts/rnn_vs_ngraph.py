#!/usr/bin/env python3
"""How far ONNX's RNN / GRU / LSTM (ONNX Runtime's kernels) and nGraph's decomposition (the importer's other
form) are from real nGraph 0.26 on the recurrent cells of the golden suite (tests/golden/ops_rnn, f32).

    python scripts/rnn_vs_ngraph.py

Prints, per case and output, the largest error in ULP of the output's largest magnitude (the golden budget's
unit) and the largest error in ULP of the element itself, for both forms. The importer uses the ONNX op only
where the two agree (docs/ngraph.md, "Recurrent ops").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

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


def main() -> int:
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
