"""RNNCell, GRUCell, LSTMCell and LSTMSequence: ONNX's GRU / LSTM where they compute what nGraph does, else
nGraph's decompositions written out node for node.

nGraph defines every recurrent op by decomposition (``decompose_op``: Dot, Add, Clamp, the activations) and its
INTERPRETER runs those nodes. ONNX's RNN / GRU / LSTM match them on f32 with nGraph's default activations and
no clip (measured against nGraph 0.26: within 2 ULP of the largest output, as the decomposition; docs/ngraph.md,
"Recurrent ops"); ONNX Runtime's LSTM does not clip the cell state before ``h`` as nGraph does, runs only f32,
and its activation parameters are read differently, so every other case is the decomposition, in nGraph's
order (``Xt*W^T + (Ht*R^T + bias)``, the clip on every activation's argument, peepholes before the clip).
RNNCell is always decomposed: ONNX Runtime's RNN kernel is slower than its four nodes.

Two serializer eras read differently:

- nGraph 0.26 (``activation_alpha``): inputs ``X, W, R, H_t[, C_t], B[, P]`` with ``B`` = ``[Wb, Rb]``
  (twice the gates), LSTM gates in ``iofc`` order (ONNX's).
- later nGraph (``activations_alpha``): inputs ``X, H_t[, C_t], W, R[, B[, P]]``, one bias per gate, LSTM
  gates in ``weights_format`` order (default ``ifco``); GRUCell is op_version 3 there.

LSTMSequence (later nGraph only): LSTMCell per step, the hidden state zeroed past each batch entry's
``sequence_lengths`` in ``Y`` and held in ``Y_h`` / ``Y_c``, ReverseSequence around a reverse pass; ONNX's
layouts: ``X [seq, batch, input]``, ``Y [seq, num_directions, batch, hidden]``, ``Y_h`` / ``Y_c``
``[num_directions, batch, hidden]``. Decomposed, it is unrolled (the sequence length is static).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ... import dtypes
from ...contract import TensorType
from ..context import OpContext, shape_str
from . import register
from .activation import emit_hard_sigmoid
from .elementwise import emit_real_relu
from .math import emit_clamp

_ACTIVATIONS = {"sigmoid": (None, None), "tanh": (None, None), "relu": (None, None), "hardsigmoid": (0.2, 0.5)}
"""nGraph's activation functions by name, with the (alpha, beta) they take when the lists give none."""
_FORMATS = ("fico", "icof", "ifco", "ifoc", "iofc")
"""``LSTMWeightsFormat`` in enum order (a file may give the index)."""
_DIRECTIONS = ("forward", "reverse", "bidirectional")
_F32, _I32, _I64 = (dtypes.parse(n) for n in ("f32", "i32", "i64"))


# ---------------------------------------------------------------- attributes and checks


