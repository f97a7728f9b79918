"""``session(model)``: an ``onnxruntime.InferenceSession`` for models that keep the Dequantize op.

``KernelSession`` is an ``InferenceSession`` whose model is the private rewritten copy (see
``prepare``). Its run methods feed the hidden run token and raise the errors the kernels recorded
under it: a bad scale fed at run time surfaces as a ``DequantizeError`` naming the node, never as a
crashed interpreter. ``get_inputs`` leaves the token out, so the session looks like the model. The
session owns the scratch buffers its kernels compute into (``runs.ScratchPool``), and hands its
kernels the graph inputs they read from the caller's feed (``Prepared.fed``): the caller's arrays,
which ONNX Runtime validates as it validates any input, and which the extension would otherwise copy.

A kernel node's output that is a graph output, of a shape known before the run (``x`` fed or held,
or the shape the model states for an ``x`` another node computes), is computed where ONNX Runtime puts
it: ``run`` binds such outputs to arrays the session's pool lends
(``runs.ScratchPool.lend``) and ``run_with_iobinding`` tells the kernels where a ``KernelIOBinding``
bound them on the CPU. The extension's copy of the kernel's result into ONNX Runtime's output is then a
copy of the array onto itself, which the C library's ``memcpy`` returns from at once (glibc).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnxruntime as ort
from google.protobuf.message import EncodeError
from onnx import helper
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from .. import _split
from ..errors import DequantizeError
from . import kernels, runs, signals
from .prepare import Prepared, prepare, static_shapes

__all__ = ["session", "KernelSession", "KernelIOBinding"]

log = logging.getLogger("onnx_dequant.ort")

_REGISTERED_KEY = "onnx_dequant.extensions_library"
"""A session config entry marking SessionOptions that already carry the extensions library."""

_register_lock = threading.Lock()

_NUMPY_TENSORS = frozenset(
    f"tensor({t})"
    for t in (
        "float",
        "double",
        "float16",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "bool",
    )
)
"""Output types whose ``OrtValue.numpy()`` is the array ``run`` returns (a view of ONNX Runtime's tensor)."""

PLACE_MIN_BYTES = 1 << 19
"""``run`` binds the graph outputs kernels compute (``Prepared.placeable``) when they add up to at least
this many bytes: below it binding them (about 10-15 us a run) costs more than the copy it saves. 1 MiB
until the forty-ninth round; on the Xeon VM (``scripts/bench_kernel.py --only binding``, and runs in a
row) the two meet at about 384 KiB of f32, and binding saves 7-9 us a run at 512 KiB, 30 at 768."""

ROUSE = 150e-6
"""Seconds the reference's helper threads spin for a run's kernels, where the session's last run cut a
call among them (``_split.rouse``): a run's own work before its first kernel takes 50-100 us."""

SIGNATURES = 64
"""Input shapes a session keeps the shapes inferred from (``KernelSession._inferred_shape``)."""

_in_flight = threading.Condition()
_async_runs: set[int] = set()
"""Tokens of ``run_async`` calls whose callback has not returned yet."""


_exit_wait_registered = False


def _wait_for_async_runs() -> None:
    """At interpreter exit: wait for every ``run_async`` still running. A kernel or callback that ran
    after the interpreter began to shut down would need a Python that is gone: the process aborts."""
    with _in_flight:
        while _async_runs:
            _in_flight.wait(0.1)


def _track_async(token: int) -> None:
    """Count ``token`` as an async run in flight; the exit wait is registered at the first one, so it
    runs before the exit handlers of modules imported earlier (Numba's, which the kernel needs)."""
    global _exit_wait_registered
    with _in_flight:
        if not _exit_wait_registered:
            atexit.register(_wait_for_async_runs)
            _exit_wait_registered = True
        _async_runs.add(token)


def _register_library(options: ort.SessionOptions) -> None:
    """Register onnxruntime-extensions with ``options`` once (a second registration breaks sessions)."""
    with _register_lock:  # threads sharing one SessionOptions
        try:
            if options.get_session_config_entry(_REGISTERED_KEY) == "1":
                return
        except RuntimeError:  # the entry is absent
            pass
        import onnxruntime_extensions as ox

        options.register_custom_ops_library(ox.get_library_path())
        options.add_session_config_entry(_REGISTERED_KEY, "1")


def _raise_recorded(errors: list[tuple[str, BaseException]], cause: BaseException | None, path: str | None) -> None:
    node, first = errors[0]
    if isinstance(first, DequantizeError):
        raise first.at(node=node or None, path=path) from cause
    if not isinstance(first, Exception):  # KeyboardInterrupt, SystemExit: re-raise as they are
        raise first
    raise RuntimeError(f"node '{node}': the Dequantize kernel failed: {type(first).__name__}: {first}") from first


@functools.cache
def _cpu_device() -> Any:
    """ONNX Runtime's C ``OrtDevice`` for the CPU (what ``IOBinding.bind_output(name, "cpu")`` makes per call)."""
    return ort.OrtDevice.make("cpu", 0)._get_c_device()


def _settled(value: Any) -> Any:
    """An array fed or bound as ONNX Runtime reads it in place: C-contiguous, aligned, in native byte
    order. Where it is not, ORT makes its own copy when it is fed or bound (and takes a non-native
    array's bytes as they are): the copy is made here instead, once, so that ORT and the kernels read
    one buffer, and the caller's later writes to the original reach neither. Other values as they are."""
    if not isinstance(value, np.ndarray):
        return value
    a = np.asarray(value)  # a subclass (np.matrix, a masked array) viewed as a plain array
    flags = a.flags
    if flags.c_contiguous and flags.aligned and a.dtype.isnative:
        return a
    return np.array(a, dtype=a.dtype.newbyteorder("="), order="C")  # not ascontiguousarray: 0-d stays 0-d


def _as_array(value: Any, dtype: np.dtype) -> np.ndarray | None:
    """A fed value as the array ONNX Runtime reads: an array (``_settled``), an ``OrtValue``'s host data,
    or a list converted to the input's type as ORT converts a list; None for anything else, which ORT
    accepts or refuses on its own (a kernel then reports that it could not read it)."""
    try:
        if isinstance(value, np.ndarray):
            return value
        if isinstance(value, ort.OrtValue):
            return value.numpy()
        if isinstance(value, list):
            return np.asarray(value, dtype=dtype)
    except Exception:  # noqa: BLE001 - ORT's own conversion reports what is wrong with the value
        return None
    return None


class _Refused(Exception):
    """ONNX Runtime refused a run ``run`` made through a binding: it raises every error as a
    ``RuntimeError`` there, where its own ``run`` raises its own types (``InvalidArgument``, ``Fail``).
    ``run`` then runs ONNX Runtime's own ``run``, which raises the error as ONNX Runtime reports it.
    ``guessed``: outputs of shapes stated or inferred were bound."""

    guessed = False


class KernelIOBinding(ort.IOBinding):
    """``KernelSession.io_binding()``: an ``IOBinding`` that also keeps, by name, the inputs it binds on
    the CPU (arrays, ``OrtValue``s, CPU pointers), which the session's kernels read directly."""

    def __init__(self, session: KernelSession) -> None:
        super().__init__(session)
        self._token = session._token_input  # the session binds it each run; the caller may not
        self.odq_inputs: dict[str, Any] = {}  # name -> array, OrtValue, or None (bound where not readable)
        self.odq_outputs: dict[str, np.ndarray] = {}  # name -> the CPU array an output is bound to
        self.odq_output_names: set[str] = set()  # every output bound, wherever

    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        """As ``IOBinding.bind_cpu_input``; the kernels read the array itself."""
        self._refuse_token(name)
        arr_on_cpu = _settled(arr_on_cpu)
        super().bind_cpu_input(name, arr_on_cpu)
        self.odq_inputs[name] = arr_on_cpu

    def bind_ortvalue_input(self, name: str, ortvalue: Any) -> None:
        """As ``IOBinding.bind_ortvalue_input``; the kernels read a CPU ``OrtValue``'s data itself."""
        self._refuse_token(name)
        super().bind_ortvalue_input(name, ortvalue)
        self.odq_inputs[name] = ortvalue

    def bind_input(
        self, name: str, device_type: str, device_id: int, element_type: Any, shape: Any, buffer_ptr: int
    ) -> None:
        """As ``IOBinding.bind_input``; the kernels read CPU memory at ``buffer_ptr`` itself."""
        self._refuse_token(name)
        super().bind_input(name, device_type, device_id, element_type, shape, buffer_ptr)
        self.odq_inputs[name] = _cpu_view(device_type, element_type, shape, buffer_ptr)

    def _refuse_token(self, name: Any) -> None:
        """The run token is no input of the model the caller sees: refused in ONNX Runtime's words for a
        name the model lacks (bound, it was silently replaced by the run's own)."""
        if self._token is not None and name == self._token:
            raise RuntimeError(f"Failed to find NodeArg with name: {name} in the def list")

    def clear_binding_inputs(self) -> None:
        """As ``IOBinding.clear_binding_inputs``; the inputs the kernels read are forgotten too."""
        super().clear_binding_inputs()
        self.odq_inputs.clear()

    def bind_output(
        self,
        name: str,
        device_type: str = "cpu",
        device_id: int = 0,
        element_type: Any = None,
        shape: Any = None,
        buffer_ptr: Any = None,
    ) -> None:
        """As ``IOBinding.bind_output``; a kernel computes its output into CPU memory bound here."""
        name = _text(name)  # one name for b"y" and "y", as ONNX Runtime has one slot for them
        super().bind_output(name, device_type, device_id, element_type, shape, buffer_ptr)
        self.odq_outputs.pop(name, None)
        self.odq_output_names.add(name)
        if buffer_ptr is not None:
            view = _cpu_view(device_type, element_type, shape, buffer_ptr)
            if view is not None:
                self.odq_outputs[name] = view

    def bind_ortvalue_output(self, name: str, ortvalue: Any) -> None:
        """As ``IOBinding.bind_ortvalue_output``; a kernel computes into a CPU ``OrtValue``'s data."""
        name = _text(name)
        super().bind_ortvalue_output(name, ortvalue)
        self.odq_outputs.pop(name, None)
        self.odq_output_names.add(name)
        view = _ortvalue_view(ortvalue)
        if view is not None:
            self.odq_outputs[name] = view

    def clear_binding_outputs(self) -> None:
        """As ``IOBinding.clear_binding_outputs``; the outputs the kernels compute into are forgotten too."""
        super().clear_binding_outputs()
        self.odq_outputs.clear()
        self.odq_output_names.clear()


def _cpu_view(device_type: str, element_type: Any, shape: Any, buffer_ptr: int) -> np.ndarray | None:
    """The array at a CPU pointer bound as an input (None: another device, or a type NumPy lacks)."""
    try:
        if str(device_type).lower() != "cpu":
            return None
        onnx_type = isinstance(element_type, int) and not isinstance(element_type, bool)
        # ORT reads the bytes in the machine's order, whatever order the type says: so does the kernel
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(element_type) if onnx_type else element_type)
        dtype = dtype.newbyteorder("=")
        dims = tuple(int(d) for d in shape)
        count = int(np.prod(dims, dtype=np.int64))
        if count == 0:
            return np.empty(dims, dtype)
        raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(buffer_ptr))
        return np.frombuffer(raw, dtype, count).reshape(dims)
    except Exception:  # noqa: BLE001
        return None


