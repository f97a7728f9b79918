"""Exact reference kernels for the standard quantization ops, at every version (10 to 25).

onnx's ``ReferenceEvaluator`` has DequantizeLinear kernels only from version 19 (so a QDQ model at opset
13-18, which is what ONNX Runtime's quantization tool writes, does not load), and its kernels compute
``(x - zero_point) * scale`` in float32 (an int32 input rounds before the subtraction). These replace
them for the oracle:

- ``DequantizeLinear``: the exact reference (``onnx_dequant.dequantize``: the difference never wraps,
  one rounding) per tensor, per axis (``axis``, 13+) and per block (``block_size``, 21+), output type
  ``output_dtype`` (23+) or the scale's; float8/4-bit float and 2-bit inputs go to onnx's own kernel.
- ``QuantizeLinear``: ``saturate(round_half_even(x / scale) + zero_point)`` with the division in float32
  (what ONNX Runtime computes for f32/f16/bf16 inputs), the sum and the clamp in float64 (no int32
  overflow for large quotients); NaN gives the zero point. Non-integer output types go to onnx's kernel.

- ``Loop``: with its optional ``cond`` omitted, ``M`` iterations with the body's condition ignored, as the
  spec says (onnx's kernel runs none: a false disagreement with ONNX Runtime); scan outputs stacked along
  a new first axis (onnx's kernel concatenates them along the existing one), and ``(0, ...)`` ones after
  zero iterations (onnx's kernel fails).
- ``Scan``: at every scan axis and in both directions (onnx's kernel takes axis 0 forward only).
- ``LRN``: sums over the channels (onnx's kernel loops over the batch).
- ``ConvTranspose``: with ``group`` > 1, each group's slice of the weight and bias (onnx's kernel slices
  them wrong).
- ``RNN``, ``GRU``, ``LSTM``: with ``sequence_lens``, each batch entry run for its own length (the reverse
  direction from its last step), its outputs past that length zeros, its last states those at that
  length (onnx's kernels ignore ``sequence_lens``); a length of 0 or past the time axis is refused, and
  so are the attributes onnx's kernels ignore (``clip``, ``input_forget``, other activations than
  the defaults and an RNN's Affine alike in every direction).

``OPS`` is the list for ``ReferenceEvaluator(model, new_ops=...)``.
"""

from __future__ import annotations

import numpy as np
from onnx import helper
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_conv_transpose import ConvTranspose as _OnnxConvTranspose
from onnx.reference.ops.op_dequantize_linear import _CommonDequantizeLinear
from onnx.reference.ops.op_gru import GRU as _OnnxGRU
from onnx.reference.ops.op_loop import Loop as _OnnxLoop
from onnx.reference.ops.op_lstm import LSTM as _OnnxLSTM
from onnx.reference.ops.op_quantize_linear import _CommonQuantizeLinear
from onnx.reference.ops.op_rnn import RNN_14 as _OnnxRNN

from .. import dtypes
from ..errors import DequantizeError
from ..reference import dequantize

__all__ = [
    "OPS",
    "DequantizeLinear",
    "QuantizeLinear",
    "Loop",
    "Scan",
    "LRN",
    "ConvTranspose",
    "RNN",
    "GRU",
    "LSTM",
    "expand_param",
]

_INTEGER = {t.numpy: t for t in dtypes.QUANTIZED}
"""Integer input types the exact kernel takes, by NumPy dtype."""

_RANGES = {
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.uint16): (0, 65535),
}