class _Cell:
    """What every step of one op shares: the element type, hidden size, activations, clip."""

    __slots__ = ("ctx", "t", "hidden", "acts", "clip")

    def __init__(self, ctx: OpContext, count: int, defaults: Sequence[str], clip_key: str = "clip") -> None:
        self.ctx = ctx
        dt = ctx.elem(0)
        if not dt.is_real:
            raise ctx.error(f"{ctx.op.op} on {dt} is not supported (real types only)")
        for i, ti in enumerate(ctx.types):
            if ti.elem_type is not dt and not (ctx.op.op == "LSTMSequence" and i == 3):
                raise ctx.error(
                    f"{ctx.op.op}'s inputs must have one element type (input 0 is {dt}, input {i} is {ti.elem_type})"
                )
        ctx.require_onnx(dt, "MatMul", "Add", "Mul", "Sub", "Sigmoid", "Tanh", "Where", "Greater", "Split")
        self.t = TensorType(dt, None)
        self.hidden = ctx.attr_int("hidden_size", lo=1)
        names = ctx.raw("activations", list(defaults))
        if type(names) is not list or not all(isinstance(n, str) for n in names):
            raise ctx.error(f"'activations' must be a list of names, got {names!r:.60}")
        names = [n.lower() for n in names]
        if len(names) < count:
            raise ctx.error(f"{ctx.op.op} needs {count} activation functions, 'activations' has {len(names)}")
        key = "activations_alpha" if _later(ctx) else "activation_alpha"
        alphas, betas = (self._floats(k) for k in (key, key.replace("alpha", "beta")))
        self.acts = []
        for k, name in enumerate(names[:count]):
            if name not in _ACTIVATIONS:
                raise ctx.error(f"Unknown activation function: {name}")
            a, b = _ACTIVATIONS[name]
            self.acts.append((name, alphas[k] if k < len(alphas) else a, betas[k] if k < len(betas) else b))
        clip = ctx.raw(clip_key, 0.0)
        if not isinstance(clip, (int, float)) or isinstance(clip, bool):
            raise ctx.error(f"'{clip_key}' must be a number, got {clip!r:.40}")
        self.clip = float(np.float32(clip))  # nGraph reads it as float
        if self.clip < 0 or self.clip != self.clip:
            raise ctx.error(f"The 'min' parameter needs to be less than 'max' for Clamp (clip {self.clip})")

    def _floats(self, key: str) -> list[float]:
        v = self.ctx.raw(key, [])
        if type(v) is not list or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            raise self.ctx.error(f"'{key}' must be a list of numbers, got {v!r:.60}")
        return [float(np.float32(x)) for x in v]

    def shape(self, i: int, want: tuple[int, ...], what: str) -> None:
        """nGraph's check of input ``i``'s shape."""
        got = self.ctx.static_shape(i, what)
        if tuple(got) != want:
            raise self.ctx.error(
                f"Input tensor {what} must have shape ({', '.join(map(str, want))}). Actual shape is:{shape_str(got)}."
            )

    # ---- emitting ----

    def act(self, k: int, x: str, out: str | None = None) -> str:
        """Activation ``k`` of ``clip(x)``."""
        ctx = self.ctx
        if self.clip != 0:
            x = emit_clamp(ctx, x, self.t.elem_type, -self.clip, self.clip)
        name, alpha, beta = self.acts[k]
        if name == "sigmoid":
            return ctx.emit("Sigmoid", [x], out)
        if name == "tanh":
            return ctx.emit("Tanh", [x], out)
        if name == "relu":
            return emit_real_relu(ctx, x, self.t.elem_type, out)
        return emit_hard_sigmoid(ctx, x, self.t, alpha, beta, out)

    def zero(self) -> str:
        return self.ctx.scalar(np.array(0, self.t.elem_type.numpy), self.t.elem_type)

    def one(self) -> str:
        return self.ctx.scalar(np.array(1, self.t.elem_type.numpy), self.t.elem_type)

    def xwt(self, x: str, w: str) -> str:
        """``x . w^T`` (nGraph's ``Dot(x, transpose(w))``)."""
        return self.ctx.emit("MatMul", [x, self.ctx.emit("Transpose", [w], perm=[1, 0])])

    def add(self, a: str, b: str, out: str | None = None) -> str:
        return self.ctx.emit("Add", [a, b], out)

    def mul(self, a: str, b: str, out: str | None = None) -> str:
        return self.ctx.emit("Mul", [a, b], out)

    def split(self, x: str, sizes: Sequence[int], axis: int) -> list[str]:
        ctx = self.ctx
        outs = [ctx.b.reserve(f"{ctx.name}/part") for _ in sizes]
        ctx.emit_multi("Split", [x, ctx.int64s(list(sizes))], outs, axis=axis)
        return outs

    def zeros(self, n: int) -> str:
        return self.ctx.const(np.zeros(n, self.t.elem_type.numpy), self.t.elem_type, "zeros")


def _later(ctx: OpContext) -> bool:
    """Whether the op is in the later serializer's form (one bias per gate, the states right after X)."""
    return ctx.has("activations_alpha") or ctx.has("activations_beta") or ctx.has("weights_format")


def _batch_input(cell: _Cell) -> tuple[int, int]:
    ctx = cell.ctx
    shape = ctx.static_shape(0, "X")
    if len(shape) != 2:
        raise ctx.error(f"Input tensor X must have rank 2 ([batch_size, input_size]), got {shape_str(shape)}")
    return shape[0], shape[1]


def _enum(ctx: OpContext, key: str, names: Sequence[str]) -> str:
    """An enum attribute: its name in any case, or its index (the serializer without the attribute visitor
    writes enums as numbers); ``names[2]`` / ``names[0]`` when absent (nGraph's defaults)."""
    v = ctx.raw(key, names[2] if key == "weights_format" else names[0])
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(names):
        return names[v]
    if isinstance(v, str) and v.lower() in names:
        return v.lower()
    raise ctx.error(f"'{key}' must be one of {', '.join(names)}, got {v!r:.40}")


