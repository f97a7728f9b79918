"""The Python kernels: one onnxruntime-extensions op per (input type, output type, zero point or not).

onnxruntime-extensions 0.15 Python ops have sharp edges (docs/ort-facts.md), and this module is where
they are handled:

- The extension cannot tell two kernels of one op name apart by output type, so each type pair gets
  its own op name: ``Dequantize_i8_f32`` (inputs ``x, scale, zero_point, run_token``) and
  ``Dequantize_i8_f32_nozp`` (``x, scale, run_token``); every input of a Python op is required.
- The extension copies every input into a new NumPy array at every call. A main-graph node whose
  scale and zero point are constants or graph inputs gets ``Dequantize_i8_f32_x`` (``x, run_token``):
  the session holds the constants, and reads graph inputs from the caller's feed, and hands them to
  the kernel through its run (``runs.Run.params`` and ``runs.Run.feeds``, keyed by ``odq_node``); where
  ``x`` is a graph input or a constant too, ``Dequantize_i8_f32_shape`` (``x``'s shape, a few int64s,
  and ``run_token``) gets it so as well: the shape gives its output's even where the kernel fails.
- f16, bf16 and 4-bit tensors abort the process inside the extension: those type pairs get no kernel
  (``kernel_op_type`` returns None and the session lowers such nodes instead).
- Attributes can only be strings, ints or floats: the node carries ``odq_axes`` ("0,2") and
  ``odq_node`` (the node's name, for messages) as strings.
- An exception escaping a kernel aborts the interpreter, and a wrong output dtype or shape gives
  garbage: the kernel body catches everything, returns a zero array of exactly the declared dtype, and
  records the error under the run token it was fed (``runs``); ``KernelSession.run`` raises it after
  the run.
- Ops are defined once per process (a second definition of a name breaks every later session) and
  all of them before any ``SessionOptions`` registers the library (later ones are not seen by it).
- The stock bridge turns every output into a Python list (about 40x the kernel's own time). The
  package's private hook ``PyCustomOpDef.install_hooker`` is replaced by one that hands our outputs
  back as arrays, and passes every other op to the stock handler. Tested in ``tests/test_ort_hook.py``
  against the pinned version range ``SUPPORTED_EXTENSIONS``.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import DequantizeError
from ..reference import dequantize
from ..schema import DOMAIN, OP_TYPE
from . import runs

__all__ = [
    "KERNEL_DOMAIN",
    "SUPPORTED_EXTENSIONS",
    "KernelSpec",
    "kernel_carries",
    "kernel_op_type",
    "kernel_reads",
    "ensure_registered",
    "fast_bridge_installed",
    "stats",
]

log = logging.getLogger("onnx_dequant.ort")

KERNEL_DOMAIN = DOMAIN
"""The domain the rewritten nodes use (the op's own; only kernel op names live there at run time)."""

SUPPORTED_EXTENSIONS = ((0, 15, 2), (0, 16, 0))
"""onnxruntime-extensions versions tested with the private hook: ``low <= version < high``."""

KERNEL_INPUT_TYPES = ("i8", "u8", "i16", "u16", "i32")
"""Input types the extension can carry (8/16/32-bit integers)."""
KERNEL_OUTPUT_TYPES = ("f32", "f64")
"""Output types the extension can carry (f16 and bf16 abort the process)."""


OP_INPUTS = {"all": "", "nozp": "_nozp", "x": "_x", "shape": "_shape"}
"""What a kernel op takes as inputs, and the suffix of its name: ``all`` (``x, scale, zero_point, token``),
``nozp`` (``x, scale, token``), ``x`` (``x, token``: the scale and zero point reach the kernel through the
session) and ``shape`` (``x``'s shape and the token: ``x`` too reaches it through the session)."""


@dataclass(frozen=True)
class KernelSpec:
    """One registered op: its name in ``KERNEL_DOMAIN``, the types it carries, and which inputs it takes
    (``OP_INPUTS``)."""

    op_type: str
    x: dtypes.DType
    out: dtypes.DType
    takes: str = "all"

    @property
    def inputs(self) -> int:
        """How many inputs the op takes (the run token included)."""
        return {"all": 4, "nozp": 3, "x": 2, "shape": 2}[self.takes]


def kernel_carries(x: Any, out: Any) -> bool:
    """Whether the extension can carry a kernel with these input and output types."""
    return dtypes.parse(x).name in KERNEL_INPUT_TYPES and dtypes.parse(out).name in KERNEL_OUTPUT_TYPES


def kernel_reads(elem: Any) -> bool:
    """Whether a kernel reads tensors of this element type (one of its input or output types)."""
    try:
        return dtypes.parse(elem).name in (*KERNEL_INPUT_TYPES, *KERNEL_OUTPUT_TYPES)
    except DequantizeError:
        return False


def kernel_op_type(x: Any, out: Any, takes: str) -> str | None:
    """The kernel op name for a node with these input and output types taking the inputs ``takes``
    names (``OP_INPUTS``), or None when no kernel can carry the types."""
    if not kernel_carries(x, out):
        return None
    xt, ot = dtypes.parse(x), dtypes.parse(out)
    return f"{OP_TYPE}_{xt.name}_{ot.name}{OP_INPUTS[takes]}"


def _all_specs() -> list[KernelSpec]:
    specs = []
    for x in KERNEL_INPUT_TYPES:
        for out in KERNEL_OUTPUT_TYPES:
            for takes in OP_INPUTS:
                name = kernel_op_type(x, out, takes)
                assert name is not None
                specs.append(KernelSpec(name, dtypes.parse(x), dtypes.parse(out), takes))
    return specs


_stats = {"calls": 0, "fast": 0, "errors": 0, "placed": 0, "misplaced": 0}
"""Counters: kernel calls, those answered through the fast hook (the rest took the stock bridge), errors,
calls that computed into the array their graph output is bound to (``runs.Run.placed``), and calls that
refused such an array of the wrong shape (``runs.Misplaced``: the session makes the run again unbound;
not an error)."""


def stats() -> dict[str, int]:
    """A copy of the kernel call counters (``calls``, ``fast``, ``errors``, ``placed``, ``misplaced``)."""
    return dict(_stats)


# ---- the kernel body ----


@functools.lru_cache(maxsize=256)
def _parse_axes(text: str) -> tuple[int, ...]:
    text = text.strip()
    return tuple(int(a) for a in text.split(",")) if text else ()


def _declared_shape(shape: Any) -> tuple[int, ...]:
    """The shape a ``shape`` op's first input gives (``x``'s, from the model: a Shape node or a constant)."""
    return tuple(np.asarray(shape, np.int64).reshape(-1).tolist())


def _make_body(spec: KernelSpec) -> Callable[..., np.ndarray]:
    out_dtype = spec.out.numpy
    n_inputs = spec.inputs

    def body(*feed: Any, odq_axes: str = "", odq_node: str = "") -> np.ndarray:
        """Never raises: returns the result, or zeros of the declared dtype and records the error.

        The result may live in a buffer the run lends this thread: valid until the thread's next call.
        """
        _stats["calls"] += 1
        x = feed[0] if feed and spec.takes != "shape" else None
        bound = None  # the array the node's output is bound to, if any: what ONNX Runtime expects back
        try:
            if len(feed) != n_inputs:
                raise DequantizeError(f"kernel {spec.op_type} expects {n_inputs} inputs, got {len(feed)}")
            run = runs.lookup(feed[-1])
            bound = run.placed.get(odq_node) if run is not None else None
            if spec.takes == "shape":
                x, scale, zp = runs.inputs(run, odq_node)
                declared = _declared_shape(feed[0])
                if x.shape != declared:
                    raise DequantizeError(f"x has shape {x.shape}, the model's is {declared}")
            elif spec.takes == "x":
                _, scale, zp = runs.inputs(run, odq_node)
            else:
                scale, zp = feed[1], (feed[2] if spec.takes == "all" else None)
            size = getattr(x, "size", 0)  # an x that is no array is the reference's to refuse, below
            if run is not None and spec.takes != "shape" and size > run.largest:  # x another node computes
                run.largest = size
            out = None
            if bound is not None:  # computed in place; a result of another shape aborts the process
                if bound.shape != x.shape or bound.dtype != out_dtype:
                    if run.stop is not None:  # no node may run on what this one hands back instead
                        run.stop.terminate = True
                    raise runs.Misplaced(
                        f"its output is bound to an array of shape {bound.shape} ({bound.dtype}); "
                        f"it gives shape {x.shape} ({out_dtype})"
                    )
                out = bound
                _stats["placed"] += 1
            elif run is not None and isinstance(x, np.ndarray):
                out = run.out_array(x.shape, out_dtype)
            y = dequantize(x, scale, zp, axes=_parse_axes(odq_axes), dtype=spec.out, out=out)
            if y.dtype != out_dtype or not y.flags.c_contiguous:  # the bridge copies raw bytes
                y = np.ascontiguousarray(y, dtype=out_dtype)
            return y
        except BaseException as e:  # noqa: BLE001 - anything escaping aborts the interpreter
            _stats["misplaced" if isinstance(e, runs.Misplaced) else "errors"] += 1
            if isinstance(e, DequantizeError):
                e = e.at(node=odq_node or None)
            runs.record(feed[-1] if feed else None, odq_node, e)
            try:  # the output's shape as ONNX Runtime expects it (a preallocated output must match)
                if bound is not None and bound.dtype == out_dtype:  # as it is: its size may not be allocatable
                    return bound
                if bound is not None:
                    return np.zeros(bound.shape, out_dtype)
                if spec.takes == "shape":
                    shape = _declared_shape(feed[0])
                else:
                    shape = x.shape if isinstance(x, np.ndarray) else (0,)
                return np.zeros(shape, out_dtype)
            except BaseException:  # noqa: BLE001
                return np.zeros((0,), out_dtype)

    body.__name__ = spec.op_type
    return body


# ---- registration with onnxruntime-extensions (once per process) ----

_lock = threading.RLock()
_our_ids: dict[int, KernelSpec] = {}
_registered = False
_fast = False


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, p))
        parts.append(int(digits or 0))
    return tuple(parts)