def expand_param(value: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int) -> tuple[np.ndarray, tuple]:
    """A DequantizeLinear/QuantizeLinear scale or zero point as ``(array, axes)`` for ``dequantize``: a scalar
    (per tensor), a 1-D array along ``axis`` (per axis) or an array of ``shape`` (per block)."""
    rank = len(shape)
    if not block_size:
        if value.ndim == 0 or value.size == 1 and value.ndim == 1 and (rank == 0 or shape[axis % rank] != 1):
            return value.reshape(()), ()
        if value.ndim != 1 or rank == 0:
            raise DequantizeError(f"a per-axis scale must be 1-D, got shape {value.shape}")
        a = axis % rank
        if value.shape[0] != shape[a]:
            raise DequantizeError(f"scale length {value.shape[0]} does not match axis {axis} of shape {shape}")
        return value, (a,)
    a = axis % rank
    full = np.repeat(value, min(block_size, shape[a]), axis=a)  # (a block longer than the axis: one)
    full = full.take(range(shape[a]), axis=a) if full.shape[a] > shape[a] else full
    if full.shape != shape:
        raise DequantizeError(f"blocked scale of shape {value.shape} does not fit input {shape} (block {block_size})")
    return full, tuple(range(rank))


class DequantizeLinear(OpRun):
    """DequantizeLinear, versions 10-25, through the exact reference."""

    op_domain = ""

    def _run(self, x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=0):
        axis = 1 if axis is None else int(axis)
        block_size = int(block_size or 0)
        if x.dtype not in _INTEGER or (x_zero_point is not None and x_zero_point.dtype != x.dtype):
            return _CommonDequantizeLinear._run(self, x, x_scale, x_zero_point, axis, block_size, output_dtype or None)
        scale, axes = expand_param(np.asarray(x_scale), x.shape, axis, block_size)
        zp = None if x_zero_point is None else expand_param(np.asarray(x_zero_point), x.shape, axis, block_size)[0]
        out = np.dtype(helper.tensor_dtype_to_np_dtype(output_dtype)) if output_dtype else scale.dtype
        if out != scale.dtype:  # one rounding: the product in float64, then the output type
            wide = dequantize(x, scale.astype(np.float64), zp, axes=axes, dtype=np.float64)
            return (wide.astype(out),)
        return (dequantize(x, scale, zp, axes=axes),)


class QuantizeLinear(OpRun):
    """QuantizeLinear, versions 10-25, rounding half to even and saturating without integer overflow."""

    op_domain = ""

    def _run(self, x, y_scale, y_zero_point=None, axis=1, saturate=1, block_size=0, output_dtype=0, precision=0):
        axis = 1 if axis is None else int(axis)
        block_size = int(block_size or 0)
        if y_zero_point is not None:
            out = y_zero_point.dtype
        elif output_dtype:
            out = np.dtype(helper.tensor_dtype_to_np_dtype(output_dtype))
        else:
            out = np.dtype(np.uint8)
        if out not in _RANGES or precision:
            rest = (axis, bool(saturate), block_size, output_dtype or None, precision or None)
            return _CommonQuantizeLinear._run(self, x, y_scale, y_zero_point, *rest)
        s, _ = expand_param(np.asarray(y_scale), x.shape, axis, block_size)
        if s.ndim == 1:
            s = s.reshape([-1 if i == axis % x.ndim else 1 for i in range(x.ndim)])
        q = np.rint(x.astype(np.float32) / s.astype(np.float32)).astype(np.float64)
        if y_zero_point is not None:
            zp, _ = expand_param(np.asarray(y_zero_point), x.shape, axis, block_size)
            if zp.ndim == 1:
                zp = zp.reshape(s.shape)
            q = q + zp.astype(np.float64)
        else:
            zp = np.zeros((), out)
        lo, hi = _RANGES[out]
        q = np.where(np.isnan(q), np.broadcast_to(zp, q.shape).astype(np.float64), q)
        return (np.clip(q, lo, hi).astype(out),)