def _weights_format(ctx: OpContext) -> str:
    return _enum(ctx, "weights_format", _FORMATS)


# ---------------------------------------------------------------- ONNX's own ops


def _onnx_matches(cell: _Cell, defaults: Sequence[str]) -> bool:
    """Whether ONNX's GRU / LSTM computes what nGraph does (see the module's docstring)."""
    return cell.t.elem_type is _F32 and cell.clip == 0 and [a[0] for a in cell.acts] == list(defaults)


def _gates_to(cell: _Cell, x: str, src: str, dst: str, axis: int = 0) -> str:
    """The gate blocks of ``x`` (along ``axis``) from order ``src`` to ``dst``."""
    if src == dst:
        return x
    parts = dict(zip(src, cell.split(x, [cell.hidden] * 4, axis)))
    return cell.ctx.emit("Concat", [parts[g] for g in dst], axis=axis)


def _emit_onnx(cell: _Cell, op: str, inputs: list[str], outs: list[str], squeeze: bool, **attrs: object) -> None:
    """ONNX ``op`` (one direction unless the inputs say otherwise) writing ``outs`` (Y, Y_h[, Y_c]); with
    ``squeeze`` the inputs gain the direction axis and the states lose it (a cell)."""
    ctx = cell.ctx
    ctx.require_onnx(cell.t.elem_type, op)
    if squeeze:
        inputs = [ctx.emit("Unsqueeze", [x, ctx.int64s([0])]) if x else "" for x in inputs]
        temps = [ctx.b.reserve(f"{ctx.name}/state") for _ in outs[1:]]
        ctx.emit_multi(op, inputs, ["", *temps], hidden_size=cell.hidden, **attrs)
        for t, o in zip(temps, outs[1:]):
            ctx.emit("Squeeze", [t, ctx.int64s([0])], o)
    else:
        ctx.emit_multi(op, inputs, outs, hidden_size=cell.hidden, **attrs)


# ---------------------------------------------------------------- the steps


def _lstm_step(
    cell: _Cell,
    x: str,
    h: str,
    c: str,
    w: str,
    r: str,
    bias: str,
    p: str,
    order: str,
    input_forget: bool,
    outs: tuple[str | None, str | None] = (None, None),
) -> tuple[str, str]:
    """One LSTMCell step, decomposed: (H, C). ``order``: the gates' order in W, R and the bias (``iofc``, ...);
    ``bias``: one per gate."""
    hid = cell.hidden
    gates = cell.add(cell.xwt(x, w), cell.add(cell.xwt(h, r), bias))
    parts = dict(zip(order, cell.split(gates, [hid] * 4, 1)))
    p_i, p_o, p_f = cell.split(p, [hid] * 3, 0)
    i = cell.act(0, cell.add(parts["i"], cell.mul(p_i, c)))
    if input_forget:
        f = cell.ctx.emit("Sub", [cell.one(), i])
    else:
        f = cell.act(0, cell.add(parts["f"], cell.mul(p_f, c)))
    c_new = cell.add(cell.mul(f, c), cell.mul(i, cell.act(1, parts["c"])), outs[1])
    o = cell.act(0, cell.add(parts["o"], cell.mul(p_o, c_new)))
    h_new = cell.mul(o, cell.act(2, c_new), outs[0])
    return h_new, c_new


_LSTM_ACTS = ("sigmoid", "tanh", "tanh")