def _bound_outputs(iobinding: Any) -> tuple[set[str], dict[str, np.ndarray]]:
    """The names of a binding's outputs, and by name the CPU arrays they are bound to.

    ONNX Runtime binds an output it allocated to the array it allocated, for the next run too: what
    ORT 1.32's ``IOBinding`` lists (private: its names, and its bound values in the order bound) is
    read for every binding; a ``KernelIOBinding`` adds what it kept of the caller's own bindings."""
    names, views = set(), {}
    try:  # names as ONNX Runtime reads them (b"y" is "y"), each where it was first bound: its slot
        listed = list(dict.fromkeys(_text(n) for n in iobinding._bound_outputs))
        values = iobinding._iobinding.get_outputs()
        names = set(listed)
        if len(listed) == len(values):
            views = {name: _ortvalue_view(value) for name, value in zip(listed, values)}
    except Exception:  # noqa: BLE001 - another ONNX Runtime's binding: nothing known
        pass
    if isinstance(iobinding, KernelIOBinding):
        names |= iobinding.odq_output_names
        views.update(iobinding.odq_outputs)
    return names, {name: view for name, view in views.items() if view is not None}


def _text(name: Any) -> Any:
    """A name as ONNX Runtime reads it: ``bytes`` decoded (UTF-8), anything else as it is."""
    if isinstance(name, bytes):
        try:
            return name.decode()
        except UnicodeDecodeError:
            return name
    return name


