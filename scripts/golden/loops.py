"""TensorIterator: nGraph's loop op (after nGraph 0.26, which cannot deserialize it), so every expected value here
comes from the op's definition: the body run iteration by iteration in NumPy (sliced inputs cut per iteration,
merged inputs carried, invariant inputs fixed; concatenated and last-iteration outputs), except the LSTM case,
whose expected values are real nGraph's: the same LSTM unrolled (golden family ``training``, ``lstm_forward``)
run by nGraph 0.26.0's INTERPRETER.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from onnx_dequant.ngraph.writer import FunctionWriter, Ref

from . import GoldenCase, graph
from . import training as tr

MATH = "tanh / exp and float sums: nGraph's C++ and ONNX Runtime may round differently in the last place"


def _rng(k: int) -> np.random.Generator:
    return np.random.default_rng([14, k])


def _slice(input_index: int, param: int, axis: int, start: int = 0, end: int = -1, stride: int = 1, part: int = 1):
    return dict(
        kind="slice",
        input_index=input_index,
        body_parameter_index=param,
        start=start,
        stride=stride,
        part_size=part,
        end=end,
        axis=axis,
    )


def _merged(input_index: int, param: int, value: int):
    return dict(kind="merged", input_index=input_index, body_parameter_index=param, body_value_index=value)


def _invariant(input_index: int, param: int):
    return dict(kind="constant", input_index=input_index, body_parameter_index=param)


def _concat(value: int, output: int, axis: int, stride: int = 1, part: int = 1):
    return dict(
        kind="concat",
        body_value_index=value,
        output_index=output,
        start=0 if stride > 0 else -1,
        stride=stride,
        part_size=part,
        end=-1 if stride > 0 else 0,
        axis=axis,
    )


def _last(value: int, output: int, iteration: int = -1):
    return dict(kind="body_output", body_value_index=value, output_index=output, iteration=iteration)


def _tensor_iterator(
    w: FunctionWriter, inputs: list[Ref], body: FunctionWriter, ins: list[dict], outs: list[dict]
) -> list[Ref]:
    """A TensorIterator op as nGraph's serializer writes it; its outputs read through GetOutputElement."""
    js = body.to_json()
    by_name = {o["name"]: o for o in js["ops"]}
    ti = w.op(
        "TensorIterator",
        *inputs,
        body={
            "nodes": js["ops"],
            "parameters": [by_name[p] for p in js["parameters"]],
            "results": [by_name[r] for r in js["result"]],
        },
        input_descriptions=ins,
        output_descriptions=outs,
    )
    return [w.op("GetOutputElement", ti, n=i) for i in range(len(outs))]


def _rnn_numpy(xs: list[np.ndarray], h: np.ndarray, wx: np.ndarray, wh: np.ndarray):
    hs, xws = [], []
    for x in xs:
        xw = (x.astype(np.float64) @ wx).astype(np.float32)
        hh = (h.astype(np.float64) @ wh).astype(np.float32)
        h = np.tanh((xw + hh).astype(np.float64)).astype(np.float32)
        hs.append(h)
        xws.append(xw)
    return hs, xws


def _rnn_case(name: str, batch: int, steps: int, part: int, reverse: bool, note: str) -> GoldenCase:
    """A batch-first sequence (batch, steps * part..., features) sliced on axis 1 (reshaped per part)."""
    feat, hidden = 3, 4
    rng = _rng(len(name))
    seq = rng.standard_normal((batch, steps, feat)).astype(np.float32)
    h0 = rng.standard_normal((batch, hidden)).astype(np.float32) * 0.5
    wx = rng.standard_normal((feat, hidden)).astype(np.float32) * 0.5
    wh = rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.5
    w = FunctionWriter()
    p_seq = w.parameter("f32", [batch, steps, feat])
    p_h0, p_wx, p_wh = (
        w.parameter("f32", [batch, hidden]),
        w.parameter("f32", [feat, hidden]),
        w.parameter("f32", [hidden, hidden]),
    )
    # the body sees (batch, part, feat): flatten the part into the batch rows with a Reshape
    body = FunctionWriter("body")
    body._id = 1000
    x = body.parameter("f32", [batch, part, feat])
    h = body.parameter("f32", [batch, hidden])
    bwx, bwh = body.parameter("f32", [feat, hidden]), body.parameter("f32", [hidden, hidden])
    x2 = body.op("Reshape", x, input_order=[0, 1, 2], output_shape=[batch, part * feat])
    x2 = body.op("Slice", x2, lower_bounds=[0, (part - 1) * feat], upper_bounds=[batch, part * feat], strides=[1, 1])
    xw = body.op("Dot", x2, bwx, reduction_axes_count=1)
    z = body.binary("Add", xw, body.op("Dot", h, bwh, reduction_axes_count=1), "none")
    h2 = body.op("Tanh", z)
    body.result(h2)
    body.result(body.op("Reshape", xw, input_order=[0, 1], output_shape=[batch, 1, hidden]))
    stride = -part if reverse else part
    ins = [
        _slice(0, 0, 1, start=-1 if reverse else 0, end=0 if reverse else -1, stride=stride, part=part),
        _merged(1, 1, 0),
        _invariant(2, 2),
        _invariant(3, 3),
    ]
    outs = [_last(0, 0), _concat(1, 1, axis=1, stride=-1 if reverse else 1), _last(1, 2, iteration=0)]
    for r in _tensor_iterator(w, [p_seq, p_h0, p_wx, p_wh], body, ins, outs):
        w.result(r)
    iters = steps // part
    parts = [seq[:, i * part : (i + 1) * part, :] for i in range(iters)]
    if reverse:
        parts = parts[::-1]
    hs, xws = _rnn_numpy([p[:, -1, :] for p in parts], h0, wx, wh)
    per_iter = [x[:, None, :] for x in xws]
    concat = np.concatenate(per_iter[::-1] if reverse else per_iter, axis=1)
    return GoldenCase(
        name,
        graph(w),
        {str(p_seq): seq, str(p_h0): h0, str(p_wx): wx, str(p_wh): wh},
        note="definition (TensorIterator is after nGraph 0.26): " + note,
        expected={
            w.results[0]: hs[-1],
            w.results[1]: concat,
            w.results[2]: per_iter[0][:, 0, :].reshape(batch, 1, hidden),
        },
        ulp=8,
        why=MATH,
    )


