"""Weights held once: large initializers taken out of a model as arrays (``externalize``), and handed
to ONNX Runtime as OrtValues over that memory (``in_memory``) or to the reference as inputs
(``placeholders_as_inputs``), so no copy of a model serializes, parses or duplicates them."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .. import dtypes
from ..errors import DequantizeError
from ..graphs import LARGE_BYTES, iter_nodes
from ..schema import is_dequantize

__all__ = ["ORT_NUMPY", "externalize", "in_memory", "placeholders_as_inputs"]

_MEMORY = "odq-validate-memory-"
"""Location prefix of the placeholders ``externalize`` puts in place of large initializers."""


ORT_NUMPY = {
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
        np_type = ORT_NUMPY.get(t.data_type)
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
    with_placeholders = _copy_fields(model, onnx.ModelProto(), skip="graph")
    graph = _copy_fields(g, with_placeholders.graph, skip="initializer")
    for i, t in enumerate(g.initializer):
        if i not in data:
            graph.initializer.append(t)
            continue
        location = f"{_MEMORY}{len(arrays)}"
        arrays[location] = data[i]
        p = graph.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims, doc_string=t.doc_string)
        p.data_location = onnx.TensorProto.EXTERNAL
        p.external_data.add(key="location", value=location)
    return with_placeholders, arrays


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
        if int(np.prod(dims, dtype=np.int64)) != data.size or ORT_NUMPY.get(t.data_type) != data.dtype:
            raise DequantizeError(f"initializer '{t.name}' no longer fits the data it was taken from")
        names.append(t.name)
        if values:
            import onnxruntime as ort

            found.append(ort.OrtValue.ortvalue_from_numpy(data.reshape(dims)))
    return names, found


def placeholders_as_inputs(
    model: onnx.ModelProto, arrays: Mapping[str, np.ndarray]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """``model`` with its in-memory placeholders declared as graph inputs instead, and their data by name."""
    names, _ = in_memory(model, arrays, values=False)
    if not names:
        return model, {}
    as_inputs = _copy_fields(model, onnx.ModelProto(), skip="graph")
    graph = _copy_fields(model.graph, as_inputs.graph, skip="initializer")
    declared = {vi.name for vi in graph.input}
    constants = {}
    for t in model.graph.initializer:
        if t.name not in names:
            graph.initializer.append(t)
            continue
        location = next(e.value for e in t.external_data if e.key == "location")
        constants[t.name] = arrays[location].reshape(tuple(int(d) for d in t.dims))
        if t.name not in declared:
            graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return as_inputs, constants
