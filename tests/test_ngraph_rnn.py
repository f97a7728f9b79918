"""Recurrent ops (RNNCell, GRUCell, LSTMCell, LSTMSequence): which ONNX form each case becomes, nGraph's
checks and messages on bad input, and a fuzz run over the golden graphs (only DequantizeError escapes).
Their numbers are checked against real nGraph in tests/golden/ops_rnn."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import onnx_dequant as odq

GOLDEN = Path(__file__).resolve().parent / "golden" / "ops_rnn"


def _graph(name: str) -> list[dict]:
    return json.loads((GOLDEN / f"{name}.json").read_text())


def _op(g: list[dict]) -> dict:
    return next(o for o in g[-1]["ops"] if o["op"] in ("LSTMCell", "GRUCell", "RNNCell", "LSTMSequence"))


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


@pytest.mark.parametrize(
    ("case", "onnx_op"),
    [
        ("lstm_cell", "LSTM"),
        ("lstm_cell_later_ifco", "LSTM"),
        ("gru_cell", "GRU"),
        ("gru_cell_v3_linear_before_reset", "GRU"),
        ("rnn_cell", None),  # ONNX's RNN matches, but ONNX Runtime's kernel is slower than the decomposition
        ("lstm_cell_f64", None),  # ONNX Runtime's LSTM runs f32 only
        ("lstm_cell_clip_input_forget", None),  # its clip leaves h(C)'s argument alone, nGraph's does not
        ("lstm_cell_activations", None),  # activation parameters are read differently
        ("gru_cell_activations_clip", None),
        ("rnn_cell_sigmoid_clip", None),
        ("lstm_sequence_bidirectional", "LSTM"),
        ("lstm_sequence_reverse", "LSTM"),
        ("lstm_sequence_forward_clip", None),
        ("lstm_sequence_bidirectional_decomposed", None),
    ],
)
def test_onnx_recurrent_op_only_where_it_matches(case, onnx_op):
    ops = _ops(odq.ngraph.convert(_graph(case)))
    if onnx_op is None:
        assert not {"LSTM", "GRU", "RNN"} & set(ops), ops
        assert "MatMul" in ops
    else:
        assert ops.count(onnx_op) == 1 and "MatMul" not in ops, ops


def _error(g: list[dict], match: str) -> None:
    with pytest.raises(odq.DequantizeError) as info:
        odq.ngraph.convert(g)
    assert match in str(info.value), str(info.value)
    assert info.value.node == _op(g)["name"]


def _set(case: str, **attrs) -> list[dict]:
    g = _graph(case)
    _op(g).update(attrs)
    return g


def _param_shape(g: list[dict], k: int, shape: list[int]) -> list[dict]:
    """The graph with the op's input ``k`` (a Parameter) given ``shape``."""
    name = _op(g)["inputs"][k]
    next(o for o in g[-1]["ops"] if o["name"] == name)["shape"] = shape
    return g


@pytest.mark.parametrize(
    ("case", "k", "shape", "match"),
    [
        ("lstm_cell", 1, [19, 4], "Input tensor W must have shape (20, 4). Actual shape is:"),
        ("lstm_cell", 2, [20, 4], "Input tensor R must have shape (20, 5)"),
        ("lstm_cell", 3, [2, 5], "Input tensor H_t must have shape (3, 5)"),
        ("lstm_cell", 4, [3, 4], "Input tensor C_t must have shape (3, 5)"),
        ("lstm_cell", 5, [20], "Input tensor B must have shape (40)"),
        ("lstm_cell", 6, [5], "Input tensor P must have shape (15)"),
        ("lstm_cell_later_ifco", 1, [3, 4], "Input tensor initial_hidden_state must have shape (3, 5)"),
        ("lstm_cell_later_ifco", 5, [40], "Input tensor B must have shape (20)"),
        ("gru_cell", 1, [15, 3], "Input tensor W must have shape (15, 4)"),
        ("gru_cell", 4, [15], "Input tensor B must have shape (30)"),
        ("gru_cell_v3_linear_before_reset", 4, [15], "Input tensor B must have shape (20)"),
        ("rnn_cell", 2, [5, 4], "Input tensor R must have shape (5, 5)"),
        ("rnn_cell_later", 4, [10], "Input tensor B must have shape (5)"),
        ("rnn_cell", 0, [3, 4, 1], "Input tensor X must have rank 2"),
        ("lstm_sequence_bidirectional", 1, [1, 3, 5], "Input tensor initial_hidden_state must have shape (2, 3, 5)"),
        ("lstm_sequence_forward", 4, [1, 20, 5], "Input tensor W must have shape (1, 20, 4)"),
        ("lstm_sequence_forward", 6, [1, 40], "Input tensor B must have shape (1, 20)"),
        ("lstm_sequence_forward", 3, [2], "Input tensor sequence_lengths must have shape (3)"),
        ("lstm_sequence_forward", 0, [3, 12], "Input tensor X must have shape [seq_length >= 1, batch_size"),
    ],
)
def test_shape_checks_are_ngraphs(case, k, shape, match):
    _error(_param_shape(_graph(case), k, shape), match)