def _lstm_case() -> GoldenCase:
    """The LSTM of the training family as a TensorIterator over its steps; expected: nGraph's own outputs of the
    unrolled LSTM (tests/golden/training/lstm_forward.npz)."""
    steps, batch, inp, hid = tr.STEPS, tr.BATCH, tr.INPUT, tr.HIDDEN
    w = FunctionWriter()
    xs = w.parameter("f32", [steps, batch, inp])
    W, R = w.parameter("f32", [inp, 4 * hid]), w.parameter("f32", [hid, 4 * hid])
    b, h0, c0, v = (w.parameter("f32", s) for s in ([4 * hid], [batch, hid], [batch, hid], [batch, hid]))
    body = FunctionWriter("body")
    body._id = 1000
    x = body.parameter("f32", [1, batch, inp])
    h, c = body.parameter("f32", [batch, hid]), body.parameter("f32", [batch, hid])
    bW, bR, bb = (
        body.parameter("f32", [inp, 4 * hid]),
        body.parameter("f32", [hid, 4 * hid]),
        body.parameter("f32", [4 * hid]),
    )
    x_t = body.op("Reshape", x, input_order=[0, 1, 2], output_shape=[batch, inp])
    g = body.binary(
        "Add",
        body.binary(
            "Add",
            body.op("Dot", x_t, bW, reduction_axes_count=1),
            body.op("Dot", h, bR, reduction_axes_count=1),
            "none",
        ),
        body.op("Broadcast", bb, shape=[batch, 4 * hid], axes=[0]),
        "none",
    )
    gi, gf, go, gc = (
        body.op("Slice", g, lower_bounds=[0, k * hid], upper_bounds=[batch, (k + 1) * hid], strides=[1, 1])
        for k in range(4)
    )
    i, f, o, cc = body.op("Sigmoid", gi), body.op("Sigmoid", gf), body.op("Sigmoid", go), body.op("Tanh", gc)
    c2 = body.binary("Add", body.binary("Multiply", f, c, "none"), body.binary("Multiply", i, cc, "none"), "none")
    h2 = body.binary("Multiply", o, body.op("Tanh", c2), "none")
    body.result(h2)
    body.result(c2)
    ins = [_slice(0, 0, 0), _merged(1, 1, 0), _merged(2, 2, 1), _invariant(3, 3), _invariant(4, 4), _invariant(5, 5)]
    outs = [_last(0, 0), _last(1, 1)]
    h_last, c_last = _tensor_iterator(w, [xs, h0, c0, W, R, b], body, ins, outs)
    w.result(h_last)
    w.result(c_last)
    w.result(w.op("Sum", w.binary("Multiply", h_last, v, "none"), reduction_axes=[0, 1]))
    golden = Path(__file__).resolve().parents[2] / "tests" / "golden" / "training" / "lstm_forward.npz"
    with np.load(golden) as z:
        meta = json.loads(str(z["meta"]))
        inputs = {p: z[f"in.{p}"] for p in meta["parameters"]}
        outputs = [z[f"out.{r}"] for r in meta["results"]]
    # the unrolled graph's parameters are in the same order as these: xs, W, R, b, h0, c0, v
    order = [xs, W, R, b, h0, c0, v]
    feeds = {str(p): inputs[name] for p, name in zip(order, meta["parameters"])}
    return GoldenCase(
        "lstm_tensor_iterator",
        graph(w),
        feeds,
        note="the training family's LSTM as a TensorIterator; expected: nGraph 0.26.0's outputs of the unrolled LSTM",
        expected=dict(zip(w.results, outputs)),
        ulp=64,
        why="float sums: the unrolled graph ran in nGraph's INTERPRETER; " + MATH,
    )


def cases() -> list[GoldenCase]:
    return [
        _rnn_case("rnn_forward", batch=2, steps=4, part=1, reverse=False, note="sliced, merged, invariant inputs"),
        _rnn_case(
            "rnn_reverse", batch=2, steps=4, part=1, reverse=True, note="negative stride: the sequence backwards"
        ),
        _rnn_case("rnn_parts_of_two", batch=3, steps=6, part=2, reverse=False, note="part_size 2: three iterations"),
        _lstm_case(),
    ]