@register("LSTMCell")
def lstm_cell(ctx: OpContext) -> list[TensorType]:
    later = _later(ctx)
    ctx.expect_inputs(*((5, 6, 7) if later else (5, 7)))
    cell = _Cell(ctx, 3, _LSTM_ACTS)
    batch, size = _batch_input(cell)
    hid = cell.hidden
    x, h, c, w, r = (0, 1, 2, 3, 4) if later else (0, 3, 4, 1, 2)
    n = len(ctx.inputs)
    cell.shape(w, (4 * hid, size), "W")
    cell.shape(r, (4 * hid, hid), "R")
    cell.shape(h, (batch, hid), "initial_hidden_state" if later else "H_t")
    cell.shape(c, (batch, hid), "initial_cell_state" if later else "C_t")
    nb = 4 * hid if later else 8 * hid
    if n > 5:
        cell.shape(5, (nb,), "B")
    if n > 6:
        cell.shape(6, (3 * hid,), "P")
    b = ctx.inputs[5] if n > 5 else cell.zeros(nb)
    p = ctx.inputs[6] if n > 6 else cell.zeros(3 * hid)
    order = _weights_format(ctx) if later else "iofc"
    input_forget = ctx.attr_bool("input_forget", False)
    X, H, C, W, R = (ctx.inputs[i] for i in (x, h, c, w, r))
    outs = (ctx.out(0), ctx.out(1))
    if _onnx_matches(cell, _LSTM_ACTS):
        W, R = (_gates_to(cell, v, order, "iofc") for v in (W, R))
        if later:  # ONNX's B is [Wb, Rb]
            b = ctx.emit("Concat", [_gates_to(cell, b, order, "iofc"), cell.zeros(4 * hid)], axis=0)
        _emit_onnx(cell, "LSTM", [X, W, R, b, "", H, C, p], ["", *outs], True, input_forget=int(input_forget))
    else:
        bias = b if later else cell.add(*cell.split(b, [4 * hid] * 2, 0))  # Wb + Rb
        _lstm_step(cell, X, H, C, W, R, bias, p, order, input_forget, outs)
    t = TensorType(cell.t.elem_type, (batch, hid))
    return [t, t]


@register("RNNCell")
def rnn_cell(ctx: OpContext) -> list[TensorType]:
    """Ht = f(Xt*W^T + (Ht-1*R^T + bias))."""
    ctx.expect_inputs(4, 5)
    later = _later(ctx)
    cell = _Cell(ctx, 1, ("tanh",))
    batch, size = _batch_input(cell)
    hid = cell.hidden
    x, h, w, r = (0, 1, 2, 3) if later else (0, 3, 1, 2)
    cell.shape(w, (hid, size), "W")
    cell.shape(r, (hid, hid), "R")
    cell.shape(h, (batch, hid), "initial_hidden_state" if later else "H_t")
    n = len(ctx.inputs)
    nb = hid if later else 2 * hid
    if n > 4:
        cell.shape(4, (nb,), "B")
    b = ctx.inputs[4] if n > 4 else cell.zeros(nb)
    X, H, W, R = (ctx.inputs[i] for i in (x, h, w, r))
    # always decomposed: ONNX's RNN matches too, but ONNX Runtime's kernel is 1.6-7x slower than these nodes
    bias = b if later else cell.add(*cell.split(b, [hid, hid], 0))  # Wb + Rb
    cell.act(0, cell.add(cell.xwt(X, W), cell.add(cell.xwt(H, R), bias)), ctx.out())
    return [TensorType(cell.t.elem_type, (batch, hid))]


