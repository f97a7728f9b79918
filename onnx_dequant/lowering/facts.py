"""Gathering a node's facts: the types of every value (stated, inferred, and inside function bodies
from their call sites), the constants a scope sees, and for one Dequantize node the ``NodeInfo`` that
every strategy reads, checked against the contract."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from .. import dtypes, modelio
from ..contract import Dim, Shape, TensorType
from ..dtypes import DType
from ..errors import DequantizeError
from ..graphs import constants, value_types, without_large_initializers
from ..schema import check_node, node_attributes, tensor_type_of
from .options import LowerOptions

__all__ = [
    "NodeInfo",
    "UNKNOWN_DIM",
    "FUSING_OPS",
    "Reads",
    "Constants",
    "model_types",
    "function_types",
    "function_as_model",
    "gather",
]

UNKNOWN_DIM = 256
"""The size the cost model assumes for a dimension it does not know (``NodeInfo.row_dim`` and ``lead_dim``
may say otherwise: ``row_switch.py`` prices forms at other sizes)."""

FUSING_OPS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose"})
"""Ops ORT fuses a DequantizeLinear of a constant weight into (MatMulNBits, QLinearConv, ...)."""


@dataclass(frozen=True)
class Reads:
    """How ONNX Runtime's optimized graph reads a value, its no-ops removed (``walk.Scope.reads``):
    ``edges``, the input slots of nodes of the value's own graph reading it; ``outside``, whether the
    graph's output or a nested graph reads it too; ``fusing``, whether a DequantizeLinear computing it may
    join one of ORT's QDQ node units (a QuantizeLinear after a reader, or ArgMax, MatMul, Gemm reading
    it), or readers ORT may inline are not seen."""

    edges: int = 1
    outside: bool = False
    fusing: bool = False

    @property
    def dql_runs(self) -> int:
        """How many times ORT 1.32 runs a DequantizeLinear computing the value: it gives each edge its own
        copy (its ``EnsureUniqueDQForNodeUnit``), keeping the original too where something outside reads it."""
        if self.edges == 0 or (self.edges == 1 and not self.outside):
            return 1
        return self.edges + int(self.outside)


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
    fusable_weight: bool = False  # x is a constant and the output feeds one of FUSING_OPS
    consumers: tuple[str, ...] = ()  # op types reading the output
    reads: Reads = Reads()  # how ORT's optimized graph reads the output
    zp_zero: bool = False  # the zero point is a constant known to be all zeros
    x_const: bool = False
    scale_const: bool = False
    zp_const: bool = False
    fold: bool = False  # weights="float" and x is a constant: fold it to a float constant
    read: Callable[[str], np.ndarray | None] | None = None  # a constant's value by name (None: unreadable)
    int32_wrap: bool = False  # the user accepts ORT's int32 semantics (wrapping subtraction)
    fed: frozenset[str] = frozenset()  # the node's inputs that are the main graph's inputs (no pass folds them)
    whole_size: int | None = None  # a Scan's row: the elements of the input it is a row of (None: not a row)
    row_dim: int = UNKNOWN_DIM  # the size the cost model assumes for unknown dims in ``row_axes``
    lead_dim: int = UNKNOWN_DIM  # ... and for the other unknown dims
    keep_view: bool = False  # the output may stay in the form's view of the input (the caller reshapes it)
    keep_f32: bool = False  # a DequantizeLinear form's f16/bf16 output may stay f32 (the caller casts it)

    @property
    def row_axes(self) -> tuple[int, ...]:
        """The input's axes of a size known only at run time after its first quantization axis: those in
        the rows the kernels walk (an unknown rank or no axes: none)."""
        if self.shape is None or not self.axes:
            return ()
        return tuple(a for a in range(min(self.axes) + 1, len(self.shape)) if not isinstance(self.shape[a], int))

    def dim_size(self, axis: int) -> int:
        """The input's size along ``axis``: known, or as the cost model assumes it (``row_dim`` in a row,
        else ``lead_dim``)."""
        d = self.shape[axis] if self.shape is not None else None
        if isinstance(d, int):
            return d
        return self.row_dim if axis in self.row_axes else self.lead_dim

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def known_shape(self) -> tuple[int, ...] | None:
        """The input's shape when every dimension is a known int, else None."""
        if self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        return tuple(int(d) for d in self.shape if d is not None)

    def size(self, axes: Sequence[int] | None = None) -> int:
        """Elements along ``axes`` of the input (default: all), unknown dims counted as ``dim_size`` does."""
        if self.shape is None:
            return UNKNOWN_DIM**2 if axes is None else UNKNOWN_DIM ** len(axes)
        n = 1
        for a in range(len(self.shape)) if axes is None else axes:
            n *= self.dim_size(a)
        return n

    @property
    def params_fed(self) -> bool:
        """The scale or the zero point is fed at run time: ORT never folds them into constants."""
        return self.scale in self.fed or (self.zero_point is not None and self.zero_point in self.fed)

    @property
    def has_zp(self) -> bool:
        return self.zero_point is not None and not self.zp_zero

    @property
    def scale_size(self) -> int:
        return self.size(self.axes) if self.shape is not None else 1

    @property
    def name(self) -> str:
        return self.node.name or self.output