class Loop(_OnnxLoop):
    """Loop as the spec says, where onnx 1.2x's kernel does not:

    - with the optional ``cond`` omitted, ``M`` iterations, the body's condition output ignored (onnx's
      kernel reads a missing ``cond`` as false and runs none);
    - scan outputs stacked along a new first axis, ``(iterations, *per_iteration)`` (onnx's kernel joins
      them with ``np.vstack``, so two (2, 3) values gave (4, 3) instead of (2, 2, 3));
    - zero iterations give scan outputs of shape ``(0, *per_iteration)`` with the body's declared
      per-iteration shape and type (onnx's kernel fails on the empty list); where the body does not
      declare a static shape for one, ``DequantizeError`` naming the node.

    Body inputs shadow outer-scope values of the same name from the first iteration on.
    """

    def _run(  # type: ignore[no-untyped-def,override]
        self,
        M,  # noqa: N803 - the spec's name
        cond,
        *initial,
        context=None,
        body=None,
        attributes=None,
        bindings=None,
    ):
        run_body = getattr(self, "_run_body", None)
        if run_body is None:  # another onnx: its own kernel decides
            return super()._run(M, cond, *initial, context=context, body=body, attributes=attributes)
        names_in = list(self.body.input_names)
        names_out = list(self.body.output_names)
        n_carried = len(names_in) - 2
        n_scan = len(names_out) - 1 - n_carried
        inputs: dict = dict(context or {})
        inputs.update(zip(names_in[2:], initial))
        use_cond = cond is not None
        go = bool(np.asarray(cond).reshape(-1)[0]) if use_cond else True
        trips = None if M is None else int(np.asarray(M).reshape(-1)[0])
        if trips is None and not use_cond:
            raise DequantizeError("a Loop with neither a trip count nor a condition never ends", node=self._label())
        carried = list(initial)
        scans: list[list[np.ndarray]] = [[] for _ in range(n_scan)]
        it = 0
        while go and (trips is None or it < trips):
            if names_in[0]:
                inputs[names_in[0]] = np.array(it, dtype=np.int64)
            if names_in[1]:
                inputs[names_in[1]] = np.array(go)
            outputs = run_body(inputs, attributes=attributes, bindings=bindings)
            if use_cond:
                if outputs[0] is None:
                    raise DequantizeError(f"the body's condition '{names_out[0]}' is missing", node=self._label())
                go = bool(np.asarray(outputs[0]).reshape(-1)[0])
            carried = list(outputs[1 : 1 + n_carried])
            inputs.update(zip(names_in[2:], carried))
            for k in range(n_scan):
                scans[k].append(np.asarray(outputs[1 + n_carried + k]))
            it += 1
        results = carried + [self._stack(k, values) for k, values in enumerate(scans)]
        while len(results) < len(self.onnx_node.output):
            results.append(np.empty(shape=()))
        return self._check_and_fix_outputs(tuple(results))

    def _label(self) -> str:
        return _label(self)

    def _stack(self, k: int, values: list[np.ndarray]) -> np.ndarray:
        """Scan output ``k`` of the iterations' ``values``: stacked along a new axis 0."""
        return _stacked(self, len(self.body.input_names) - 1 + k, values, "Loop ran")