@register("GRUCell", versions=(0, 3))
def gru_cell(ctx: OpContext) -> list[TensorType]:
    """zt, rt = f(...); ht = g(...) (linear_before_reset: the reset gate after R); Ht = (1 - zt) ht + zt Ht-1."""
    later = ctx.op.version >= 3 or _later(ctx)
    ctx.expect_inputs(4, 5)
    cell = _Cell(ctx, 2, ("sigmoid", "tanh"))
    batch, size = _batch_input(cell)
    hid = cell.hidden
    lbr = ctx.attr_bool("linear_before_reset", False)
    x, h, w, r = (0, 1, 2, 3) if later else (0, 3, 1, 2)
    cell.shape(w, (3 * hid, size), "W")
    cell.shape(r, (3 * hid, hid), "R")
    cell.shape(h, (batch, hid), "initial_hidden_state" if later else "H_t")
    n = len(ctx.inputs)
    nb = (3 + lbr) * hid if later else 6 * hid
    if n > 4:
        cell.shape(4, (nb,), "B")
    b = ctx.inputs[4] if n > 4 else cell.zeros(nb)
    X, H, W, R = (ctx.inputs[i] for i in (x, h, w, r))
    if _onnx_matches(cell, ("sigmoid", "tanh")):
        if later:  # ONNX's B is [Wb_zrh, Rb_zrh]: the later form's [b_z, b_r, Wb_h(, Rb_h)]
            if lbr:
                wb, rb_h = cell.split(b, [3 * hid, hid], 0)
                b = ctx.emit("Concat", [wb, cell.zeros(2 * hid), rb_h], axis=0)
            else:
                b = ctx.emit("Concat", [b, cell.zeros(3 * hid)], axis=0)
        _emit_onnx(cell, "GRU", [X, W, R, b, "", H], ["", ctx.out()], True, linear_before_reset=int(lbr))
        return [TensorType(cell.t.elem_type, (batch, hid))]
    if later:
        xw = cell.split(cell.xwt(X, W), [hid] * 3, 1)
        r_t = ctx.emit("Transpose", [R], perm=[1, 0])
        hr = cell.split(ctx.emit("MatMul", [H, r_t]), [hid] * 3, 1)
        bs = cell.split(b, [hid] * (3 + lbr), 0)
        z = cell.act(0, cell.add(xw[0], cell.add(hr[0], bs[0])))
        rg = cell.act(0, cell.add(xw[1], cell.add(hr[1], bs[1])))
        if lbr:
            pre = cell.add(xw[2], cell.add(cell.mul(rg, cell.add(hr[2], bs[3])), bs[2]))
        else:
            r_h = cell.split(r_t, [hid] * 3, 1)[2]
            pre = cell.add(xw[2], cell.add(ctx.emit("MatMul", [cell.mul(rg, H), r_h]), bs[2]))
    else:
        wb, rb = cell.split(b, [3 * hid] * 2, 0)
        wb_zr, wb_h = cell.split(wb, [2 * hid, hid], 0)
        rb_zr, rb_h = cell.split(rb, [2 * hid, hid], 0)
        r_zr, r_h = cell.split(R, [2 * hid, hid], 0)
        xw_zr, xw_h = cell.split(cell.xwt(X, W), [2 * hid, hid], 1)
        zr = cell.act(0, cell.add(xw_zr, cell.add(cell.xwt(H, r_zr), cell.add(wb_zr, rb_zr))))
        z, rg = cell.split(zr, [hid, hid], 1)
        if lbr:
            pre = cell.add(xw_h, cell.add(cell.mul(rg, cell.add(cell.xwt(H, r_h), rb_h)), wb_h))
        else:
            pre = cell.add(xw_h, cell.add(cell.xwt(cell.mul(rg, H), r_h), cell.add(rb_h, wb_h)))
    ht = cell.act(1, pre)
    keep = cell.mul(ctx.emit("Sub", [cell.one(), z]), ht)
    cell.add(keep, cell.mul(z, H), ctx.out())
    return [TensorType(cell.t.elem_type, (batch, hid))]


# ---------------------------------------------------------------- LSTMSequence


