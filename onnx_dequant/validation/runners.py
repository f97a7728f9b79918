"""The ways validation runs a model: the reference evaluator (the oracle) and ONNX Runtime (plain, or with
our Python kernel through ``onnx_dequant.session``) at a chosen optimization level.

Both can expose intermediate tensors as extra outputs, which is how a disagreement is traced to the
first node whose output differs. ONNX Runtime cannot take or return bf16 and 4-bit tensors from NumPy;
the ORT runner casts such graph inputs and outputs through a carrier type (f32, int8, uint8) inside
the graph, exactly, and hands back arrays of the original type.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import onnx

from ..errors import DequantizeError
from .buffers import poison
from .carriers import with_carriers
from .loading import serialized
from .weights import in_memory, placeholders_as_inputs

__all__ = ["LEVELS", "OrtRunner", "ReferenceRunner", "Skip", "kernel_session", "plain_session", "session_options"]

LEVELS = ("default", "off")
"""ONNX Runtime optimization levels validation runs: its default (ORT_ENABLE_ALL) and none."""


class Skip(Exception):
    """A path that cannot run here (a missing component, a type it cannot carry); the reason is the message."""


class ReferenceRunner:
    """The oracle: ``onnx.reference.ReferenceEvaluator`` with our op's reference kernel."""

    def __init__(self, model: onnx.ModelProto, arrays: Mapping[str, np.ndarray] | None = None) -> None:
        """``arrays``: the data of ``model``'s in-memory placeholders (``externalize``), fed to the
        evaluator as they are (not copied)."""
        from onnx.reference import ReferenceEvaluator

        from ..reference import DequantizeOp, dequantize
        from .standard_ops import OPS

        self._constants: dict[str, np.ndarray] = {}
        if arrays:
            model, self._constants = placeholders_as_inputs(model, arrays)
        self._into: dict[str, np.ndarray] = {}
        into = self._into

        class Dequantize(DequantizeOp):
            """Our reference op, writing a node's output into the array ``run(into=...)`` names for it."""

            def _run(self, x, scale, zero_point=None, axes=None, type=None):  # the attribute's name
                try:
                    return self._into(x, scale, zero_point, axes, type)
                except DequantizeError as e:
                    node = self.onnx_node
                    raise e.at(node=node.name or f"Dequantize -> {', '.join(node.output)}") from None

            def _into(self, x, scale, zero_point, axes, type):  # noqa: A002 - the attribute's name
                out = into.pop(self.onnx_node.output[0], None) if self.onnx_node.output else None
                if (
                    out is not None
                    and isinstance(x, np.ndarray)
                    and isinstance(scale, np.ndarray)
                    and out.shape == x.shape
                    and out.dtype == scale.dtype
                ):
                    return (dequantize(x, scale, zero_point, axes=tuple(axes or ()), dtype=type or None, out=out),)
                return super()._run(x, scale, zero_point, axes, type)

        try:
            self.evaluator = ReferenceEvaluator(model, new_ops=[Dequantize, *OPS])
        except DequantizeError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure here means the oracle cannot run the model
            raise DequantizeError(f"the reference evaluator cannot load the model: {type(e).__name__}: {e}") from None
        self.output_names = list(self.evaluator.output_names)

    def run(
        self,
        feeds: Mapping[str, np.ndarray],
        *,
        intermediate: bool = False,
        into: Mapping[str, np.ndarray] | None = None,
    ) -> dict[str, Any]:
        """Graph outputs by name, or with ``intermediate`` every tensor the graph computes or takes in.

        ``into`` maps tensor names to arrays that a Dequantize node computing that tensor writes its
        output into (when shape and type fit; else it allocates as usual): memory reused from run to
        run. The caller poisons them first (``poison``), so an element left unwritten cannot pass.
        """
        self._into.clear()
        self._into.update(into or {})
        try:
            if intermediate:
                res = self.evaluator.run(None, {**self._constants, **feeds}, intermediate=True)
                return {k: v for k, v in res.items() if k}
            values = self.evaluator.run(None, {**self._constants, **feeds})
        except DequantizeError as e:
            raise DequantizeError(
                f"the reference cannot run the model on these inputs: {e.rule}", node=e.node, path=e.path
            ) from None
        except Exception as e:  # noqa: BLE001
            raise DequantizeError(
                f"the reference cannot run the model on these inputs: {type(e).__name__}: {e}"
            ) from None
        finally:
            self._into.clear()
        return dict(zip(self.output_names, values))