class Constants:
    """Constant tensors visible in a graph (initializers of it and enclosing graphs, Constant nodes)."""

    def __init__(self, base_dir: str | None, tensors: dict[str, TensorProto] | None = None) -> None:
        self.base_dir = base_dir  # the model's folder, for reading small external constants
        self.tensors: dict[str, TensorProto] = dict(tensors or {})

    def scope(self, graph: Any) -> Constants:
        """What ``graph`` (nested in this scope) sees: these constants and its own, less the names it takes
        as inputs (an initializer that is also a graph input is a default the caller may override, and a
        subgraph's input hides an outer constant of its name)."""
        inner = Constants(self.base_dir, self.tensors)
        inner.tensors.update(constants(graph))
        for i in getattr(graph, "input", ()):
            inner.tensors.pop(i.name if hasattr(i, "name") else i, None)  # FunctionProto inputs are names
        return inner

    def is_const(self, name: str | None) -> bool:
        return bool(name) and name in self.tensors

    def value(self, name: str | None, max_bytes: int = 1 << 20) -> np.ndarray | None:
        """The tensor's value if it is a constant of at most ``max_bytes`` that can be read; else None."""
        t = self.tensors.get(name or "")
        if t is None:
            return None
        try:
            if t.data_location == TensorProto.EXTERNAL:
                info = modelio.external_info(t)
                if self.base_dir is None or int(info.get("length", max_bytes + 1)) > max_bytes:
                    return None
                return modelio.read_external(t, self.base_dir)
            return numpy_helper.to_array(t)
        except Exception:  # noqa: BLE001 - unreadable constants are treated as unknown
            return None


def _infer(model: ModelProto) -> ModelProto:
    """Shape inference on the model without its big tensors' data."""
    try:
        return onnx.shape_inference.infer_shapes(without_large_initializers(model), check_type=False, strict_mode=False)
    except Exception:  # noqa: BLE001 - inference is best effort; the types we have still count
        return model


def model_types(model: ModelProto) -> dict[str, TensorType]:
    """Every value's type in the main graph and its subgraphs: stated, then inferred."""
    types: dict[str, TensorType] = {}
    value_types(model.graph, types)
    value_types(_infer(model).graph, types)
    return types


def function_as_model(
    fn: onnx.FunctionProto, inputs: list[onnx.ValueInfoProto] | None = None, model: ModelProto | None = None
) -> ModelProto:
    """A function body as a model, for ONNX's passes: ``inputs`` (default: the formal inputs, untyped),
    the function's opsets, and ``model``'s functions and IR version when given."""
    if inputs is None:
        inputs = [helper.make_value_info(i, onnx.TypeProto()) for i in fn.input]
    outputs = [helper.make_value_info(o, onnx.TypeProto()) for o in fn.output]
    g = helper.make_graph(list(fn.node), "body", inputs, outputs)
    if model is None:
        return helper.make_model(g, opset_imports=list(fn.opset_import))
    m = helper.make_model(
        g, opset_imports=list(fn.opset_import) or list(model.opset_import), functions=list(model.functions)
    )
    m.ir_version = model.ir_version
    return m