class Scan(OpRun):
    """Scan as the spec says, where onnx 1.2x's kernel takes only axis 0 and the forward direction:

    - each scan input sliced along its ``scan_input_axes`` axis (negative counts from the end), from the
      last slice where its ``scan_input_directions`` says 1; every scan input of one length;
    - each scan output's per-iteration values stacked along its ``scan_output_axes`` axis, the last
      iteration's first where its ``scan_output_directions`` says 1 (onnx_dequant's nGraph importer
      writes both: CumSum in f16/bf16 along any axis or reversed, GatherTree);
    - zero iterations are ``DequantizeError`` naming the node, as with onnx's kernel: ONNX Runtime 1.32
      fails on such a Scan along axis 0 and dies of SIGFPE along another, so the validation that asks
      the reference first never runs it.

    Body inputs shadow outer-scope values of the same name.
    """

    op_domain = ""

    def need_context(self) -> bool:
        return True  # the body may read outer-scope values

    def _run(  # type: ignore[no-untyped-def,override]
        self,
        *args,
        context=None,
        body=None,
        num_scan_inputs=None,
        scan_input_axes=None,
        scan_input_directions=None,
        scan_output_axes=None,
        scan_output_directions=None,
        attributes=None,
        bindings=None,
    ):
        m = int(num_scan_inputs if num_scan_inputs is not None else self.num_scan_inputs)
        n = len(args) - m
        names_in, names_out = list(self.body.input_names), list(self.body.output_names)

        def pick(values: list[int] | None, i: int) -> int:
            return 0 if values is None or i >= len(values) else int(values[i])

        sliced = []
        for i, value in enumerate(args[n:]):
            v = np.asarray(value)
            axis = pick(scan_input_axes, i)
            if not -v.ndim <= axis < v.ndim:
                raise DequantizeError(
                    f"scan input '{names_in[n + i]}' of rank {v.ndim} has no axis {axis}", node=_label(self)
                )
            v = np.moveaxis(v, axis, 0)
            sliced.append(v[::-1] if pick(scan_input_directions, i) else v)
        lengths = sorted({v.shape[0] for v in sliced})
        if len(lengths) > 1:
            raise DequantizeError(
                f"scan inputs of different lengths along their scan axes ({', '.join(map(str, lengths))})",
                node=_label(self),
            )
        if not lengths or lengths[0] == 0:
            raise DequantizeError(
                "the Scan runs zero times on these inputs (its scan axes have length 0), which ONNX Runtime "
                "1.32 fails on along axis 0 and crashes the process on along another: give inputs that run it "
                "at least once",
                node=_label(self),
            )
        states = list(args[:n])
        values: list[list[np.ndarray]] = [[] for _ in names_out[n:]]
        for t in range(lengths[0]):
            inputs: dict = dict(context or {})
            inputs.update(zip(names_in[:n], states))
            inputs.update(zip(names_in[n:], (v[t] for v in sliced)))
            outputs = self._run_body(inputs, attributes=attributes, bindings=bindings)
            states = list(outputs[:n])
            for k, v in enumerate(outputs[n:]):
                values[k].append(np.asarray(v))
        results = states
        for k, vals in enumerate(values):
            stacked = _stacked(self, n + k, vals[::-1] if pick(scan_output_directions, k) else vals, "Scan ran")
            axis = pick(scan_output_axes, k)
            if not -stacked.ndim <= axis < stacked.ndim:
                raise DequantizeError(
                    f"scan output '{names_out[n + k]}' of rank {stacked.ndim} has no axis {axis}", node=_label(self)
                )
            results.append(np.moveaxis(stacked, 0, axis))
        return self._check_and_fix_outputs(tuple(results))


class LRN(OpRun):
    """LRN as the spec says: each channel's sum of squares over the channels ``[c - floor((size - 1) / 2),
    c + ceil((size - 1) / 2)]`` (onnx 1.2x's kernel loops over the batch instead: the channels past the
    number of images get no sum), computed in float64, at any rank from 3."""

    op_domain = ""

    def _run(self, x, alpha=None, beta=None, bias=None, size=None):  # type: ignore[no-untyped-def,override]
        alpha = 1e-4 if alpha is None else float(alpha)
        beta = 0.75 if beta is None else float(beta)
        bias = 1.0 if bias is None else float(bias)
        size = int(size)
        channels = x.shape[1]
        low, high = (size - 1) // 2, -(-(size - 1) // 2)
        squares = np.square(x.astype(np.float64))
        sums = np.empty_like(squares)
        for c in range(channels):
            sums[:, c] = squares[:, max(0, c - low) : min(channels, c + high + 1)].sum(axis=1)
        return ((x / (bias + alpha / size * sums) ** beta).astype(x.dtype),)


class ConvTranspose(_OnnxConvTranspose):
    """ConvTranspose with ``group`` > 1 as the spec says: each group's input channels with its slice of the
    weight (``W`` is ``C x M/group x k...``: sliced along its first axis by ``C / group``) and of the bias
    (onnx 1.2x's kernel slices ``W`` by output channels and adds the whole bias to each group, which
    fails or misplaces; the converted golden group_convolution_backprop graph). One group: onnx's own."""

    op_domain = ""

    def _run(self, X, W, B=None, **attributes):  # type: ignore[no-untyped-def,override]  # noqa: N803
        group = int(attributes.get("group") or 1)
        if group == 1:
            return super()._run(X, W, B, **attributes)
        c, m = X.shape[1] // group, W.shape[1]
        parts = [
            super(ConvTranspose, self)._run(
                X[:, g * c : (g + 1) * c],
                W[g * c : (g + 1) * c],
                None if B is None else B[g * m : (g + 1) * m],
                **{**attributes, "group": 1},
            )[0]
            for g in range(group)
        ]
        return (np.concatenate(parts, axis=1).astype(X.dtype),)