def session_options(level: str, config: Mapping[str, str] | None = None) -> Any:
    """ORT session options for an optimization level of ``LEVELS`` and session config entries
    (``add_session_config_entry``); quiet (ONNX Runtime's C++ log shows fatal errors only: a path's failure
    is in the report), and without the memory arena (it would keep each session's peak allocation alive
    until the session goes)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    for key, value in (config or {}).items():
        so.add_session_config_entry(str(key), str(value))
    so.graph_optimization_level = {
        "default": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }[level]
    so.enable_cpu_mem_arena = False
    so.log_severity_level = 4
    return so


def kernel_session(
    model: onnx.ModelProto,
    so: Any,
    arrays: Mapping[str, np.ndarray] | None = None,
    scratch: list[np.ndarray] | None = None,
) -> tuple[Any, list[Any]]:
    """``onnx_dequant.session(model)`` with session options ``so``, and the OrtValues it was given for
    ``model``'s in-memory placeholders (see ``externalize``), which must live as long as the session.
    ``scratch``: arrays whose memory the kernels may compute into (given to the session's pool)."""
    try:
        from ..ort import runs
        from ..ort.prepare import prepare
        from ..ort.session import KernelSession
    except ImportError as e:
        raise Skip(f"the Python kernel (onnx_dequant.ort) is not available: {e}") from None
    prepared = prepare(model)
    names, values = in_memory(prepared.model, arrays or {})
    if names:
        so.add_external_initializers(names, values)
    reusable = [a.reshape(-1).view(np.uint8) for a in scratch or () if a.flags.c_contiguous and a.flags.writeable]
    limit = max(runs.SCRATCH_MAX_BYTES, sum(b.nbytes for b in reusable))
    session = KernelSession(prepared, so, scratch_bytes=limit)
    if reusable:
        session.scratch.give(reusable)
    return session, values


def plain_session(
    model: onnx.ModelProto, so: Any, arrays: Mapping[str, np.ndarray] | None, data: bytes | None
) -> tuple[Any, list[Any]]:
    """An ONNX Runtime session on ``model`` (``data``: it serialized, when the caller has it), and the
    OrtValues it was given for the in-memory placeholders."""
    import onnxruntime as ort

    names, values = in_memory(model, arrays or {})
    if names:
        so.add_external_initializers(names, values)
    data = data if data is not None else serialized(model)
    if data is not None:
        return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]), values
    if names:
        raise DequantizeError("a model over 2 GB with in-memory initializers cannot be handed to ONNX Runtime")
    with tempfile.TemporaryDirectory(prefix="odq-validate-") as tmp:  # over 2 GB: weights in a side file
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path, save_as_external_data=True, location="model.data")
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]), values


class OrtRunner:
    """ONNX Runtime on ``model`` at ``level``; ``kernel`` runs our op through ``onnx_dequant.session``.

    ``expose`` names intermediate tensors to return as well, with their NumPy dtypes; ``config`` holds
    ORT session config entries; ``data`` is ``model`` serialized, when the caller has it already;
    ``arrays`` holds the data of ``model``'s in-memory placeholders (``externalize``); with ``kernel``,
    ``scratch`` holds arrays whose memory the kernels may overwrite with their outputs (the session's
    pool keeps them, so a run does not fault in fresh pages).
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        level: str,
        *,
        kernel: bool = False,
        expose: Mapping[str, np.dtype] | None = None,
        config: Mapping[str, str] | None = None,
        data: bytes | None = None,
        arrays: Mapping[str, np.ndarray] | None = None,
        scratch: list[np.ndarray] | None = None,
    ) -> None:
        self.level = level
        self.kernel = kernel
        self.config = dict(config or {})
        prepared, self._in_map, self._out_map = with_carriers(model, expose or {})
        so = session_options(self.level, self.config)
        if kernel:
            self.session, self._values = kernel_session(prepared, so, arrays, scratch)
        else:
            self.session, self._values = plain_session(prepared, so, arrays, data if prepared is model else None)
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(
        self,
        feeds: Mapping[str, np.ndarray],
        buffers: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> dict[str, np.ndarray]:
        """Every output (graph outputs and exposed tensors) by its original name and type.

        ``buffers`` maps an output name to ``(buffer, sample)``: ONNX Runtime writes the output into
        ``buffer`` where it can, after ``poison(buffer, sample)``; this spares a fresh allocation (and
        its page faults) per run. An output that does not fit its buffer comes back as a new array.
        """
        wanted = {i.name for i in self.session.get_inputs()}
        fed = {}
        for name, value in feeds.items():
            carrier = self._in_map.get(name)
            if carrier is not None:
                fed[carrier[0]] = value.astype(carrier[1])
            elif name in wanted:
                fed[name] = value
        bound = {
            n: b
            for n, b in (buffers or {}).items()
            if n in self.output_names and n not in self._out_map and b[0].size and b[0].flags.c_contiguous
        }
        if bound:
            try:
                return self._run_bound(fed, bound)
            except Exception:  # noqa: BLE001 - e.g. an output whose shape does not fit: run plainly below
                pass
        values = self.session.run(self.output_names, fed)
        return self._named(zip(self.output_names, values))

    def _named(self, pairs: Iterable[tuple[str, Any]]) -> dict[str, np.ndarray]:
        out = {}
        for name, value in pairs:
            back = self._out_map.get(name)
            if back is not None:
                out[back[0]] = np.asarray(value).astype(back[1])
            else:
                out[name] = value
        return out

    def _run_bound(
        self, fed: Mapping[str, np.ndarray], bound: Mapping[str, tuple[np.ndarray, np.ndarray]]
    ) -> dict[str, np.ndarray]:
        binding = self.session.io_binding()
        for name, value in fed.items():
            binding.bind_cpu_input(name, np.asarray(value, order="C"))  # not ascontiguousarray: 0-d stays 0-d
        for name in self.output_names:
            if name not in bound:
                binding.bind_output(name, "cpu")
            else:
                buf, sample = bound[name]
                poison(buf, sample)
                binding.bind_output(name, "cpu", 0, buf.dtype, list(buf.shape), buf.ctypes.data)
        self.session.run_with_iobinding(binding)
        values = []
        for name, ov in zip(self.output_names, binding.get_outputs()):
            buf = bound[name][0] if name in bound else None
            if buf is not None and ov.data_ptr() == buf.ctypes.data and tuple(ov.shape()) == buf.shape:
                values.append((name, buf))
            else:
                values.append((name, ov.numpy()))
        return self._named(values)