def _common_shape(a: Shape, b: Shape) -> Shape:
    """The dims two shapes agree on (the others unknown); None when the ranks differ or one is unknown."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def function_types(
    model: ModelProto, fn: onnx.FunctionProto, outer: dict[str, TensorType], calls: Sequence[Sequence[str]]
) -> dict:
    """Types inside a function body, inferred from what every call site (``calls``: their inputs) gives
    its inputs: the element type they agree on (a ``DequantizeError`` when they differ) and the dims they
    agree on, so one body serves every call."""
    formal: dict[str, TensorType] = {}
    for call in calls:
        for name, actual in zip(fn.input, call):
            t = outer.get(actual, TensorType(None, None))
            old = formal.get(name)
            if old is None:
                formal[name] = t
                continue
            if old.elem_type is not None and t.elem_type is not None and old.elem_type is not t.elem_type:
                raise DequantizeError(
                    f"Function '{fn.name}' is called with input '{name}' of types {old.elem_type.name} and "
                    f"{t.elem_type.name}: one lowered body cannot serve both"
                )
            formal[name] = TensorType(old.elem_type or t.elem_type, _common_shape(old.shape, t.shape))
    types = {vi.name: tensor_type_of(vi.type) for vi in getattr(fn, "value_info", [])}
    ins = [
        helper.make_tensor_value_info(n, t.elem_type.onnx, None if t.shape is None else list(t.shape))
        for n, t in formal.items()
        if t.elem_type is not None
    ]
    m = function_as_model(fn, ins, model)
    value_types(m.graph, types)
    try:
        value_types(onnx.shape_inference.infer_shapes(m, strict_mode=False).graph, types)
    except Exception:  # noqa: BLE001 - inference is best effort; the types we have still count
        pass
    return types


def gather(
    node: NodeProto,
    *,
    types: dict[str, TensorType],
    consts: Constants,
    consumers: Sequence[str],
    reads: Reads = Reads(),
    fed: set[str] | frozenset[str] = frozenset(),
    graph_output: bool,
    main_graph: bool,
    options: LowerOptions,
    opset: int,
) -> NodeInfo:
    """The facts about ``node`` (a ``DequantizeError`` naming it and the rule when it breaks the contract):
    ``consumers`` are the op types reading its output, ``reads`` how ORT's optimized graph reads it, ``fed``
    the model's own inputs (the main graph's),
    ``graph_output`` whether its graph returns it,
    ``main_graph`` whether that graph is the model's."""
    in_type, out = check_node(node, types)
    x, scale = node.input[0], node.input[1]
    zp = node.input[2] if len(node.input) > 2 and node.input[2] else None
    axes, _ = node_attributes(node)
    zp_zero = False
    if zp is not None:
        v = consts.value(zp)
        zp_zero = v is not None and not np.any(v.astype(np.int64) if v.dtype.kind in "iub" else v != 0)
    return NodeInfo(
        node=node,
        x=x,
        scale=scale,
        zero_point=zp,
        output=node.output[0],
        axes=axes,
        in_type=in_type,
        out_type=dtypes.parse(out.elem_type),
        shape=out.shape,
        opset=opset,
        target=options.target,
        graph_output=graph_output,
        model_output=main_graph and graph_output,
        fusable_weight=consts.is_const(x) and any(c in FUSING_OPS for c in consumers),
        consumers=tuple(consumers),
        reads=reads,
        zp_zero=zp_zero,
        x_const=consts.is_const(x),
        scale_const=consts.is_const(scale),
        zp_const=consts.is_const(zp),
        int32_wrap=options.wrap_int32,
        fed=frozenset(n for n in (x, scale, zp) if n is not None and n in fed),
        fold=options.weights == "float" and consts.is_const(x),
        read=lambda name: consts.value(name, max_bytes=1 << 62),
    )
