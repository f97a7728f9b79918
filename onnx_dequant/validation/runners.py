"""The ways validation runs a model: the reference evaluator (the oracle) and ONNX Runtime (plain, or with
our Python kernel through ``onnx_dequant.session``) at a chosen optimization level.

Both can expose intermediate tensors as extra outputs, which is how a disagreement is traced to the
first node whose output differs. ONNX Runtime cannot take or return bf16 and 4-bit tensors from NumPy;
the ORT runner casts such graph inputs and outputs through a carrier type (f32, int8, uint8) inside
the graph, exactly, and hands back arrays of the original type.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .. import dtypes
from ..errors import DequantizeError
from ..graphs import LARGE_BYTES, dequantize_nodes, iter_nodes
from ..schema import is_dequantize
from .loading import serialized

__all__ = ["LEVELS", "OrtRunner", "ReferenceRunner", "Skip", "externalize", "has_dequantize", "session_options"]

LEVELS = ("default", "off")
"""ONNX Runtime optimization levels validation runs: its default (ORT_ENABLE_ALL) and none."""

_CARRIER = {  # types ORT's Python API cannot exchange with NumPy -> the type to carry them in
    dtypes.parse(t).onnx: (dtypes.parse(c).onnx, dtypes.parse(c).numpy, dtypes.parse(t).numpy)
    for t, c in (("bf16", "f32"), ("i4", "i8"), ("u4", "u8"))
}
_SUFFIX = "__odq_validate"


class Skip(Exception):
    """A path that cannot run here (a missing component, a type it cannot carry); the reason is the message."""


def has_dequantize(model: onnx.ModelProto) -> bool:
    """Whether the model holds our op anywhere: main graph, subgraphs or model-local functions."""
    return next(dequantize_nodes(model), None) is not None


def _np_to_onnx(dt: np.dtype) -> int:
    try:
        return dtypes.parse(np.dtype(dt)).onnx
    except DequantizeError:  # outside the table (string, float8, ...)
        return int(helper.np_dtype_to_tensor_dtype(np.dtype(dt)))


_MEMORY = "odq-validate-memory-"
"""Location prefix of the placeholders ``externalize`` puts in place of large initializers."""

_ORT_NUMPY = {
    dtypes.parse(t).onnx: dtypes.parse(t).numpy
    for t in ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "f32", "f64", "boolean")
}
"""Element types ONNX Runtime takes from NumPy as they are."""


def externalize(model: onnx.ModelProto, limit: int = LARGE_BYTES) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """``model`` with its large main-graph initializers' data left out, and that data by placeholder.

    Each initializer over ``limit`` bytes (raw data of a type ONNX Runtime takes from NumPy, not read
    by our op as a scale or zero point, which the lowering reads) becomes an external-data placeholder
    of the same name, type and shape; the returned dict maps its location to the data (a read-only
    view of a copy of the raw bytes). The lowering and ``onnx_dequant.ort.prepare`` work on such a
    model without copying the weights (a reshaped copy of a placeholder is a placeholder of the same
    data), and ``OrtRunner`` hands the data to ONNX Runtime as OrtValues instead of serializing it.
    ``model`` itself (and an empty dict) when there is nothing to leave out.
    """
    g = model.graph
    if sys.byteorder != "little":
        return model, {}
    read_as_params = {i for n in iter_nodes(model) if is_dequantize(n) for i in list(n.input)[1:]}
    arrays: dict[str, np.ndarray] = {}
    data: dict[int, np.ndarray] = {}
    for i, t in enumerate(g.initializer):
        np_type = _ORT_NUMPY.get(t.data_type)
        if (
            np_type is None
            or t.data_location == onnx.TensorProto.EXTERNAL
            or t.name in read_as_params
            or int(np.prod(t.dims, dtype=np.int64)) * np_type.itemsize <= limit
            or not t.HasField("raw_data")
        ):
            continue
        raw = np.frombuffer(t.raw_data, np_type)  # one copy of the data (protobuf hands out bytes)
        if raw.size == int(np.prod(t.dims, dtype=np.int64)):
            data[i] = raw.reshape(tuple(int(d) for d in t.dims))
    if not data:
        return model, {}
    light = _copy_fields(model, onnx.ModelProto(), skip="graph")
    lg = _copy_fields(g, light.graph, skip="initializer")
    for i, t in enumerate(g.initializer):
        if i not in data:
            lg.initializer.append(t)
            continue
        location = f"{_MEMORY}{len(arrays)}"
        arrays[location] = data[i]
        p = lg.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims, doc_string=t.doc_string)
        p.data_location = onnx.TensorProto.EXTERNAL
        p.external_data.add(key="location", value=location)
    return light, arrays


def _copy_fields(src: Any, dst: Any, *, skip: str) -> Any:
    """``dst`` with every set field of ``src`` but ``skip`` copied in (a shallow copy of one level)."""
    for field, value in src.ListFields():
        if field.name == skip:
            continue
        if field.is_repeated:
            getattr(dst, field.name).extend(value)
        elif field.message_type:
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)
    return dst


def in_memory(
    model: onnx.ModelProto, arrays: Mapping[str, np.ndarray], *, values: bool = True
) -> tuple[list[str], list[Any]]:
    """The names and OrtValues of ``model``'s placeholders (see ``externalize``) for
    ``SessionOptions.add_external_initializers``; the OrtValues share the arrays' memory (``values=False``:
    the names only)."""
    if not arrays:
        return [], []

    names: list[str] = []
    found: list[Any] = []
    for t in model.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in t.external_data if e.key == "location"), "")
        data = arrays.get(location)
        if data is None:
            continue
        dims = tuple(int(d) for d in t.dims)
        if int(np.prod(dims, dtype=np.int64)) != data.size or _ORT_NUMPY.get(t.data_type) != data.dtype:
            raise DequantizeError(f"initializer '{t.name}' no longer fits the data it was taken from")
        names.append(t.name)
        if values:
            import onnxruntime as ort

            found.append(ort.OrtValue.ortvalue_from_numpy(data.reshape(dims)))
    return names, found


def _placeholders_as_inputs(
    model: onnx.ModelProto, arrays: Mapping[str, np.ndarray]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """``model`` with its in-memory placeholders declared as graph inputs instead, and their data by name."""
    names, _ = in_memory(model, arrays, values=False)
    if not names:
        return model, {}
    light = _copy_fields(model, onnx.ModelProto(), skip="graph")
    lg = _copy_fields(model.graph, light.graph, skip="initializer")
    declared = {vi.name for vi in lg.input}
    constants = {}
    for t in model.graph.initializer:
        if t.name not in names:
            lg.initializer.append(t)
            continue
        location = next(e.value for e in t.external_data if e.key == "location")
        constants[t.name] = arrays[location].reshape(tuple(int(d) for d in t.dims))
        if t.name not in declared:
            lg.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return light, constants


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
            model, self._constants = _placeholders_as_inputs(model, arrays)
        self._into: dict[str, np.ndarray] = {}
        into = self._into

        class Dequantize(DequantizeOp):
            """Our reference op, writing a node's output into the array ``run(into=...)`` names for it."""

            def _run(self, x, scale, zero_point=None, axes=None, type=None):  # the attribute's name
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
            raise DequantizeError(f"the reference cannot run the model on these inputs: {e}") from None
        except Exception as e:  # noqa: BLE001
            raise DequantizeError(
                f"the reference cannot run the model on these inputs: {type(e).__name__}: {e}"
            ) from None
        finally:
            self._into.clear()
        return dict(zip(self.output_names, values))