def _fast_hook(stock: Callable[..., Any], opdefs: dict[int, Any]) -> Callable[..., Any]:
    """The invocation handler: our ops hand back their arrays; every other op goes to ``stock``."""

    def hook(k_id: int, feed: Any, attributes: Any) -> Any:
        spec = _our_ids.get(k_id)
        if spec is None:
            return stock(k_id, feed, attributes)
        try:
            _stats["fast"] += 1
            attrs = {str(k): str(v) for k, v in attributes.items()}
            y = opdefs[k_id].body(*feed, **attrs)  # the body itself never raises
            return (k_id, y.shape, y)
        except BaseException as e:  # noqa: BLE001 - last resort: nothing may escape into the extension
            try:
                runs.record(feed[-1], str(attributes.get("odq_node", "")), e)
            except BaseException:  # noqa: BLE001
                pass
            empty = np.zeros((0,), spec.out.numpy)
            return (k_id, empty.shape, empty)

    hook.odq_fast_hook = True  # type: ignore[attr-defined]
    return hook


def _install_fast_hook() -> bool:
    """Replace the extension's invocation handler with ours; False (stock, slow) where that is impossible."""
    import onnxruntime_extensions as ox
    from onnxruntime_extensions import _ocos

    version = _version_tuple(ox.__version__)
    low, high = SUPPORTED_EXTENSIONS
    stock = getattr(_ocos, "_on_pyop_invocation", None)
    install = getattr(_ocos.PyCustomOpDef, "install_hooker", None)
    if not (low <= version < high) or stock is None or install is None:
        log.warning(
            "onnxruntime-extensions %s is outside the tested range %s..%s or lacks its private hook: "
            "the Dequantize kernel uses the stock bridge, about 40x slower",
            ox.__version__,
            ".".join(map(str, low)),
            ".".join(map(str, high)),
        )
        return False
    install(_fast_hook(stock, _ocos.Opdef._odlist))
    return True