class _Guesses:
    """One run's guessed output shapes: ``inferred()`` (the shapes inference finds, asked for once at
    most), and a budget of ``max_bytes`` for the outputs bound at them together (``take``)."""

    def __init__(self, infer: Callable[[], dict], max_bytes: int) -> None:
        self._infer, self._found, self._left = infer, None, max_bytes

    def inferred(self) -> dict:
        if self._found is None:
            self._found = self._infer()
        return self._found

    def take(self, nbytes: int) -> bool:
        """Whether an output of ``nbytes`` fits what is left (taken from it if so)."""
        if nbytes > self._left:
            return False
        self._left -= nbytes
        return True


def _value_shape(value: Any) -> Any:
    """A fed array's or ``OrtValue``'s shape (an error for anything else)."""
    return value.shape() if isinstance(value, ort.OrtValue) else value.shape


def _bindable(value: Any) -> bool:
    """Whether a fed value can be bound as it is for a bound run: an array of a numeric type, or an
    ``OrtValue`` tensor of one on the CPU."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    try:
        return (
            isinstance(value, ort.OrtValue)
            and value.is_tensor()
            and value.device_name().lower() == "cpu"
            and value.data_type() in _NUMPY_TENSORS
        )
    except Exception:  # noqa: BLE001 - ORT's own run reports what is wrong with the value
        return False


def _ortvalue_view(value: Any) -> np.ndarray | None:
    """The array an ``OrtValue`` tensor on the CPU holds, in place (None: anything else)."""
    try:
        if value.device_name().lower() != "cpu" or not value.is_tensor():
            return None
        return _cpu_view("cpu", value.element_type(), value.shape(), value.data_ptr())
    except Exception:  # noqa: BLE001
        return None


class KernelSession(ort.InferenceSession):
    """An ``InferenceSession`` running Dequantize nodes with the Python kernel (others lowered).

    ``kernel_nodes``: names of the nodes the kernel runs. ``lowered_nodes``: names of the nodes lowered
    to standard ONNX because no kernel can carry their types; ``lowered`` maps them to the reason.
    ``scratch``: the output buffers the kernels reuse from run to run (at most ``scratch.max_bytes``
    kept between runs; ``scratch.clear()`` drops them), freed with the session. An output ``run``
    returns that a kernel computed in place is in such a buffer, lent to the caller: it goes back to
    the pool when the caller drops the last array that refers to it, never before.
    """

    kernel_nodes: tuple[str, ...]
    lowered_nodes: tuple[str, ...]
    lowered: dict[str, str]
    scratch: runs.ScratchPool

    def __init__(
        self,
        prepared: Prepared,
        sess_options: ort.SessionOptions | None = None,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[dict[Any, Any]] | None = None,
        *,
        scratch_bytes: int = runs.SCRATCH_MAX_BYTES,
        **kwargs: Any,
    ) -> None:
        self.scratch = runs.ScratchPool(scratch_bytes)
        self.kernel_nodes = prepared.kernel_nodes
        self.lowered = dict(prepared.lowered)
        self.lowered_nodes = tuple(prepared.lowered)
        self._token_input = prepared.token_input
        self._params = prepared.params
        self._fed = prepared.fed
        self._placeable = prepared.placeable
        self._misstated = False  # a bound run failed where the unbound one did not: no shape is guessed
        self._misguessed: set[str] = set()  # outputs a run found of another shape than guessed
        self._inferred = prepared.inferred
        self._shapes_model = prepared.shapes_model
        self._signatures: OrderedDict[tuple, Any] = OrderedDict()  # input shapes -> 0 (seen once) or x's shapes
        self._signatures_lock = threading.Lock()
        self._guessable = bool(self._inferred) or any(p[2] is not None for p in self._placeable.values())
        self._large_x = False  # a run handed a kernel an x of PLACE_MIN_BYTES / 4 elements or more
        self._cut = False  # the last run's kernels cut a call among threads (``_split.rouse``)
        self._inner = prepared.inner
        self._kernel_outputs = prepared.kernel_outputs
        self._hidden = frozenset(prepared.hidden)
        self._odq_path = prepared.path
        if self._token_input is not None:
            kernels.ensure_registered()
            kernels.reinstall_hook()
            if sess_options is None:
                sess_options = ort.SessionOptions()
            _register_library(sess_options)
        if providers is None:
            providers = ["CPUExecutionProvider"]
        try:
            data = prepared.model.SerializeToString()
        except (ValueError, EncodeError) as e:  # over protobuf's 2 GiB
            raise DequantizeError(f"the model is too large to hand to ONNX Runtime in memory: {e}") from None
        try:
            super().__init__(data, sess_options, providers, provider_options, **kwargs)
        except Exception as e:
            if "Conflicting with a registered kernel" in str(e):
                raise DequantizeError(
                    "these SessionOptions already have onnxruntime-extensions registered; "
                    "odq.session registers it itself: pass SessionOptions without it"
                ) from e
            if type(e).__module__.startswith("onnxruntime"):  # Fail, InvalidGraph, ...: not RuntimeErrors
                message = " ".join(str(e).split())
                raise DequantizeError(
                    f"ONNX Runtime refused the model: {type(e).__name__}: {message}", path=self._odq_path
                ) from e
            raise
        self._output_names = [o.name for o in self.get_outputs()]
        given = {i.name for i in prepared.model.graph.input} | {t.name for t in prepared.model.graph.initializer}
        self._numpy_outputs = {o.name for o in self.get_outputs() if o.type in _NUMPY_TENSORS and o.name not in given}
        self._input_names = {i.name for i in self.get_inputs()}
        self._required = [i.name for i in self.get_inputs() if not i.type.startswith("optional")]

    # ---- what the caller sees ----

    def get_inputs(self) -> list[Any]:
        """The model's inputs (the hidden run token left out)."""
        return [i for i in super().get_inputs() if i.name != self._token_input]

    def get_outputs(self) -> list[Any]:
        """The model's outputs (the kernels' outputs made graph outputs to be bound left out)."""
        return [o for o in super().get_outputs() if o.name not in self._hidden]

    def io_binding(self) -> KernelIOBinding:
        """An ``IOBinding`` whose CPU inputs the kernels can read (``KernelIOBinding``)."""
        return KernelIOBinding(self)

    # ---- runs ----

    def _token_value(self, token: int) -> np.ndarray:
        return np.array(token, dtype=np.int64)

    def _feed(self, given: dict[str, Any], *, convert: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The feed to hand ONNX Runtime, and the graph inputs the kernels read from it, as arrays. Arrays
        are ``_settled``; a list the kernels read is converted (``convert``) and ORT is fed the result,
        so that ORT validates what they read. ``DequantizeError`` for an input fed None (ORT takes it as
        a tensor with no data, and a kernel handed that aborts the process)."""
        empty = sorted(k for k, v in given.items() if v is None)
        if empty:
            raise DequantizeError(f"input(s) {empty} fed None: feed each an array", path=self._odq_path)
        feed = {k: _settled(v) for k, v in given.items()}
        reads = {}
        for name, dtype in self._fed.items():
            if name in feed:
                array = _as_array(feed[name], dtype)
                if array is not None:
                    reads[name] = array
                    if convert and isinstance(feed[name], list):
                        feed[name] = array
        return feed, reads

    def _bound_reads(self, iobinding: Any) -> dict[str, np.ndarray]:
        """The graph inputs the kernels read, from a ``KernelIOBinding``'s CPU inputs. ``DequantizeError``
        for a model input left unbound, a binding that cannot be checked for one or whose inputs the
        kernels cannot read (not a ``KernelIOBinding``, where they read the feed), or an input bound where
        the kernels cannot read it."""
        ours = isinstance(iobinding, KernelIOBinding)
        bound = iobinding.odq_inputs if ours else None
        if self._token_input is not None:
            # a kernel handed an unbound input (no tensor) aborts the process, and ORT checks none that no
            # node of its graph reads: every model input must be bound. Another binding is checked by the
            # names ORT 1.32's IOBinding keeps (private, so only used to refuse); without them it is refused
            names = bound if ours else getattr(iobinding, "_bound_inputs", None)
            if not isinstance(names, dict):
                raise DequantizeError(
                    "bind inputs with this session's io_binding(): a binding made otherwise cannot be checked "
                    "for unbound inputs, which abort the Dequantize kernel",
                    path=self._odq_path,
                )
            unbound = sorted(i.name for i in self.get_inputs() if i.name not in names)
            if unbound:
                raise DequantizeError(f"input(s) {unbound} not bound: bind every model input", path=self._odq_path)
        if not self._fed:
            return {}
        if bound is None:
            raise DequantizeError(
                f"graph input(s) {sorted(self._fed)} feed Dequantize kernels that read them directly: bind "
                "inputs with this session's io_binding(), or create the session with read_feeds=False",
                path=self._odq_path,
            )
        reads = {}
        for name, dtype in self._fed.items():
            if name in bound:
                array = _as_array(bound[name], dtype)
                if array is None:
                    raise DequantizeError(
                        f"graph input '{name}' feeds a Dequantize kernel that reads it directly, and is bound "
                        "where the kernel cannot read it (not on the CPU): bind it with bind_cpu_input, or "
                        "create the session with read_feeds=False",
                        path=self._odq_path,
                    )
                reads[name] = array
        return reads

    def _finish(self, token: int, cause: BaseException | None) -> None:
        errors = runs.end(token, reuse=cause is None)
        if errors:
            _raise_recorded(errors, cause, self._odq_path)

    def _hidden_among(self, names: Any) -> str | None:
        """The hidden output's name among ``names`` (output names as a caller gives them) where it comes
        before any name ONNX Runtime would refuse first; None where there is none, or where ``names`` is
        not a list, tuple or array of strings (ONNX Runtime reports those)."""
        if not self._hidden or not isinstance(names, (list, tuple, np.ndarray)):
            return None
        texts = [_text(n) for n in names]
        if not all(isinstance(t, str) for t in texts):
            return None
        for t in texts:
            if t in self._hidden:
                return t
            if t not in self._output_names:  # ONNX Runtime's own error names this one
                return None
        return None

    def _refused_name(self, names: Any, feed_names: list[str]) -> tuple[str, str] | None:
        """A name the model as the caller sees it lacks, as ``("input", name)`` (the run token fed: each run
        feeds its own) or ``("output", name)`` (an inner value's name asked for); None: neither. Raises first
        as ONNX Runtime does for a missing input."""
        token = self._token_input is not None and self._token_input in feed_names
        hidden = self._hidden_among(names)
        if not token and hidden is None:
            return None
        self._validate_input([*feed_names, self._token_input])
        return ("input", self._token_input) if token else ("output", hidden)

    def _refuse_hidden(self, names: Any, feed_names: list[str]) -> None:
        """Raise as ONNX Runtime's ``run`` raises for a name the model as the caller sees it lacks."""
        refused = self._refused_name(names, feed_names)
        if refused is not None:
            what, name = refused
            spaced = " " if what == "input" else ""  # ONNX Runtime's own spellings of the two
            raise InvalidArgument(f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Invalid {what} name:{spaced}{name}")

    def _out_shape(self, output: str, reads: dict[str, np.ndarray], guesses: _Guesses | None) -> tuple[int, ...] | None:
        """The shape of a kernel's ``output`` (``Prepared.placeable``) in this run: its ``x``'s where the
        session reads ``x``; else, where ``guesses`` are taken, the shape the model states, or the one
        inferred (``_inferred_shapes``). None: ``x`` not fed, not inferred (yet)."""
        node, _, stated = self._placeable[output]
        if stated is not None or output in self._inferred:
            if guesses is None or output in self._misguessed:
                return None
            return stated if stated is not None else guesses.inferred().get(self._inferred[output])
        x = self._params[node].x
        x = reads.get(x.name) if isinstance(x, runs.Fed) else x
        return None if x is None else x.shape

    def _guessed(self, output: str) -> bool:
        """Whether ``output``'s shape before a run is the model's word or inference's, not ``x``'s own."""
        return self._placeable[output][2] is not None or output in self._inferred

    def _inferred_shapes(self, feed: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        """The shapes ONNX shape inference finds for the kernels' ``x`` (``Prepared.inferred``) given this
        run's input shapes, from the second run of those shapes on (inference takes milliseconds: not for
        shapes seen once); the ``SIGNATURES`` input shapes last used are kept."""
        # not where no x of PLACE_MIN_BYTES is likely: the inputs hold fewer elements than such an x, and
        # no run of this session handed a kernel one (small models' runs); nor for a run that cannot be bound
        try:
            key = tuple((name, tuple(_value_shape(value))) for name, value in feed.items())
            small = sum(math.prod(shape) for _, shape in key) < PLACE_MIN_BYTES // 4
        except Exception:  # noqa: BLE001 - a value of no shape: ONNX Runtime's own run reports it
            return {}
        if small and not self._large_x:
            return {}
        if feed.keys() != self._input_names or not all(_bindable(v) for v in feed.values()):
            return {}
        with self._signatures_lock:  # the last SIGNATURES used, the least recently used dropped first
            found = self._signatures.get(key)
            if found is None:  # seen once now
                while len(self._signatures) >= SIGNATURES:
                    self._signatures.popitem(last=False)
                self._signatures[key] = 0
                return {}
            self._signatures.move_to_end(key)
        if isinstance(found, dict):
            return found
        found = static_shapes(self._shapes_model, dict(key), set(self._inferred.values()))
        with self._signatures_lock:
            if key in self._signatures:
                self._signatures[key] = found
        return found

    def _place(
        self, names: list[str], feed: dict[str, Any], reads: dict[str, np.ndarray], run_options: Any
    ) -> dict[str, np.ndarray] | None:
        """For ``run``: by graph output, the arrays lent for the kernels' (``Prepared.placeable``) to be
        bound to: those asked for, and those other nodes read that are ``PLACE_MIN_BYTES`` each (within
        the pool's ``max_bytes`` together; none where the run executes only what its outputs need).
        None, for ONNX Runtime's own ``run`` (which also reports a wrong name), unless they add up to
        ``PLACE_MIN_BYTES``, the feed is arrays or CPU ``OrtValue``s (``_bindable``) of every model input
        and nothing else, and every output asked for is a model output whose array ONNX Runtime hands
        back as ``run`` does: a tensor of a NumPy type that is not a graph input or an initializer
        (``run`` copies those)."""
        wanted, total = {}, 0  # sizes first: most runs of small models stop here, at little cost
        # shapes the model states or inference finds are bound only where the run can be stopped (its own
        # RunOptions), within ``max_bytes`` together: a wrong one costs a run stopped and made again
        guesses = None
        if self._guessable and run_options is None and not self._misstated:
            guesses = _Guesses(lambda: self._inferred_shapes(feed), self.scratch.max_bytes)
        for name in names:
            found = self._placeable.get(name) if isinstance(name, str) else None
            shape = None if found is None else self._out_shape(name, reads, guesses)
            nbytes = -1 if shape is None else math.prod(shape) * found[1].itemsize
            if nbytes >= 0 and (not self._guessed(name) or guesses.take(nbytes)):
                wanted[name] = (shape, found[1])
                total += nbytes
        if self._inner and not (run_options is not None and run_options.only_execute_path_to_fetches):
            extra = 0
            for name in self._inner:
                dtype = self._placeable[name][1]
                shape = self._out_shape(name, reads, guesses)
                nbytes = -1 if shape is None else math.prod(shape) * dtype.itemsize
                if (
                    name not in wanted
                    and nbytes >= PLACE_MIN_BYTES
                    and extra + nbytes <= self.scratch.max_bytes
                    and (not self._guessed(name) or guesses.take(nbytes))
                ):
                    wanted[name] = (shape, dtype)
                    extra += nbytes
            total += extra
        if total < PLACE_MIN_BYTES or feed.keys() != self._input_names:
            return None
        if not all(_bindable(v) for v in feed.values()):
            return None
        if not all(isinstance(n, str) and n in self._numpy_outputs for n in names) or len(set(names)) != len(names):
            return None
        return {name: self.scratch.lend(shape, dtype) for name, (shape, dtype) in wanted.items()}

    def _checked(
        self,
        call: Callable[[int], Any],
        reads: dict[str, np.ndarray] | None = None,
        placed: runs.Placed | None = None,
        stop: Any = None,
    ) -> Any:
        if self._token_input is None:
            return call(0)
        cuts = _split.cuts()
        token = runs.begin(self.scratch, self._params, reads, placed, stop)
        run = runs.lookup(token) if self._inferred and not self._large_x else None  # what its kernels saw
        try:
            with signals.deferred():  # Ctrl-C inside a kernel would abort: raised once the run is over
                result = call(token)
                if run is not None and run.largest >= PLACE_MIN_BYTES // 4:
                    self._large_x = True
        except BaseException as e:
            self._finish(token, e)
            raise
        self._cut = _split.cuts() != cuts
        self._finish(token, None)
        return result

    def _rouse(self) -> None:
        """Where the last run's kernels cut a call among the reference's threads, have its helpers spin
        (``ROUSE``) while this run does its own work before its kernels."""
        if self._cut:
            _split.rouse(ROUSE)

    def _validate_input(self, feed_input_names: list[str]) -> None:
        """ONNX Runtime's check that the feed names every required input (its ``run`` methods call it), with
        the run token, which each run adds to the feed, left out of what the error reports."""
        missing = [name for name in self._required if name not in feed_input_names]
        if missing:
            shown = [n for n in feed_input_names if n != self._token_input]
            raise ValueError(f"Required inputs ({missing}) are missing from input feed ({shown}).")

    def run(self, output_names: Any, input_feed: dict[str, Any], run_options: Any = None) -> Any:
        """As ``InferenceSession.run``; a kernel's error raises (``DequantizeError`` naming the node)."""
        self._rouse()
        self._refuse_hidden(output_names, list(input_feed))
        feed, reads = self._feed(input_feed)
        names = output_names or self._output_names
        suspect = False
        if isinstance(names, (list, tuple)):
            placed = self._place(list(names), feed, reads, run_options)
            if placed is not None:
                try:
                    return self._run_placed(list(names), placed, feed, reads, run_options)
                except _Refused as e:  # ONNX Runtime's own run below raises ONNX Runtime's own error
                    suspect = e.guessed

        def call(token: int) -> Any:
            if self._token_input is not None:
                feed[self._token_input] = self._token_value(token)
            return super(KernelSession, self).run(names, feed, run_options)

        result = self._checked(call, reads)
        if suspect:  # the bound run failed where this one did not: its guessed shapes are not to be trusted
            self._misstated = True
        return result

    def _run_placed(
        self,
        names: list[str],
        placed: dict[str, np.ndarray],
        feed: dict[str, np.ndarray],
        reads: dict[str, np.ndarray],
        run_options: Any,
    ) -> list[np.ndarray]:
        """``run`` through a binding: the outputs in ``placed`` bound to its arrays (the kernels compute
        into them), the others of ``names`` to what ONNX Runtime allocates (handed back, not copied)."""

        def call(token: int) -> list[np.ndarray]:
            binding = ort.IOBinding(self)
            # arrays and outputs bound through the binding's own C object (what ``bind_cpu_input`` and
            # ``bind_output`` call, less their Python: 3-4 us a run), OrtValues through the wrapper. ONNX
            # Runtime reads a bound array where it is: each must live until the run is over (``feed`` and
            # ``placed`` hold theirs; ``token_value``, the token's)
            bind = binding._iobinding
            cpu = _cpu_device()
            token_value = self._token_value(token)
            try:  # binding checks too (an OrtValue of another session's), in words of its own
                for name, value in feed.items():
                    if isinstance(value, ort.OrtValue):
                        binding.bind_ortvalue_input(name, value)
                    else:
                        bind.bind_input(name, value)
                bind.bind_input(self._token_input, token_value)
                for name in names:
                    out = placed.get(name)
                    if out is None:
                        bind.bind_output(name, cpu)
                    else:
                        bind.bind_output(name, cpu, out.dtype, out.shape, out.ctypes.data)
                for name in placed.keys() - set(names):  # not asked for: other nodes' inputs
                    out = placed[name]
                    bind.bind_output(name, cpu, out.dtype, out.shape, out.ctypes.data)
                super(KernelSession, self).run_with_iobinding(binding, stop)
            except Exception as e:  # a kernel's own error, recorded, is raised by _checked instead
                raise _Refused from e
            if all(n in placed for n in names):  # nothing of ONNX Runtime's to hand back (4 us a run)
                return [placed[n] for n in names]
            values = binding.get_outputs()  # in the order bound
            return [placed[n] if n in placed else values[i].numpy() for i, n in enumerate(names)]

        by_node = {self._placeable[name][0]: out for name, out in placed.items()}
        guessed = any(self._guessed(name) for name in placed)
        stop = ort.RunOptions() if guessed else run_options  # ``_place`` guesses only where run_options is None
        try:
            return self._checked(call, reads, by_node, stop)
        except runs.Misplaced as e:
            if not guessed:
                raise
            # a shape stated or inferred was wrong (the kernel gave another, and stopped the run): ONNX
            # Runtime's own run follows, and this session guesses that node's output no more
            wrong = {name for name in placed if self._placeable[name][0] == e.node and self._guessed(name)}
            if wrong:
                self._misguessed |= wrong
            else:
                self._misstated = True
            raise _Refused from None
        except _Refused as e:  # a guess is suspect where ONNX Runtime's own run then succeeds
            e.guessed = guessed
            raise

    def run_with_ort_values(
        self, output_names: Any, input_dict_ort_values: dict[str, Any], run_options: Any = None
    ) -> Any:
        """As ``InferenceSession.run_with_ort_values``, with the kernel errors raised."""
        self._rouse()
        self._refuse_hidden(output_names, list(input_dict_ort_values))

        feed, reads = self._feed(input_dict_ort_values, convert=False)

        def call(token: int) -> Any:
            if self._token_input is not None:
                feed[self._token_input] = ort.OrtValue.ortvalue_from_numpy(self._token_value(token))
            return super(KernelSession, self).run_with_ort_values(output_names or self._output_names, feed, run_options)

        return self._checked(call, reads)

    def run_with_iobinding(self, iobinding: Any, run_options: Any = None) -> Any:
        """As ``InferenceSession.run_with_iobinding`` (the token is bound here), with the kernel errors raised."""
        self._rouse()
        reads = self._bound_reads(iobinding)
        names, views = _bound_outputs(iobinding)
        hidden = min(names & self._hidden, default=None)
        if hidden is not None:  # as ONNX Runtime refuses an inner value's name bound as an output
            raise RuntimeError(f"Error in execution: Invalid output name: {hidden}")
        placed = {self._kernel_outputs[n]: a for n, a in views.items() if n in self._kernel_outputs}

        def call(token: int) -> Any:
            if self._token_input is not None:
                ort.IOBinding.bind_cpu_input(iobinding, self._token_input, self._token_value(token))
            return super(KernelSession, self).run_with_iobinding(iobinding, run_options)

        return self._checked(call, reads, placed)

    def run_async(
        self, output_names: Any, input_feed: dict[str, Any], callback: Any, user_data: Any, run_options: Any = None
    ) -> Any:
        """As ``InferenceSession.run_async``; a kernel's error reaches ``callback`` as its ``err`` string."""
        if self._token_input is None:
            return super().run_async(output_names, input_feed, callback, user_data, run_options)
        refused = self._refused_name(output_names, list(input_feed)) if callable(callback) else None
        if refused is not None:  # as ONNX Runtime reports a name the model lacks: to the callback, later
            what, name = refused
            threading.Thread(target=callback, args=([], user_data, f"Invalid {what} name: {name}")).start()
            return None
        feed, reads = self._feed(input_feed)
        token = runs.begin(self.scratch, self._params, reads)
        feed[self._token_input] = self._token_value(token)
        path = self._odq_path

        def done(results: Any, data: Any, err: str, _feed: Any = feed) -> None:  # _feed: alive until done
            try:
                errors = runs.end(token, reuse=not err)
                if errors:
                    try:
                        _raise_recorded(errors, None, path)
                    except BaseException as e:  # noqa: BLE001 - reported through the callback
                        callback(None, data, str(e))
                        return
                callback(results, data, err)
            finally:
                with _in_flight:
                    _async_runs.discard(token)
                    _in_flight.notify_all()

        _track_async(token)
        try:
            return super().run_async(output_names or self._output_names, feed, done, user_data, run_options)
        except BaseException:
            runs.end(token, reuse=False)
            with _in_flight:
                _async_runs.discard(token)
            raise


def session(
    model: Any,
    sess_options: ort.SessionOptions | None = None,
    providers: Sequence[Any] | None = None,
    provider_options: Sequence[dict[Any, Any]] | None = None,
    *,
    opset: int | None = None,
    scratch_bytes: int = runs.SCRATCH_MAX_BYTES,
    read_feeds: bool = True,
    **ort_options: Any,
) -> KernelSession:
    """An ONNX Runtime session that runs ``model`` with its Dequantize nodes (domain ``ngraph``) kept.

    ``model``: an ``onnx.ModelProto``, a path, or serialized bytes; never modified. Nodes with 8/16/32-bit
    integer inputs and f32/f64 output run the exact NumPy reference as an onnxruntime-extensions Python
    op; nodes with f16/bf16 output or 4-bit inputs are lowered to standard ONNX (logged, and listed in
    ``.lowered_nodes``). The remaining arguments go to ``onnxruntime.InferenceSession``; caller-supplied
    ``sess_options`` get the extensions library registered (once). ``providers`` defaults to CPU.
    ``opset``: convert the model to this default-domain opset when nodes must be lowered (None keeps
    it; lowering needs 13 to 27). ``scratch_bytes``: the most output-buffer memory the session keeps
    between runs for its kernels to reuse (0: a fresh array per kernel call). ``read_feeds``: kernels
    read the graph inputs they take (``x``, scale, zero point) from the caller's arrays, where the
    extension would copy each at every call; ``run_with_iobinding`` then needs bindings made by the
    session's ``io_binding()``, with those inputs on the CPU (False: every input goes through ONNX
    Runtime). Raises ``DequantizeError`` for a model that breaks the op's contract.
    """
    prepared = prepare(model, opset=opset, read_feeds=read_feeds)
    for name, reason in prepared.lowered.items():
        log.info("Dequantize node '%s' lowered to standard ONNX: %s", name, reason)
    return KernelSession(
        prepared, sess_options, providers, provider_options, scratch_bytes=scratch_bytes, **ort_options
    )