def session_options(level: str, config: Mapping[str, str] | None = None) -> Any:
    """ORT session options for an optimization level of ``LEVELS`` and session config entries
    (``add_session_config_entry``); quiet, and without the memory arena (it would keep each session's
    peak allocation alive until the session goes)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    for key, value in (config or {}).items():
        so.add_session_config_entry(str(key), str(value))
    so.graph_optimization_level = {
        "default": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }[level]
    so.enable_cpu_mem_arena = False
    so.log_severity_level = 3
    return so


def _kernel_session(
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
    spare = [a.reshape(-1).view(np.uint8) for a in scratch or () if a.flags.c_contiguous and a.flags.writeable]
    limit = max(runs.SCRATCH_MAX_BYTES, sum(b.nbytes for b in spare))
    session = KernelSession(prepared, so, scratch_bytes=limit)
    if spare:
        session.scratch.give(spare)
    return session, values


def _plain_session(
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
        prepared, self._in_map, self._out_map = _prepare(model, expose or {})
        so = session_options(self.level, self.config)
        if kernel:
            self.session, self._values = _kernel_session(prepared, so, arrays, scratch)
        else:
            self.session, self._values = _plain_session(prepared, so, arrays, data if prepared is model else None)
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
            binding.bind_cpu_input(name, np.ascontiguousarray(value))
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


POISON_STRIDE = 1021
"""Every this many elements, ``poison`` writes a value that differs from any the path may write; a prime,
so rows of every length get hit at varying columns, and small enough that every 4 KiB page of a
4-byte type gets one."""


def poison(buf: np.ndarray, sample: np.ndarray) -> None:
    """Spoil a reused output buffer, so an element a run leaves unwritten cannot pass for a result:
    every ``POISON_STRIDE``-th element becomes the bitwise complement of the expected value there
    (``sample``, the expected values at those positions), which never compares equal to it (nor is NaN
    where it is NaN)."""
    flat = buf.reshape(-1)
    target = flat[::POISON_STRIDE]
    sample = np.asarray(sample).reshape(-1)
    if sample.shape != target.shape or sample.dtype != flat.dtype:
        return
    if flat.dtype == np.bool_:
        flat[::POISON_STRIDE] = ~sample
        return
    if flat.dtype.itemsize not in (1, 2, 4, 8):
        return
    kind = f"u{flat.dtype.itemsize}"
    np.invert(sample.view(kind), out=flat.view(kind)[::POISON_STRIDE])


KNOWN_REWRITES = {
    "MatMulNBits": "MatMulNBits from a DequantizeLinear -> MatMul fusion quantizes the activations to int8 "
    "(ORT's default session.qdq_matmulnbits_accuracy_level is 4; 0-2 keep f32 activations)",
}
"""What is known about ops ONNX Runtime's optimizer introduces, for the report."""