class _Recurrent:
    """An RNN, GRU or LSTM kernel that honours ``sequence_lens``: each batch entry is run alone on its
    first ``sequence_lens[b]`` steps (so the reverse direction starts at its last step), ``Y`` zero-padded
    past them, ``Y_h`` (and ``Y_c``) its states after them, as ONNX Runtime computes. A node with an
    attribute onnx's kernel ignores (``clip``, LSTM's ``input_forget``, activations other than the
    defaults) is refused naming it: its result would be a false disagreement."""

    _STATES = 1
    """How many of the inputs after ``sequence_lens`` hold a state per batch entry (LSTM: h and c, then P)."""
    _ACTIVATIONS: tuple[str, ...] = ("tanh",)
    """The activations (per direction) onnx's kernel computes."""

    def _ignored(self) -> str | None:
        """The first attribute of the node that onnx's kernel does not compute as it says, or None."""
        acts = [str(a).lower() for a in getattr(self, "activations", None) or ()]
        for name, ignored in (
            ("clip", getattr(self, "clip", None) is not None),
            ("input_forget", bool(getattr(self, "input_forget", 0))),
            ("activations", any(a != self._ACTIVATIONS[i % len(self._ACTIVATIONS)] for i, a in enumerate(acts))),
            ("activation_alpha", getattr(self, "activation_alpha", None) is not None),
            ("activation_beta", getattr(self, "activation_beta", None) is not None),
        ):
            if ignored:
                return name
        return None

    def _run(self, X, W, R, B=None, sequence_lens=None, *rest, **attributes):  # type: ignore[no-untyped-def]  # noqa: N803
        run = super()._run  # type: ignore[misc]
        name = self._ignored()
        if name is not None:
            raise DequantizeError(
                f"onnx's reference {self.onnx_node.op_type} kernel ignores the '{name}' attribute (it computes "  # type: ignore[attr-defined]
                "the default), so the reference cannot check this node",
                node=_label(self),  # type: ignore[arg-type]
            )
        layout = int(getattr(self, "layout", 0) or 0)
        t_axis, b_axis = (1, 0) if layout else (0, 1)
        steps = X.shape[t_axis]
        lens = None if sequence_lens is None else np.asarray(sequence_lens).astype(np.int64).reshape(-1)
        if lens is None or lens.size == 0 or bool(np.all(lens == steps)):
            return run(X, W, R, B, sequence_lens, *rest, **attributes)
        if lens.size != X.shape[b_axis] or lens.min() < 1 or lens.max() > steps:
            raise DequantizeError(
                f"sequence_lens {lens.tolist()} must hold one length in 1..{steps} (the time axis) for each of "
                f"the {X.shape[b_axis]} batch entries",
                node=_label(self),  # type: ignore[arg-type]
            )
        s_axis = 0 if layout else 1  # a state's batch axis: (D, B, H), or (B, D, H) with layout 1
        parts = []
        for b, n in enumerate(lens.tolist()):
            xb = X.take([b], axis=b_axis).take(range(n), axis=t_axis)
            states = [None if v is None else v.take([b], axis=s_axis) for v in rest[: self._STATES]]
            parts.append(run(xb, W, R, B, None, *states, *rest[self._STATES :], **attributes))
        ys = [  # Y's time axis is X's
            np.pad(p[0], [(0, steps - n) if a == t_axis else (0, 0) for a in range(p[0].ndim)])
            for p, n in zip(parts, lens.tolist())
        ]
        y_batch = 0 if layout else 2  # Y is (T, D, B, H), or (B, T, D, H) with layout 1
        out = [np.concatenate(ys, axis=y_batch)]
        out += [np.concatenate([p[k] for p in parts], axis=s_axis) for k in range(1, len(parts[0]))]
        return tuple(out)


