"""The ONNX graph under construction: nodes, initializers, unique tensor names, and each tensor's type.

Converters add nodes through ``OpContext`` (``context.py``); this module owns the ``GraphProto``, the
names already taken, small shared constants (deduplicated) and the ``TensorType`` of every tensor.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import dtypes
from ..contract import TensorType

__all__ = ["Builder", "tensor_type"]

_LITTLE = sys.byteorder == "little"
tensor_type = partial(tuple.__new__, TensorType)
"""``tensor_type((elem_type, shape))``: a ``TensorType`` without the Python-level ``__new__`` (hot paths)."""


class Builder:
    """Accumulates one ONNX graph."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.model = onnx.ModelProto()
        self.graph = self.model.graph
        self.types: dict[str, TensorType] = {}
        self.used: set[str] = set()
        self._consts: dict[tuple[Any, ...], str] = {}
        self.uses_custom_domain = False
        self.small_consts: dict[Any, str] = {}
        """Names of small constants by their Python value (a faster path to ``const``'s sharing)."""
        self.convert_function: Callable[[Any], onnx.ModelProto] | None = None
        """Set by the importer: converts a nested function (a TensorIterator's body) as it converts the graph."""
        self.claims: dict[tuple[str, int], str] = {}
        """``(op name, output index)`` -> the name of the Result that output writes into."""
        self.values: dict[str, np.ndarray] = {}
        """Every initializer's value by name (the arrays themselves, not copies): axes, shapes and indices
        that ops read as attributes, and the scales and weights the quantized ops fold."""
        self.folded: set[str] = set()
        """Initializers a converter read the value of (``OpContext.value``): dropped at the end if no node uses them."""

    # ---- names ----

    def reserve(self, name: str) -> str:
        """``name`` itself if free, else ``name__1``, ``name__2``...; the result is taken."""
        if name not in self.used:
            self.used.add(name)
            return name
        k = 1
        while f"{name}__{k}" in self.used:
            k += 1
        name = f"{name}__{k}"
        self.used.add(name)
        return name

    # ---- nodes and tensors ----

    def node(
        self,
        op_type: str,
        inputs: Sequence[str],
        outputs: Sequence[str],
        name: str,
        attrs: dict[str, Any] | None = None,
        domain: str = "",
    ) -> onnx.NodeProto:
        n = self.graph.node.add()
        n.op_type = op_type
        n.name = name
        n.input.extend(inputs)
        n.output.extend(outputs)
        if domain:
            n.domain = domain
        if attrs:
            for k, v in attrs.items():
                n.attribute.append(helper.make_attribute(k, v))
        return n

    def append(self, node: onnx.NodeProto) -> None:
        self.graph.node.append(node)

    def initializer(self, name: str, array: np.ndarray, dt: dtypes.DType | None = None) -> TensorType:
        """Add ``array`` as an initializer called ``name`` (taken by the caller); returns its type."""
        dt = dt or dtypes.parse(array.dtype)
        shape = array.shape
        if dt.bits < 8 or not _LITTLE:  # packed 4-bit types, or a big-endian host: onnx's own conversion
            self.graph.initializer.append(numpy_helper.from_array(np.require(array, requirements="C"), name))
        else:
            t = self.graph.initializer.add()
            t.name = name
            t.data_type = dt.onnx
            t.dims.extend(shape)
            t.raw_data = array.tobytes()
        self.values[name] = array
        t = self.types[name] = tensor_type((dt, shape))
        return t

    def const(self, value: Any, dtype: Any, hint: str = "const") -> str:
        """A small constant initializer (shared between nodes when equal); returns its name."""
        arr = np.asarray(value, dtype=dtypes.parse(dtype).numpy)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        found = self._consts.get(key)
        if found is not None:
            return found
        name = self.reserve(hint)
        self.initializer(name, arr)
        self._consts[key] = name
        return name

    def drop_unused_folded(self) -> None:
        """Remove the folded initializers that no node and no graph output uses any more."""
        if not self.folded:
            return
        used = {o.name for o in self.graph.output}
        for n in self.graph.node:
            used.update(n.input)
        gone = self.folded - used
        if gone:
            keep = [t for t in self.graph.initializer if t.name not in gone]
            del self.graph.initializer[:]
            self.graph.initializer.extend(keep)

    def add_input(self, name: str, t: TensorType) -> None:
        self.graph.input.append(_value_info(name, t))
        self.types[name] = t

    def add_output(self, name: str) -> None:
        self.graph.output.append(_value_info(name, self.types[name]))


def _value_info(name: str, t: TensorType) -> onnx.ValueInfoProto:
    shape = None if t.shape is None else list(t.shape)
    return helper.make_tensor_value_info(name, dtypes.parse(t.elem_type).onnx, shape)
