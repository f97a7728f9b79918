"""Recurrent cells: RNNCell, GRUCell, LSTMCell in nGraph 0.26's form (run by nGraph itself) and in the later
serializer's form (one bias per gate, states after X, LSTM ``weights_format``, GRUCell op_version 3), which
0.26 cannot read: those cases' expected values are nGraph 0.26's outputs of the same cell written in 0.26's
form (weights reordered to ``iofc``, the bias as ``[Wb, Rb = 0]``), which the op's definition makes equal.
LSTMSequence (later nGraph only) likewise: its expected values are nGraph 0.26's outputs of the op's
decomposition (``LSTMSequence::decompose_op``) written in 0.26's ops: per step an LSTMCell, Select against
``Greater(t, sequence_lengths)``, ReverseSequence around a reverse pass, Concat."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph
from ._ops import ulp

RNG = np.random.default_rng(12)
BATCH, INPUT, HIDDEN = 3, 4, 5
SUMS = (
    "the gates' dot products in ONNX Runtime's MatMul order, nGraph's Dot in index order, then Sigmoid / Tanh "
    "from ONNX Runtime's and the C library's approximations"
)
BUDGET = 4
ORACLE = "/work/shared/ngraph-oracle"


def _r(*shape, dt=np.float32, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(dt)


def _cell_case(name: str, op: str, inputs: list[np.ndarray], note: str, version: int = 0, **attrs) -> GoldenCase:
    w = FunctionWriter()
    ps = [w.parameter(x.dtype, list(x.shape)) for x in inputs]
    y = w.op(op, *ps, version=version, **attrs)
    if op == "LSTMCell":
        w.result(w.op("GetOutputElement", y, n=0))
        w.result(w.op("GetOutputElement", y, n=1))
    else:
        w.result(y)
    return GoldenCase(name, graph(w), dict(zip(ps, inputs)), note=note)


def _attrs(hidden: int, acts: list[str], alpha=(), beta=(), clip=0.0, later=False) -> dict:
    key = "activations_" if later else "activation_"
    return {
        "hidden_size": hidden,
        "activations": acts,
        key + "alpha": list(alpha),
        key + "beta": list(beta),
        "clip": clip,
    }


def _lstm_inputs(dt=np.float32):
    x, h, c = _r(BATCH, INPUT, dt=dt), _r(BATCH, HIDDEN, dt=dt), _r(BATCH, HIDDEN, dt=dt)
    w, r = _r(4 * HIDDEN, INPUT, dt=dt), _r(4 * HIDDEN, HIDDEN, dt=dt)
    b, p = _r(8 * HIDDEN, dt=dt), _r(3 * HIDDEN, dt=dt)
    return [x, w, r, h, c, b, p]


def _lstm(name: str, note: str, dt=np.float32, acts=("sigmoid", "tanh", "tanh"), input_forget=False, **kw):
    attrs = _attrs(HIDDEN, list(acts), **kw)
    return ulp(_cell_case(name, "LSTMCell", _lstm_inputs(dt), note, input_forget=input_forget, **attrs), BUDGET, SUMS)


def _rnn(name: str, note: str, acts=("tanh",), **kw):
    ins = [_r(BATCH, INPUT), _r(HIDDEN, INPUT), _r(HIDDEN, HIDDEN), _r(BATCH, HIDDEN), _r(2 * HIDDEN)]
    return ulp(_cell_case(name, "RNNCell", ins, note, **_attrs(HIDDEN, list(acts), **kw)), BUDGET, SUMS)


def _gru_inputs():
    return [_r(BATCH, INPUT), _r(3 * HIDDEN, INPUT), _r(3 * HIDDEN, HIDDEN), _r(BATCH, HIDDEN), _r(6 * HIDDEN)]


def _gru(name: str, note: str, acts=("sigmoid", "tanh"), lbr=False, **kw):
    attrs = _attrs(HIDDEN, list(acts), **kw)
    return ulp(_cell_case(name, "GRUCell", _gru_inputs(), note, linear_before_reset=lbr, **attrs), BUDGET, SUMS)


# ---------------------------------------------------------------- the later form, expected from 0.26


def _oracle_outputs(case: GoldenCase) -> list[np.ndarray]:
    """nGraph 0.26's outputs of ``case`` (its Results in order)."""
    sys.path.insert(0, ORACLE)
    from ngraph_oracle import run  # (the oracle is only needed to write the golden files)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.json")
        with open(path, "w") as f:
            json.dump(case.graph, f)
        _, outs, info = run(path, list(case.inputs.values()), return_info=True)
    return [np.asarray(y).reshape(d["shape"]) for y, d in zip(outs, info["describe"]["results"])]


