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

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

from ..errors import DequantizeError
from ..schema import is_dequantize

__all__ = ["Skip", "LEVELS", "ReferenceRunner", "OrtRunner", "has_dequantize", "session_options"]

LEVELS = ("default", "off")
"""ONNX Runtime optimization levels validation runs: its default (ORT_ENABLE_ALL) and none."""

_CARRIER = {  # types ORT's Python API cannot exchange with NumPy -> the type to carry them in
    TensorProto.BFLOAT16: (TensorProto.FLOAT, np.float32, ml_dtypes.bfloat16),
    TensorProto.INT4: (TensorProto.INT8, np.int8, ml_dtypes.int4),
    TensorProto.UINT4: (TensorProto.UINT8, np.uint8, ml_dtypes.uint4),
}
_SUFFIX = "__odq_validate"


class Skip(Exception):
    """A path that cannot run here (a missing component, a type it cannot carry); the reason is the message."""


def has_dequantize(model: onnx.ModelProto) -> bool:
    """Whether the model holds our op anywhere: main graph, subgraphs or model-local functions."""

    def graph_has(g: onnx.GraphProto) -> bool:
        for n in g.node:
            if is_dequantize(n):
                return True
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH and graph_has(a.g):
                    return True
                if a.type == onnx.AttributeProto.GRAPHS and any(graph_has(s) for s in a.graphs):
                    return True
        return False

    return graph_has(model.graph) or any(is_dequantize(n) for f in model.functions for n in f.node)


def _np_to_onnx(dt: np.dtype) -> int:
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dt)))


class ReferenceRunner:
    """The oracle: ``onnx.reference.ReferenceEvaluator`` with our op's reference kernel."""

    def __init__(self, model: onnx.ModelProto) -> None:
        from onnx.reference import ReferenceEvaluator

        from ..reference import DequantizeOp

        try:
            self.evaluator = ReferenceEvaluator(model, new_ops=[DequantizeOp])
        except DequantizeError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure here means the oracle cannot run the model
            raise DequantizeError(f"the reference evaluator cannot load the model: {type(e).__name__}: {e}") from None
        self.output_names = list(self.evaluator.output_names)

    def run(self, feeds: Mapping[str, np.ndarray], *, intermediate: bool = False) -> dict[str, Any]:
        """Graph outputs by name, or with ``intermediate`` every tensor the graph computes or takes in."""
        try:
            if intermediate:
                res = self.evaluator.run(None, dict(feeds), intermediate=True)
                return {k: v for k, v in res.items() if k}
            values = self.evaluator.run(None, dict(feeds))
        except DequantizeError as e:
            raise DequantizeError(f"the reference cannot run the model on these inputs: {e}") from None
        except Exception as e:  # noqa: BLE001
            raise DequantizeError(
                f"the reference cannot run the model on these inputs: {type(e).__name__}: {e}"
            ) from None
        return dict(zip(self.output_names, values))


def session_options(level: str) -> Any:
    """ORT session options for an optimization level of ``LEVELS``; quiet, and without the memory arena
    (it would keep each session's peak allocation alive until the session goes)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "default": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }[level]
    so.enable_cpu_mem_arena = False
    so.log_severity_level = 3
    return so


def _kernel_session(model: onnx.ModelProto, level: str) -> Any:
    try:
        from .. import ort as odq_ort
    except ImportError as e:
        raise Skip(f"the Python kernel (onnx_dequant.ort) is not available: {e}") from None
    make = getattr(odq_ort, "session", None)
    if make is None:
        raise Skip("the Python kernel (onnx_dequant.ort.session) is not available")
    return make(model, sess_options=session_options(level))


class OrtRunner:
    """ONNX Runtime on ``model`` at ``level``; ``kernel`` runs our op through ``onnx_dequant.session``.

    ``expose`` names intermediate tensors to return as well, with their NumPy dtypes.
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        level: str,
        *,
        kernel: bool = False,
        expose: Mapping[str, np.dtype] | None = None,
    ) -> None:
        self.level = level
        self.kernel = kernel
        model, self._in_map, self._out_map = _prepare(model, expose or {})
        self.session = self._create(model)
        self.output_names = [o.name for o in self.session.get_outputs()]

    def _create(self, model: onnx.ModelProto) -> Any:
        if self.kernel:
            return _kernel_session(model, self.level)
        import onnxruntime as ort

        so = session_options(self.level)
        if model.ByteSize() < 2**31 - 2**20:
            return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        with tempfile.TemporaryDirectory(prefix="odq-validate-") as tmp:  # over 2 GB: weights in a side file
            path = os.path.join(tmp, "model.onnx")
            onnx.save(model, path, save_as_external_data=True, location="model.data")
            return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every output (graph outputs and exposed tensors) by its original name and type."""
        wanted = {i.name for i in self.session.get_inputs()}
        fed = {}
        for name, value in feeds.items():
            carrier = self._in_map.get(name)
            if carrier is not None:
                fed[carrier[0]] = value.astype(carrier[1])
            elif name in wanted:
                fed[name] = value
        values = self.session.run(self.output_names, fed)
        out = {}
        for name, value in zip(self.output_names, values):
            back = self._out_map.get(name)
            if back is not None:
                out[back[0]] = np.asarray(value).astype(back[1])
            else:
                out[name] = value
        return out


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
    return [n[: -len(_SUFFIX)] if n.endswith(_SUFFIX) else n for n in names]