def ort_rewrites(
    model: onnx.ModelProto,
    level: str,
    *,
    kernel: bool = False,
    config: Mapping[str, str] | None = None,
    limit_bytes: int = 64 << 20,
    arrays: Mapping[str, np.ndarray] | None = None,
) -> list[str]:
    """The nodes ONNX Runtime's optimizer puts into ``model`` at ``level`` that ``model`` has no node of the
    same op for (fused ops such as MatMulNBits, QLinearConv), as ``"op 'name'"``; empty when none or when
    the model is over ``limit_bytes`` (the optimized model is written to a temporary file)."""
    if level == "off" or model.ByteSize() + sum(a.nbytes for a in (arrays or {}).values()) > limit_bytes:
        return []
    have = {(n.domain or "", n.op_type) for n in model.graph.node}
    with tempfile.TemporaryDirectory(prefix="odq-validate-") as tmp:
        so = session_options(level, config)
        so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        try:
            if kernel:
                _kernel_session(model, so, arrays)
            else:
                _plain_session(model, so, arrays, None)
            optimized = onnx.load(so.optimized_model_filepath, load_external_data=False)
        except Exception:  # noqa: BLE001 - a diagnosis only
            return []
    found = []
    for n in optimized.graph.node:
        if (n.domain or "", n.op_type) not in have and n.op_type != "Cast":
            found.append(f"{n.op_type} '{n.name}'")
    return found


def _prepare(
    model: onnx.ModelProto, expose: Mapping[str, np.dtype]
) -> tuple[onnx.ModelProto, dict[str, tuple[str, Any]], dict[str, tuple[str, Any]]]:
    """The model with ``expose`` added as outputs and carrier casts around bf16/4-bit inputs and outputs."""
    g = model.graph
    inits = {t.name for t in g.initializer}
    wrap_in = [vi for vi in g.input if vi.name not in inits and vi.type.tensor_type.elem_type in _CARRIER]
    outputs = [(o.name, int(o.type.tensor_type.elem_type)) for o in g.output]
    known = {n for n, _ in outputs}
    produced = {o for n in g.node for o in n.output}
    for name, dt in expose.items():
        if name not in known and name in produced:
            outputs.append((name, _np_to_onnx(dt)))
    needs_outputs = len(outputs) != len(g.output) or any(e in _CARRIER for _, e in outputs)
    if not wrap_in and not needs_outputs:
        return model, {}, {}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    in_map: dict[str, tuple[str, Any]] = {}
    out_map: dict[str, tuple[str, Any]] = {}
    casts = []
    for vi in g.input:
        elem = vi.type.tensor_type.elem_type
        if vi.name in inits or elem not in _CARRIER:
            continue
        carrier, np_carrier, _ = _CARRIER[elem]
        new = vi.name + _SUFFIX
        casts.append(helper.make_node("Cast", [new], [vi.name], to=elem, name=new))
        in_map[vi.name] = (new, np_carrier)
        vi.name = new
        vi.type.tensor_type.elem_type = carrier
    new_outputs = []
    for name, elem in outputs:
        if elem in _CARRIER:
            carrier, _, original = _CARRIER[elem]
            new = name + _SUFFIX
            casts.append(helper.make_node("Cast", [name], [new], to=carrier, name=new))
            out_map[new] = (name, original)
            new_outputs.append(helper.make_tensor_value_info(new, carrier, None))
        else:
            existing = [o for o in g.output if o.name == name]
            new_outputs.append(existing[0] if existing else helper.make_tensor_value_info(name, elem, None))
    del g.output[:]
    g.output.extend(new_outputs)
    nodes = list(g.node)
    del g.node[:]
    in_casts = [c for c in casts if c.input[0].endswith(_SUFFIX)]
    out_casts = [c for c in casts if not c.input[0].endswith(_SUFFIX)]
    g.node.extend(in_casts + nodes + out_casts)
    return m, in_map, out_map


def carrier_free(names: Iterable[str]) -> list[str]:
    """Names as the caller knows them (without the carrier suffix)."""
    return [n.removesuffix(_SUFFIX) for n in names]
