"""OpenVINO as a second runtime for validation (``validate(runtimes=("onnxruntime", "openvino"))``).

A model runs on OpenVINO's CPU device with ``INFERENCE_PRECISION_HINT`` set to f32 (level
``openvino-f32``) and, where the device's default hint differs (bf16 on CPUs with AVX512-BF16), with
its default too (level ``openvino-default``). Inputs are shared with OpenVINO, not copied
(``share_inputs``); bf16 and 4-bit graph inputs and outputs are carried as f32/int8/uint8 and cast
inside the graph, as for ONNX Runtime. OpenVINO is an optional extra: ``pip install 'onnx-dequant[openvino]'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from .carriers import with_carriers
from .loading import serialized

__all__ = ["OPENVINO_LEVELS", "OpenVinoMissing", "OpenVinoRunner", "default_hint", "openvino_levels"]

OPENVINO_LEVELS = ("openvino-f32", "openvino-default")
"""The OpenVINO paths: the f32 precision hint, and the device's default hint (when it is not f32)."""

_DEVICE = "CPU"


class OpenVinoMissing(Exception):
    """OpenVINO is not installed or has no CPU device here (the reason is the message)."""


def _core() -> Any:
    try:
        import openvino as ov
    except ImportError as e:
        raise OpenVinoMissing(f"OpenVINO is not installed (pip install 'onnx-dequant[openvino]'): {e}") from None
    return ov.Core()


def default_hint() -> str:
    """The CPU device's default ``INFERENCE_PRECISION_HINT`` (``"f32"``, ``"bf16"``, ...)."""
    hint = _core().get_property(_DEVICE, "INFERENCE_PRECISION_HINT")
    return str(hint.get_type_name() if hasattr(hint, "get_type_name") else hint)


def openvino_levels() -> list[str]:
    """The OpenVINO levels to run here: ``openvino-f32``, and ``openvino-default`` when its hint differs."""
    return ["openvino-f32"] + (["openvino-default"] if default_hint() not in ("f32", "float32") else [])


def _materialized(model: onnx.ModelProto, arrays: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """``model`` with validation's in-memory placeholders (``weights.externalize``) holding their data
    again: OpenVINO reads a model from bytes, and constant weights must stay constants to it."""
    if not arrays:
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in t.external_data if e.key == "location"), "")
        if location in arrays:
            t.raw_data = np.ascontiguousarray(arrays[location]).tobytes()
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
    return m


def _graph_name(names: set[str], values: Any) -> str:
    """The name among an OpenVINO tensor's ``names`` that the graph declares in ``values``."""
    declared = [v.name for v in values if v.name in names]
    return declared[0] if declared else sorted(names)[0]


class OpenVinoRunner:
    """OpenVINO (CPU) on ``model`` at ``level`` (of ``OPENVINO_LEVELS``); ``run`` as ``OrtRunner.run``."""

    def __init__(self, model: onnx.ModelProto, level: str, *, arrays: Mapping[str, np.ndarray] | None = None):
        core = _core()
        prepared, self._in_map, self._out_map = with_carriers(_materialized(model, arrays or {}), {})
        data = serialized(prepared)
        if data is None:
            raise OpenVinoMissing("the model is over 2 GB: OpenVINO reads it from bytes here")
        config = {"INFERENCE_PRECISION_HINT": "f32"} if level == "openvino-f32" else {}
        self.compiled = core.compile_model(core.read_model(data, b""), _DEVICE, config)
        self.request = self.compiled.create_infer_request()
        # an OpenVINO tensor carries every name it had (a Cast's output may also be its input's): take
        # the graph's own output and input names
        self.output_names = [_graph_name(o.get_names(), prepared.graph.output) for o in self.compiled.outputs]
        self.input_names = [_graph_name(i.get_names(), prepared.graph.input) for i in self.compiled.inputs]

    def run(self, feeds: Mapping[str, np.ndarray], buffers: Any = None) -> dict[str, np.ndarray]:
        """Every graph output by its original name and type (copied out of OpenVINO's buffers)."""
        fed = {}
        for name, value in feeds.items():
            carrier = self._in_map.get(name)
            if carrier is not None:
                fed[carrier[0]] = value.astype(carrier[1])
            else:
                fed[name] = np.require(value, requirements="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        import openvino as ov

        for i, name in enumerate(self.input_names):
            value = fed[name]
            self.request.set_input_tensor(i, ov.Tensor(value, shared_memory=True))  # shared, not copied
        self.request.infer()
        out = {}
        for name, tensor in zip(self.output_names, self.request.output_tensors):
            value = np.array(tensor.data, copy=True)
            back = self._out_map.get(name)
            if back is not None:
                out[back[0]] = value.astype(back[1])
            else:
                out[name] = value
        return out