def ensure_registered() -> None:
    """Define every kernel op with the extension (once per process) and install the fast hook.

    Safe to call from many threads and many times. Ops already defined by an earlier copy of this module
    (a reload) are reused, with their bodies replaced, so no name is ever defined twice.
    """
    global _registered, _fast
    with _lock:
        if _registered:
            return
        import onnxruntime_extensions as ox
        from onnxruntime_extensions import _ocos

        existing = {od.op_type: od for od in list(_ocos.Opdef._odlist.values())}
        P = ox.PyCustomOpDef
        onnx_to_pyop = {
            "i8": P.dt_int8,
            "u8": P.dt_uint8,
            "i16": P.dt_int16,
            "u16": P.dt_uint16,
            "i32": P.dt_int32,
            "f32": P.dt_float,
            "f64": P.dt_double,
        }
        for spec in _all_specs():
            full = f"{KERNEL_DOMAIN}::{spec.op_type}"
            body = _make_body(spec)
            opdef = existing.get(full)
            if opdef is None:
                inputs = [onnx_to_pyop[spec.x.name] if spec.takes != "shape" else P.dt_int64]
                if spec.takes in ("all", "nozp"):
                    inputs.append(onnx_to_pyop[spec.out.name])
                    if spec.takes == "all":
                        inputs.append(onnx_to_pyop[spec.x.name])
                inputs.append(P.dt_int64)  # the run token
                opdef = _ocos.Opdef.create(
                    body,
                    op_type=full,
                    inputs=inputs,
                    outputs=[onnx_to_pyop[spec.out.name]],
                    attrs={"odq_axes": P.dt_string, "odq_node": P.dt_string},
                )
            else:
                opdef.body = body
            _our_ids[id(opdef)] = spec
        _fast = _install_fast_hook()
        _registered = True


def reinstall_hook() -> None:
    """Put the fast hook back in place (another package may have installed its own handler)."""
    global _fast
    with _lock:
        if _registered and _fast:
            _fast = _install_fast_hook()


def fast_bridge_installed() -> bool:
    """Whether kernel outputs go back through the fast hook (False: the stock, slow bridge)."""
    return _fast