def _later(name: str, op: str, inputs: list[np.ndarray], same_as: GoldenCase, note: str, version=0, **attrs):
    case = _cell_case(
        name,
        op,
        inputs,
        note + "; expected: nGraph 0.26's outputs of the same cell in 0.26's form",
        version=version,
        **attrs,
    )
    outs = _oracle_outputs(same_as)
    case.expected = dict(zip(case.graph[-1]["result"], outs))
    return ulp(case, BUDGET, SUMS)


_GATES = "iofc"


def _reorder(a: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Gate blocks of ``a`` (axis 0) from order ``src`` to ``dst``."""
    blocks = dict(zip(src, np.split(a, 4)))
    return np.concatenate([blocks[g] for g in dst])


def _later_lstm(name: str, fmt, letters: str, **kw) -> GoldenCase:
    x, w, r, h, c, b, p = _lstm_inputs()
    b = b[: 4 * HIDDEN]
    attrs = _attrs(HIDDEN, ["sigmoid", "tanh", "tanh"], later=True, **kw)
    old = _cell_case(
        name + "_in_0.26",
        "LSTMCell",
        [
            x,
            _reorder(w, letters, _GATES),
            _reorder(r, letters, _GATES),
            h,
            c,
            np.concatenate([_reorder(b, letters, _GATES), np.zeros_like(b)]),
            p,
        ],
        "",
        input_forget=False,
        **_attrs(HIDDEN, ["sigmoid", "tanh", "tanh"], **kw),
    )
    return _later(
        name,
        "LSTMCell",
        [x, h, c, w, r, b, p],
        old,
        f"LSTMCell in the later form, weights_format {fmt!r}",
        input_forget=False,
        weights_format=fmt,
        **attrs,
    )


def _later_rnn() -> GoldenCase:
    x, w, r, h, b = _r(BATCH, INPUT), _r(HIDDEN, INPUT), _r(HIDDEN, HIDDEN), _r(BATCH, HIDDEN), _r(HIDDEN)
    old = _cell_case(
        "old", "RNNCell", [x, w, r, h, np.concatenate([b, np.zeros_like(b)])], "", **_attrs(HIDDEN, ["relu"], clip=1.5)
    )
    return _later(
        "rnn_cell_later",
        "RNNCell",
        [x, h, w, r, b],
        old,
        "RNNCell in the later form, relu, clip 1.5",
        **_attrs(HIDDEN, ["relu"], clip=1.5, later=True),
    )


def _later_gru(name: str, lbr: bool) -> GoldenCase:
    x, w, r, h, b6 = _gru_inputs()
    b = b6[: (3 + lbr) * HIDDEN]
    old_b = (
        np.concatenate([b[: 3 * HIDDEN], np.zeros(2 * HIDDEN, np.float32), b[3 * HIDDEN :]])
        if lbr
        else (np.concatenate([b, np.zeros_like(b)]))
    )
    old = _cell_case(
        "old", "GRUCell", [x, w, r, h, old_b], "", linear_before_reset=lbr, **_attrs(HIDDEN, ["sigmoid", "tanh"])
    )
    return _later(
        name,
        "GRUCell",
        [x, h, w, r, b],
        old,
        f"GRUCell op_version 3, linear_before_reset {lbr}",
        version=3,
        linear_before_reset=lbr,
        **_attrs(HIDDEN, ["sigmoid", "tanh"], later=True),
    )


SEQ = 3


def _seq_reference(ins: dict, direction: str, fmt: str, acts, alpha, beta, clip: float, input_forget: bool):
    """LSTMSequence's decomposition in nGraph 0.26's ops, and its inputs (per direction, in 0.26's form)."""
    w = FunctionWriter()
    feeds = {}

    def param(a):
        p = w.parameter(a.dtype, list(a.shape))
        feeds[p] = a
        return p

    x, lens = param(ins["X"]), param(ins["lens"])
    shape = [BATCH, HIDDEN]
    lens_b = w.op("Broadcast", lens, shape=shape, axes=[1])
    ys, hs, cs = [], [], []
    for k, reverse in enumerate([direction == "reverse"] if direction != "bidirectional" else [False, True]):
        W, R = (param(_reorder(ins[n][k], fmt, _GATES)) for n in ("W", "R"))
        B = param(np.concatenate([_reorder(ins["B"][k], fmt, _GATES), np.zeros(4 * HIDDEN, np.float32)]))
        P = param(ins["P"][k])
        h, c = param(ins["H"][k]), param(ins["C"][k])
        xs = w.op("ReverseSequence", x, lens, batch_axis=1, sequence_axis=0) if reverse else x
        steps = []
        for t in range(SEQ):
            xt = w.op("Slice", xs, lower_bounds=[t, 0, 0], upper_bounds=[t + 1, BATCH, INPUT], strides=[1, 1, 1])
            xt = w.op("Reshape", xt, input_order=[0, 1, 2], output_shape=[BATCH, INPUT])
            cell = w.op(
                "LSTMCell", xt, W, R, h, c, B, P, input_forget=input_forget, **_attrs(HIDDEN, acts, alpha, beta, clip)
            )
            h_new, c_new = w.op("GetOutputElement", cell, n=0), w.op("GetOutputElement", cell, n=1)
            done = w.op("Greater", w.constant(np.full(shape, t + 1, np.int32)), lens_b)
            y = w.op("Select", done, w.constant(np.zeros(shape, np.float32)), h_new)
            steps.append(w.op("Reshape", y, input_order=[0, 1], output_shape=[1, BATCH, HIDDEN]))
            h, c = w.op("Select", done, h, h_new), w.op("Select", done, c, c_new)
        y = w.op("Concat", *steps, axis=0)
        if reverse:
            y = w.op("ReverseSequence", y, lens, batch_axis=1, sequence_axis=0)
        ys.append(w.op("Reshape", y, input_order=[0, 1, 2], output_shape=[SEQ, 1, BATCH, HIDDEN]))
        hs.append(w.op("Reshape", h, input_order=[0, 1], output_shape=[1, BATCH, HIDDEN]))
        cs.append(w.op("Reshape", c, input_order=[0, 1], output_shape=[1, BATCH, HIDDEN]))
    for parts, axis in ((ys, 1), (hs, 0), (cs, 0)):
        w.result(parts[0] if len(parts) == 1 else w.op("Concat", *parts, axis=axis))
    return GoldenCase("reference", graph(w), feeds)


def _sequence(
    name: str,
    direction,
    lens,
    fmt="ifco",
    acts=("sigmoid", "tanh", "tanh"),
    alpha=(),
    beta=(),
    clip=0.0,
    input_forget=False,
    peepholes=True,
    note="",
) -> GoldenCase:
    dirname = direction.lower() if isinstance(direction, str) else ("forward", "reverse", "bidirectional")[direction]
    dirs = 2 if dirname == "bidirectional" else 1
    ins = {
        "X": _r(SEQ, BATCH, INPUT),
        "H": _r(dirs, BATCH, HIDDEN),
        "C": _r(dirs, BATCH, HIDDEN),
        "lens": np.array(lens, np.int32),
        "W": _r(dirs, 4 * HIDDEN, INPUT),
        "R": _r(dirs, 4 * HIDDEN, HIDDEN),
        "B": _r(dirs, 4 * HIDDEN),
        "P": _r(dirs, 3 * HIDDEN) if peepholes else np.zeros((dirs, 3 * HIDDEN), np.float32),
    }
    letters = fmt if isinstance(fmt, str) else ("fico", "icof", "ifco", "ifoc", "iofc")[fmt]
    w = FunctionWriter()
    order = ["X", "H", "C", "lens", "W", "R", "B"] + (["P"] if peepholes else [])
    ps = [w.parameter(ins[n].dtype, list(ins[n].shape)) for n in order]
    attrs = _attrs(HIDDEN, list(acts), alpha, beta, later=True)
    del attrs["clip"]
    seq = w.op(
        "LSTMSequence",
        *ps,
        direction=direction,
        weights_format=fmt,
        input_forget=input_forget,
        clip_threshold=clip,
        **attrs,
    )
    for k in range(3):
        w.result(w.op("GetOutputElement", seq, n=k))
    ref = _seq_reference(ins, dirname, letters, list(acts), alpha, beta, clip, input_forget)
    case = GoldenCase(
        name,
        graph(w),
        dict(zip(ps, (ins[n] for n in order))),
        note=f"LSTMSequence {note}; expected: nGraph 0.26's outputs of the op's decomposition in 0.26's ops",
        expected=dict(zip(w.results, _oracle_outputs(ref))),
    )
    return ulp(case, BUDGET * 2, SUMS + ", over three steps")


def cases():
    return [
        _lstm("lstm_cell", "LSTMCell with bias and peepholes"),
        _lstm("lstm_cell_clip_input_forget", "LSTMCell, clip 0.4, input_forget", clip=0.4, input_forget=True),
        _lstm(
            "lstm_cell_activations",
            "LSTMCell, activations HardSigmoid (alpha 0.3, beta 0.45), Relu, Tanh (names in any case)",
            acts=("HardSigmoid", "Relu", "tanh"),
            alpha=(0.3,),
            beta=(0.45,),
        ),
        _lstm("lstm_cell_f64", "LSTMCell on f64", dt=np.float64),
        _rnn("rnn_cell", "RNNCell, tanh"),
        _rnn("rnn_cell_sigmoid_clip", "RNNCell, sigmoid, clip 0.3", acts=("sigmoid",), clip=0.3),
        _gru("gru_cell", "GRUCell"),
        _gru("gru_cell_linear_before_reset", "GRUCell, linear_before_reset", lbr=True),
        _gru(
            "gru_cell_activations_clip",
            "GRUCell, hardsigmoid (default alpha, beta) and relu, clip 0.5",
            acts=("hardsigmoid", "relu"),
            clip=0.5,
        ),
        _later_lstm("lstm_cell_later_ifco", "ifco", "ifco"),
        _later_lstm("lstm_cell_later_fico", "fico", "fico", clip=0.6),
        _later_lstm("lstm_cell_later_format_index", 4, "iofc"),
        _later_rnn(),
        _later_gru("gru_cell_v3", False),
        _later_gru("gru_cell_v3_linear_before_reset", True),
        _sequence("lstm_sequence_forward", "forward", [3, 3, 3], note="forward, full lengths"),
        _sequence(
            "lstm_sequence_forward_lengths_outside",
            "forward",
            [0, 5, 2],
            note="forward, lengths 0 (Y_h, Y_c hold the initial state) and past the sequence (no masking)",
        ),
        _sequence("lstm_sequence_reverse", 1, [3, 1, 2], fmt="fico", peepholes=False, note="reverse, mixed lengths"),
        _sequence("lstm_sequence_bidirectional", "bidirectional", [2, 3, 1], note="bidirectional, mixed lengths"),
        _sequence(
            "lstm_sequence_forward_clip",
            "forward",
            [1, 3, 2],
            fmt=4,
            clip=0.5,
            note="forward, mixed lengths, clip 0.5 (decomposed)",
        ),
        _sequence(
            "lstm_sequence_bidirectional_decomposed",
            "BIDIRECTIONAL",
            [3, 2, 1],
            acts=("hardsigmoid", "tanh", "relu"),
            alpha=(0.25,),
            beta=(0.55,),
            input_forget=True,
            note="bidirectional, mixed lengths, hardsigmoid / tanh / relu, input_forget (decomposed)",
        ),
    ]
