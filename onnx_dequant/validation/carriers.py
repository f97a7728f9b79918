"""Carrier casts: ONNX Runtime's Python API cannot exchange bf16 and 4-bit tensors with NumPy, so such
graph inputs and outputs are carried as f32, int8 or uint8 and cast inside the graph (exactly); the
same step adds the intermediate tensors a run should expose as outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .. import dtypes
from ..errors import DequantizeError

__all__ = ["with_carriers"]

_CARRIER = {  # types ORT's Python API cannot exchange with NumPy -> the type to carry them in
    dtypes.parse(t).onnx: (dtypes.parse(c).onnx, dtypes.parse(c).numpy, dtypes.parse(t).numpy)
    for t, c in (("bf16", "f32"), ("i4", "i8"), ("u4", "u8"))
}


_SUFFIX = "__odq_validate"
_OUT_SUFFIX = "__odq_validate_out"  # apart from inputs': a carried input may be a graph output too


def _np_to_onnx(dt: np.dtype) -> int:
    try:
        return dtypes.parse(np.dtype(dt)).onnx
    except DequantizeError:  # outside the table (string, float8, ...)
        return int(helper.np_dtype_to_tensor_dtype(np.dtype(dt)))


def with_carriers(
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
            new = name + _OUT_SUFFIX
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