@register("LSTMSequence")
def lstm_sequence(ctx: OpContext) -> list[TensorType]:
    """X, initial_hidden_state, initial_cell_state, sequence_lengths, W, R, B[, P] -> Y, Y_h, Y_c."""
    ctx.expect_inputs(7, 8)
    cell = _Cell(ctx, 3, _LSTM_ACTS, "clip_threshold" if ctx.has("clip_threshold") else "clip")
    direction = _enum(ctx, "direction", _DIRECTIONS)
    dirs = 2 if direction == "bidirectional" else 1
    shape = ctx.static_shape(0, "X")
    if len(shape) != 3 or shape[0] < 1:
        raise ctx.error(
            f"Input tensor X must have shape [seq_length >= 1, batch_size, input_size], got {shape_str(shape)}"
        )
    seq, batch, size = shape
    hid = cell.hidden
    if ctx.elem(3) is not _I32:
        raise ctx.error(f"sequence_lengths must be i32 (nGraph compares it with an i32 time step), got {ctx.elem(3)}")
    cell.shape(3, (batch,), "sequence_lengths")
    cell.shape(1, (dirs, batch, hid), "initial_hidden_state")
    cell.shape(2, (dirs, batch, hid), "initial_cell_state")
    cell.shape(4, (dirs, 4 * hid, size), "W")
    cell.shape(5, (dirs, 4 * hid, hid), "R")
    cell.shape(6, (dirs, 4 * hid), "B")
    if len(ctx.inputs) > 7:
        cell.shape(7, (dirs, 3 * hid), "P")
    order = _weights_format(ctx)
    input_forget = ctx.attr_bool("input_forget", False)
    outs = [ctx.out(i) for i in range(3)]
    dt = cell.t.elem_type
    types = [
        TensorType(dt, (seq, dirs, batch, hid)),
        TensorType(dt, (dirs, batch, hid)),
        TensorType(dt, (dirs, batch, hid)),
    ]
    X, H, C, lens, W, R, B = ctx.inputs[:7]
    P = ctx.inputs[7] if len(ctx.inputs) > 7 else ""
    if _onnx_matches(cell, _LSTM_ACTS):
        W, R = (_gates_to(cell, v, order, "iofc", 1) for v in (W, R))
        zeros = ctx.const(np.zeros((dirs, 4 * hid), dt.numpy), dt, "zeros")
        B = ctx.emit("Concat", [_gates_to(cell, B, order, "iofc", 1), zeros], axis=1)
        value = ctx.value(3)
        direct = value is not None and value.size > 0 and 1 <= int(value.min()) and int(value.max()) <= seq
        if not direct:  # ONNX Runtime refuses lengths past [1, seq] and zeroes Y_h / Y_c at 0; nGraph holds them
            lo, hi = (ctx.scalar(np.array(v, np.int32), _I32) for v in (0, seq))
            lens = ctx.emit("Min", [ctx.emit("Max", [lens, lo]), hi])
        states = outs[1:] if direct else [ctx.b.reserve(f"{ctx.name}/state") for _ in range(2)]
        _emit_onnx(
            cell,
            "LSTM",
            [X, W, R, B, lens, H, C, P],
            [outs[0], *states],
            False,
            direction=direction,
            input_forget=int(input_forget),
        )
        if not direct:
            empty = ctx.emit("Unsqueeze", [ctx.emit("Equal", [lens, lo]), ctx.int64s([1])])  # [batch, 1]
            for initial, state, out in zip((H, C), states, outs[1:]):
                ctx.emit("Where", [empty, initial, state], out)
        return types
    if P == "":
        P = ctx.const(np.zeros((dirs, 3 * hid), dt.numpy), dt, "zeros")
    per_direction = [[v] if dirs == 1 else cell.split(v, [1, 1], 0) for v in (H, C, W, R, B, P)]
    lens_value = ctx.value(3)
    masked = lens_value is None or int(lens_value.min()) < seq
    lens64 = ctx.emit("Cast", [lens], to=_I64.onnx) if direction != "forward" else ""
    results = []
    for k, reverse in enumerate([direction == "reverse"] if dirs == 1 else [False, True]):
        state = [ctx.emit("Squeeze", [v[k], ctx.int64s([0])]) for v in per_direction]
        last = dirs == 1
        results.append(
            _lstm_pass(cell, X, lens, lens64, state, seq, reverse, masked, order, input_forget, outs if last else None)
        )
    if dirs == 2:
        for axis, out, parts in zip((1, 0, 0), outs, zip(*results)):
            ctx.emit("Concat", list(parts), out, axis=axis)
    return types


def _lstm_pass(
    cell: _Cell,
    x: str,
    lens: str,
    lens64: str,
    state: list[str],
    seq: int,
    reverse: bool,
    masked: bool,
    order: str,
    input_forget: bool,
    outs: list[str] | None,
) -> tuple[str, str, str]:
    """One direction of LSTMSequence, unrolled: (Y [seq, 1, batch, hidden], Y_h, Y_c [1, batch, hidden])."""
    ctx = cell.ctx
    h, c, w, r, b, p = state
    if reverse:
        x = ctx.emit("ReverseSequence", [x, lens64], batch_axis=1, time_axis=0)
    steps = cell.split(x, [1] * seq, 0)
    column = ctx.emit("Unsqueeze", [lens, ctx.int64s([1])]) if masked else None  # [batch, 1]
    ys = []
    for t, step in enumerate(steps, 1):
        step = ctx.emit("Squeeze", [step, ctx.int64s([0])])
        h_new, c_new = _lstm_step(cell, step, h, c, w, r, b, p, order, input_forget)
        y = ctx.emit("Unsqueeze", [h_new, ctx.int64s([0])])
        if column is None:
            h, c = h_new, c_new
        else:  # past its length, a batch entry's output is 0 and its state is held
            done = ctx.emit("Greater", [ctx.scalar(np.array(t, np.int32), _I32), column])
            y = ctx.emit("Where", [done, cell.zero(), y])
            h = ctx.emit("Where", [done, h, h_new])
            c = ctx.emit("Where", [done, c, c_new])
        ys.append(y)
    y = ctx.emit("Concat", ys, axis=0)
    if reverse:
        y = ctx.emit("ReverseSequence", [y, lens64], batch_axis=1, time_axis=0)
    o = outs or [None, None, None]
    return (
        ctx.emit("Unsqueeze", [y, ctx.int64s([1])], o[0]),
        ctx.emit("Unsqueeze", [h, ctx.int64s([0])], o[1]),
        ctx.emit("Unsqueeze", [c, ctx.int64s([0])], o[2]),
    )