@pytest.mark.parametrize(
    ("case", "attrs", "match"),
    [
        ("lstm_cell", {"activations": ["sigmoid", "tanh", "softsign"]}, "Unknown activation function: softsign"),
        ("lstm_cell", {"activations": ["sigmoid", "tanh"]}, "LSTMCell needs 3 activation functions"),
        ("gru_cell", {"activations": "tanh"}, "'activations' must be a list of names"),
        ("rnn_cell", {"clip": -1.0}, "The 'min' parameter needs to be less than 'max' for Clamp"),
        ("rnn_cell", {"activation_alpha": ["x"]}, "'activation_alpha' must be a list of numbers"),
        ("lstm_cell_later_ifco", {"weights_format": "oifc"}, "'weights_format' must be one of fico, icof"),
        ("lstm_cell_later_ifco", {"weights_format": 5}, "'weights_format' must be one of"),
        ("gru_cell", {"hidden_size": 0}, "'hidden_size' must be an integer in [1,"),
        ("gru_cell", {"linear_before_reset": "yes"}, "'linear_before_reset' must be true or false"),
        ("lstm_sequence_forward", {"direction": "sideways"}, "'direction' must be one of forward, reverse"),
        ("lstm_sequence_forward", {"clip_threshold": "1"}, "'clip_threshold' must be a number"),
    ],
)
def test_attribute_checks(case, attrs, match):
    _error(_set(case, **attrs), match)


def test_element_types_must_agree_and_be_real():
    g = _graph("lstm_cell")
    p = next(o for o in g[-1]["ops"] if o["name"] == _op(g)["inputs"][1])
    p["element_type"] = "double"
    _error(g, "LSTMCell's inputs must have one element type (input 0 is f32, input 1 is f64)")
    g = _graph("rnn_cell")
    for o in g[-1]["ops"]:
        if o["op"] == "Parameter":
            o["element_type"] = "int32_t"
    _error(g, "RNNCell on i32 is not supported (real types only)")


def test_sequence_lengths_must_be_i32():
    g = _graph("lstm_sequence_forward")
    next(o for o in g[-1]["ops"] if o["name"] == _op(g)["inputs"][3])["element_type"] = "int64_t"
    _error(g, "sequence_lengths must be i32 (nGraph compares it with an i32 time step), got i64")


def test_constant_lengths_inside_the_sequence_need_no_fix_up():
    """Lengths known to be in [1, seq] go to ONNX's LSTM as they are; others are clamped, and an entry of
    length 0 keeps its initial state (ONNX Runtime zeroes it)."""
    g = _graph("lstm_sequence_forward")
    assert "Where" in _ops(odq.ngraph.convert(g))
    lens = next(o for o in g[-1]["ops"] if o["name"] == _op(g)["inputs"][3])
    lens.update(op="Constant", value=["3", "1", "2"])
    g[-1]["parameters"].remove(lens["name"])
    ops = _ops(odq.ngraph.convert(g))
    assert "Where" not in ops and "Min" not in ops and ops.count("LSTM") == 1, ops


def test_input_count_is_checked():
    g = _graph("lstm_cell")
    _op(g)["inputs"] = _op(g)["inputs"][:6]  # 0.26's form takes 5 or 7
    _error(g, "LSTMCell takes 5 or 7 inputs, got 6")


_GRAPHS = sorted(p.stem for p in GOLDEN.glob("*.json"))
_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**50),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.sampled_from(["tanh", "relu", "ifco", "reverse", "bidirectional", "float", "double"]),
    st.lists(st.one_of(st.integers(-1, 9), st.sampled_from(["tanh", "sigmoid", "x"])), max_size=4),
)
_KEYS = [
    "hidden_size",
    "activations",
    "activation_alpha",
    "activations_alpha",
    "clip",
    "clip_threshold",
    "input_forget",
    "linear_before_reset",
    "weights_format",
    "direction",
    "op_version",
    "inputs",
    "shape",
    "element_type",
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_only_dequantize_error_escapes(data):
    g = copy.deepcopy(_graph(data.draw(st.sampled_from(_GRAPHS))))
    ops = g[-1]["ops"]
    for _ in range(data.draw(st.integers(1, 3))):
        target = data.draw(st.sampled_from([_op(g)] + [o for o in ops if o["op"] == "Parameter"]))
        key = data.draw(st.sampled_from(_KEYS))
        if key == "inputs" and isinstance(target.get("inputs", []), list) and data.draw(st.booleans()):
            del target.setdefault("inputs", [])[data.draw(st.integers(0, 7)) :]
        else:
            target[key] = data.draw(_JUNK)
    try:
        model = odq.ngraph.convert(g)
    except odq.DequantizeError as e:
        assert e.rule and str(e)
        return
    onnx.checker.check_model(model, full_check=True)
