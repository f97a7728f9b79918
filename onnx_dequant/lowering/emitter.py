"""Where a strategy writes the nodes that replace one Dequantize node: the ``Emitter``, which hands out
fresh names and puts constants where the graph or function body can read them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..graphs import FreshNames

__all__ = ["Emitter", "SHARED_OPS"]

SHARED_OPS = frozenset({"Shape", "Slice", "Concat", "ReduceProd"})
"""Shape arithmetic an emitter computes once: a second node of the same op, inputs and attributes (the
scale's view and the zero point's, each reading the input's dims) reads the first one's output."""


class Emitter:
    """Collects the nodes and constants that replace one node, with fresh names.

    In a graph constants become initializers; in a function body (``function=True``) Constant nodes.
    """

    def __init__(
        self,
        prefix: str,
        names: FreshNames,
        *,
        function: bool = False,
        constants: dict[str, TensorProto] | None = None,
    ) -> None:
        self.prefix = prefix
        self.constants = constants or {}  # constant tensors visible here, by name
        self.names = names
        self.function = function
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._shared: dict[tuple, str] = {}  # (op, inputs, attributes) or an int64 constant's values -> output

    def child(self, prefix: str) -> Emitter:
        """An emitter for a subgraph's nodes: the same names and constants; its initializers go into
        this emitter's graph (a subgraph reads them from the outer scope)."""
        sub = Emitter(prefix, self.names, function=self.function, constants=self.constants)
        sub.initializers = self.initializers
        return sub

    def fresh(self, hint: str) -> str:
        """A name no value or node of the model has, made from the prefix and ``hint``."""
        return self.names.fresh(f"{self.prefix}__{hint}")

    def node(self, op: str, inputs: Sequence[str], output: str | None = None, *, hint: str = "", **attrs: Any) -> str:
        """Append an ``op`` node reading ``inputs``; returns its output (``output``, or a fresh name; for one of
        ``SHARED_OPS`` already appended the same, that one's)."""
        key = (op, tuple(inputs), tuple(sorted((k, repr(v)) for k, v in attrs.items())))
        if output is None and op in SHARED_OPS and key in self._shared:
            return self._shared[key]
        out = output or self.fresh(hint or op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=self.fresh(op), **attrs))
        if output is None and op in SHARED_OPS:
            self._shared[key] = out
        return out

    def const(self, value: Any, dtype: Any = None, hint: str = "c") -> str:
        """A constant holding ``value`` (as NumPy ``dtype`` when given), which ``redim`` can reshape; returns
        its name."""
        t = numpy_helper.from_array(np.asarray(value, dtype=dtype), self.fresh(hint))
        self.constants[t.name] = t
        return self._add(t)

    def constant_output(self, value: np.ndarray, name: str) -> str:
        """``value`` as the constant ``name`` (the node's output: no fresh name)."""
        return self._add(numpy_helper.from_array(np.asarray(value), name))

    def _add(self, tensor: TensorProto) -> str:
        """``tensor`` as a constant: an initializer, or a Constant node in a function body."""
        if self.function:
            self.nodes.append(helper.make_node("Constant", [], [tensor.name], name=self.fresh("const"), value=tensor))
        else:
            self.initializers.append(tensor)
        return tensor.name

    def redim(self, name: str, dims: Sequence[int], hint: str) -> str | None:
        """A new constant with ``name``'s data and ``dims`` (a reshape done on the model, not at run time);
        None when ``name`` is not a constant. External data is shared, not copied."""
        t = self.constants.get(name)
        if t is None:
            return None
        copy = TensorProto()
        copy.CopyFrom(t)
        del copy.dims[:]
        copy.dims.extend(int(d) for d in dims)
        copy.name = self.fresh(hint)
        self.constants[copy.name] = copy
        return self._add(copy)

    def i64(self, values: Sequence[int], hint: str = "shape") -> str:
        """An int64 1-D constant (a shape, axes), one per values."""
        key = ("i64", tuple(int(v) for v in values))
        if key not in self._shared:
            self._shared[key] = self.const(list(values), np.int64, hint)
        return self._shared[key]
