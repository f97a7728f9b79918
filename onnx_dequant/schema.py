"""The op as an ONNX node: its domain, an ``OpSchema`` whose inference runs the contract, ``make_node``.

Importing this module registers the schema once per process, so ``onnx.checker.check_model`` and
``onnx.shape_inference.infer_shapes`` understand models that keep the op.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import onnx
import onnx.defs
from onnx import TypeProto, helper

from . import dtypes
from .contract import Shape, TensorType, infer, normalize_axes
from .errors import DequantizeError

__all__ = [
    "DOMAIN",
    "OP_TYPE",
    "OPSET_VERSION",
    "make_node",
    "is_dequantize",
    "node_attributes",
    "check_node",
    "opset_import",
    "tensor_type_of",
    "type_proto_of",
]

DOMAIN = "ngraph"
"""The custom op's domain."""
OP_TYPE = "Dequantize"
OPSET_VERSION = 1
"""The version of ``DOMAIN`` that models import for the op."""


def make_node(
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    axes: Any = (),
    dtype: Any = None,
    name: str | None = None,
) -> onnx.NodeProto:
    """A ``Dequantize`` node of ``DOMAIN``: inputs ``(input, scale[, zero_point])``, one output."""
    for what, names in (("inputs", inputs), ("outputs", outputs)):
        if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
            raise DequantizeError(f"Dequantize {what} must be a list of names, got {type(names).__name__}")
    inputs = list(inputs)
    outputs = list(outputs)
    for n in (*inputs, *outputs):
        if not isinstance(n, str):
            raise DequantizeError(f"Dequantize input and output names must be str, got {type(n).__name__}")
    if name is not None and not isinstance(name, str):
        raise DequantizeError(f"Dequantize node name must be a str, got {type(name).__name__}")
    if not 2 <= len(inputs) <= 3:
        raise DequantizeError(f"Dequantize takes 2 or 3 inputs (input, scale, zero_point), got {len(inputs)}")
    if len(outputs) != 1:
        raise DequantizeError(f"Dequantize has exactly one output, got {len(outputs)}")
    attrs: dict[str, Any] = {}
    if dtype is not None:
        elem = dtypes.parse(dtype)
        if not elem.is_real:
            raise DequantizeError(f"Output element type ({elem}) must be a floating point type")
        attrs["type"] = elem.onnx
    node = helper.make_node(OP_TYPE, inputs, outputs, name=name, domain=DOMAIN, **attrs)
    # an empty INTS attribute (per-tensor) needs its type spelled out
    node.attribute.insert(
        0, helper.make_attribute("axes", list(normalize_axes(axes)), attr_type=onnx.AttributeProto.INTS)
    )
    return node


def opset_import() -> onnx.OperatorSetIdProto:
    """The opset import a model needs for the op."""
    return helper.make_opsetid(DOMAIN, OPSET_VERSION)


def is_dequantize(node: onnx.NodeProto) -> bool:
    """Whether a node is our op."""
    return node.op_type == OP_TYPE and node.domain == DOMAIN


def node_attributes(node: onnx.NodeProto) -> tuple[tuple[int, ...], dtypes.DType | None]:
    """The node's ``(axes, type)``, checked; ``type`` is None when the attribute is absent."""
    axes: Any = ()
    elem = None
    for a in node.attribute:
        if a.name == "axes":
            axes = list(a.ints)
        elif a.name == "type":
            elem = dtypes.parse(int(a.i))
    return normalize_axes(axes), elem


def check_node(node: onnx.NodeProto, types: Mapping[str, TensorType]) -> tuple[dtypes.DType, TensorType]:
    """A node of the op checked against the contract with the value types in ``types`` (absent names are
    unknown): ``(input element type, output type)``.

    ``DequantizeError`` naming the node for a wrong number of inputs or outputs, a broken rule of the
    contract, an input element type that is unknown, or an output declared with another element type.
    """
    unknown = TensorType(None, None)
    try:
        if len(node.output) != 1 or not node.output[0]:
            raise DequantizeError(f"Dequantize has exactly one output, got {len(node.output)}")
        if not 2 <= len(node.input) <= 3 or not node.input[0] or not node.input[1]:
            raise DequantizeError("Dequantize takes 2 or 3 inputs (input, scale, zero_point)")
        axes, elem = node_attributes(node)
        x = types.get(node.input[0], unknown)
        zp = types.get(node.input[2], unknown) if len(node.input) == 3 and node.input[2] else None
        out = infer(x, types.get(node.input[1], unknown), zp, axes=axes, dtype=elem)
        in_type = x.elem_type or (zp.elem_type if zp is not None else None)
        if in_type is None:
            raise DequantizeError(
                f"The element type of input '{node.input[0]}' is unknown (add value_info or a typed graph input)"
            )
        out_type = dtypes.parse(out.elem_type)
        declared = types.get(node.output[0], unknown).elem_type
        if declared is not None and dtypes.parse(declared) != out_type:
            raise DequantizeError(
                f"Output '{node.output[0]}' is declared {dtypes.parse(declared).name}, "
                f"but the node produces {out_type.name}"
            )
    except DequantizeError as e:
        raise e.at(node=node.name or (node.output[0] if node.output else None)) from None
    return dtypes.parse(in_type), out