class RNN(_Recurrent, _OnnxRNN):
    """RNN (7, 14) with ``sequence_lens`` honoured (``_Recurrent``)."""

    op_domain = ""

    def __init__(self, onnx_node, run_params):  # type: ignore[no-untyped-def]
        try:
            super().__init__(onnx_node, run_params)
        except RuntimeError:  # an activation onnx's kernel does not know: refused when run, naming the node
            OpRun.__init__(self, onnx_node, run_params)

    def _ignored(self) -> str | None:
        """onnx's RNN kernel computes its first activation in every direction: Tanh, or Affine with the first
        ``activation_alpha`` and ``activation_beta``. An Affine node is taken where every direction's is the
        same; an activation the kernel could not load (``TANH``) is refused."""
        acts = list(getattr(self, "activations", None) or ())
        if getattr(self, "clip", None) is None and acts and all(a in ("Affine", "affine") for a in acts):
            for name in ("activation_alpha", "activation_beta"):
                values = getattr(self, name, None)
                if not values or len(set(values)) != 1 or not hasattr(self, "f1"):
                    return name
            return None
        if not hasattr(self, "f1"):
            return "activations"
        return super()._ignored()  # type: ignore[misc]


class GRU(_Recurrent, _OnnxGRU):
    """GRU (7, 14) with ``sequence_lens`` honoured (``_Recurrent``)."""

    op_domain = ""
    _ACTIVATIONS = ("sigmoid", "tanh")


class LSTM(_Recurrent, _OnnxLSTM):
    """LSTM (7, 14) with ``sequence_lens`` honoured (``_Recurrent``)."""

    op_domain = ""
    _STATES = 2
    _ACTIVATIONS = ("sigmoid", "tanh", "tanh")


def _label(op: OpRun) -> str:
    """A node as errors name it: its name, else its op type and outputs."""
    return op.onnx_node.name or f"{op.onnx_node.op_type} -> {', '.join(op.onnx_node.output)}"


def _stacked(op: OpRun, index: int, values: list[np.ndarray], ran: str) -> np.ndarray:
    """The per-iteration ``values`` of the body's output ``index`` (a scan output of a Loop or a Scan,
    ``ran``: "Loop ran") stacked along a new axis 0; after zero iterations (a Loop's), ``(0, ...)`` of the
    body's declared shape and type."""
    name = op.body.output_names[index]
    if values:
        shapes = {v.shape for v in values}
        if len(shapes) > 1:
            raise DequantizeError(
                f"scan output '{name}' has different shapes in different iterations "
                f"({', '.join(map(str, sorted(shapes)))}); ONNX stacks values of one shape",
                node=_label(op),
            )
        return np.stack(values, axis=0)
    graph = next((a.g for a in op.onnx_node.attribute if a.name == "body"), None)
    declared = None if graph is None else graph.output[index].type
    tt = None if declared is None or not declared.HasField("tensor_type") else declared.tensor_type
    dims = None if tt is None or not tt.HasField("shape") else list(tt.shape.dim)
    if tt is None or not tt.elem_type or dims is None or not all(d.HasField("dim_value") for d in dims):
        raise DequantizeError(
            f"the {ran} zero times and its body does not declare a static shape for scan output "
            f"'{name}', so the shape of the empty result (0, ...) is unknown; declare the body output's "
            f"shape, or give inputs that run the {ran.split()[0]} at least once",
            node=_label(op),
        )
    return np.empty((0, *(d.dim_value for d in dims)), helper.tensor_dtype_to_np_dtype(tt.elem_type))


OPS: list[type[OpRun]] = [DequantizeLinear, QuantizeLinear, Loop, Scan, LRN, ConvTranspose, RNN, GRU, LSTM]
"""The kernels to add to ``ReferenceEvaluator(new_ops=...)``."""
