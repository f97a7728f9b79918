"""What every lowering strategy sees (``NodeInfo``), what it writes into (``Emitter``), and its shape.

A strategy is one small class: ``name``, a docstring that states the form it emits in one line,
``check(info)`` returning None when it applies or the reason it refuses, ``cost(info)`` (bytes moved,
the planner's measure) and ``emit(info, em)`` that appends nodes computing ``info.output``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ... import dtypes
from ...contract import Dim
from ...dtypes import DType

__all__ = ["NodeInfo", "Emitter", "Strategy", "UNKNOWN_DIM", "DQL_TYPE", "dql_reason", "PROPAGATING_OPS"]

UNKNOWN_DIM = 256
"""The size the cost model assumes for a dimension it does not know."""

PROPAGATING_OPS = frozenset(
    {
        "Reshape",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Slice",
        "MaxPool",
        "Flatten",
        "Gather",
        "Split",
        "Expand",
        "Resize",
        "Concat",
        "Tile",
        "DepthToSpace",
        "SpaceToDepth",
        "Pad",
        "AveragePool",
        "Identity",
    }
)
"""Ops through which ORT's QDQ propagation moves a DequantizeLinear (the ORT 1.32 bug in docs/ort-facts.md)."""


@dataclass
class NodeInfo:
    """One Dequantize node and all the facts a strategy needs, checked against the contract."""

    node: onnx.NodeProto
    x: str
    scale: str
    zero_point: str | None  # None: no zero point (zero)
    output: str
    axes: tuple[int, ...]
    in_type: DType
    out_type: DType
    shape: tuple[Dim, ...] | None  # the input's shape (None: unknown rank)
    opset: int
    target: str  # "ort" | "portable" | "openvino"
    graph_output: bool = False  # the node's output is an output of its graph
    model_output: bool = False  # ... and that graph is the model's main graph
    weight: bool = False  # x is a constant and the output feeds MatMul/Gemm/Conv
    consumers: tuple[str, ...] = ()  # op types reading the output
    zp_zero: bool = False  # the zero point is a constant known to be all zeros
    scale_const: bool = False
    zp_const: bool = False
    int32_wrap: bool = False  # the user accepts ORT's int32 semantics (wrapping subtraction)
    fold: bool = False  # weights="float" and x is a constant: fold it to a float constant
    read: Callable[[str], np.ndarray | None] | None = None  # a constant's value by name (None: unreadable)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def static(self) -> bool:
        """Whether every input dimension is a known int."""
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def size(self, dims: Sequence[Dim] | None = None) -> int:
        """Elements in ``dims`` (default: the input), unknown dims counted as ``UNKNOWN_DIM``."""
        dims = self.shape if dims is None else dims
        if dims is None:
            return UNKNOWN_DIM**2
        n = 1
        for d in dims:
            n *= d if isinstance(d, int) else UNKNOWN_DIM
        return n

    @property
    def has_zp(self) -> bool:
        return self.zero_point is not None and not self.zp_zero

    @property
    def scale_size(self) -> int:
        return self.size([self.shape[a] for a in self.axes]) if self.shape is not None else 1

    @property
    def name(self) -> str:
        return self.node.name or self.output


DQL_TYPE = dtypes.parse("f32")
"""The scale/output type of every DequantizeLinear the lowering emits: f16 and bf16 outputs go through an
f32 DequantizeLinear and a Cast (exact for 8-bit inputs; ORT's f16 kernel is 6-10x slower, it has no bf16
kernel, and every opset and runtime reads f32)."""


def dql_reason(info: NodeInfo) -> str | None:
    """Why no DequantizeLinear computes ``info`` exactly (at its opset, in ORT 1.32), or None."""
    q = info.in_type
    if info.out_type.name == "f64":
        return "DequantizeLinear has no f64 scale or output"
    if q.name == "i32" and not info.int32_wrap:
        return "DequantizeLinear subtracts i32 in int32 (wraps) and rounds twice"
    if q.name in ("i16", "u16", "i4", "u4") and info.opset < 21:
        return f"DequantizeLinear-{info.opset} has no {q.name} input (needs opset 21)"
    if info.opset > 27:
        return "ORT has no DequantizeLinear-28 kernel"
    return openvino_reason(info)


def openvino_reason(info: NodeInfo, *, work: DType | None = None) -> str | None:
    """Why OpenVINO (2026.4, CPU) does not compute a Subtract-then-Multiply form of ``info`` exactly
    (``work``: the form's float type), or None; always None for the other targets."""
    if info.target != "openvino":
        return None
    if work is not None and work.name == "f64":
        return "OpenVINO's CPU computes f64 in f32"
    if info.has_zp and info.zp_const and info.scale_const:
        return "OpenVINO folds a constant zero point and scale into fma(x, s, -zp*s) (not exact)"
    return None


class Emitter:
    """Collects the nodes and constants that replace one node, with fresh names.

    In a graph constants become initializers; in a function body (``function=True``) Constant nodes.
    """

    def __init__(
        self, prefix: str, names: set[str], *, function: bool = False, constants: dict[str, TensorProto] | None = None
    ) -> None:
        self.prefix = prefix
        self.constants = constants or {}  # constant tensors visible here, by name
        self._names = names  # every name in use in the model; fresh names are added to it
        self.function = function
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []

    def child(self, prefix: str) -> Emitter:
        """An emitter for a subgraph's nodes: the same names and constants; its initializers go into
        this emitter's graph (a subgraph reads them from the outer scope)."""
        sub = Emitter(prefix, self._names, function=self.function, constants=self.constants)
        sub.initializers = self.initializers
        return sub

    def fresh(self, hint: str) -> str:
        base = f"{self.prefix}__{hint}"
        name, k = base, 1
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    def node(self, op: str, inputs: Sequence[str], output: str | None = None, *, hint: str = "", **attrs: Any) -> str:
        out = output or self.fresh(hint or op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=self.fresh(op), **attrs))
        return out

    def const(self, value: Any, hint: str = "c", dtype: Any = None) -> str:
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        return self._add(numpy_helper.from_array(arr, name))

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
        return self._add(copy)

    def i64(self, values: Sequence[int], hint: str = "shape") -> str:
        return self.const(np.array(list(values), dtype=np.int64), hint)


class Strategy:
    """A lowering form. Subclasses set ``name`` and implement ``check``, ``cost`` and ``emit``."""

    name = "strategy"
    portable = True  # usable with target "portable"
    plain = False  # the plain DequantizeLinear that ORT's MatMul/Conv fusions read

    def check(self, info: NodeInfo) -> str | None:
        """None when the strategy lowers ``info`` exactly, else why it does not."""
        raise NotImplementedError

    def cost(self, info: NodeInfo) -> float:
        """Bytes the lowered form moves at run time (the planner's measure; lower is better)."""
        raise NotImplementedError

    def emit(self, info: NodeInfo, em: Emitter) -> None:
        """Append nodes to ``em`` that compute ``info.output`` from the node's inputs."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.name}>"