# ---- shape and type inference ----


def tensor_type_of(tp: TypeProto | None) -> TensorType:
    """A ``TypeProto``'s element type and shape as a ``TensorType`` (unknown parts None, names kept).

    Element types outside the table (string, float8...) read as unknown.
    """
    if tp is None or not tp.HasField("tensor_type"):
        return TensorType(None, None)
    tt = tp.tensor_type
    try:
        elem = dtypes.parse(tt.elem_type) if tt.elem_type else None
    except DequantizeError:  # a type outside the table (string, float8...): unknown to the contract
        elem = None
    if not tt.HasField("shape"):
        return TensorType(elem, None)
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or None)
    return TensorType(elem, tuple(dims))


def type_proto_of(t: TensorType) -> TypeProto:
    """A ``TensorType`` with a known element type as a tensor ``TypeProto`` (symbolic dims kept)."""
    out = TypeProto()
    out.tensor_type.elem_type = t.elem_type.onnx
    shape: Shape = t.shape
    if shape is not None:
        out.tensor_type.shape.SetInParent()
        for d in shape:
            dim = out.tensor_type.shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, str):
                dim.dim_param = d
    return out


def _infer_node(ctx: Any) -> None:
    display = ctx.get_display_name()  # "node Dequantize[ngraph] (NAME)"
    found = re.search(r"\((.*)\)$", display)
    name = found.group(1) if found else display
    try:
        axes_attr = ctx.get_attribute("axes")
        type_attr = ctx.get_attribute("type")
        axes = list(axes_attr.ints) if axes_attr is not None else []
        dtype = int(type_attr.i) if type_attr is not None else None
        n = ctx.get_num_inputs()
        x = tensor_type_of(ctx.get_input_type(0))
        scale = tensor_type_of(ctx.get_input_type(1))
        zp = tensor_type_of(ctx.get_input_type(2)) if n > 2 and ctx.has_input(2) else None
        out = infer(x, scale, zp, axes=axes, dtype=dtype)
    except DequantizeError as e:
        raise e.at(node=name) from None
    ctx.set_output_type(0, type_proto_of(out))


def _schema() -> onnx.defs.OpSchema:
    S = onnx.defs.OpSchema
    quantized = [f"tensor({t.onnx_name.lower()})" for t in dtypes.QUANTIZED]
    real = [f"tensor({t.onnx_name.lower()})" for t in dtypes.REAL]
    schema = S(
        OP_TYPE,
        DOMAIN,
        OPSET_VERSION,
        doc="nGraph's multi-axis Dequantize: output = (input - zero_point[j]) * scale[j], where j is the "
        "output coordinate projected onto `axes`.",
        inputs=[
            S.FormalParameter("input", "T1", "quantized input"),
            S.FormalParameter("scale", "T2", "scale, shaped as the input projected onto axes"),
            S.FormalParameter(
                "zero_point",
                "T1",
                "zero point (default 0), shaped like scale",
                param_option=S.FormalParameterOption.Optional,
            ),
        ],
        outputs=[S.FormalParameter("output", "T2", "real output, shaped like input")],
        type_constraints=[("T1", quantized, "quantized integer types"), ("T2", real, "real types")],
        attributes=[
            S.Attribute(
                "axes", S.AttrType.INTS, "distinct axes that scale and zero_point are indexed by", required=False
            ),
            S.Attribute(
                "type", S.AttrType.INT, "output element type (TensorProto); equals the scale's", required=False
            ),
        ],
    )
    schema.set_type_and_shape_inference_function(_infer_node)
    return schema


def _register() -> None:
    if onnx.defs.has(OP_TYPE, DOMAIN):
        existing = onnx.defs.get_schema(OP_TYPE, OPSET_VERSION, DOMAIN)
        if existing.has_type_and_shape_inference_function:
            return
        onnx.defs.deregister_schema(OP_TYPE, OPSET_VERSION, DOMAIN)
    onnx.defs.register_schema(_schema())


_register()
