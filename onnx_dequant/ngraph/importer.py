"""``convert``: one nGraph function to one ONNX model.

Parameters become graph inputs (named as the Parameter ops; unknown dims symbolic), Constants
initializers (named as the Constant ops), Results graph outputs (named as the Result ops: the op
feeding a Result writes straight into that name), every other op one or more nodes whose last one
carries the op's name and writes the op's output name (``Add_3_0``). Ops no Result depends on are
dropped, as nGraph drops them when it reads the function.
"""

from __future__ import annotations

import gc
import os
from functools import partial
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .. import schema
from ..errors import DequantizeError, shown_text
from ..opsets import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, check_opset
from . import reader
from .builder import Builder
from .catalog import REFUSED
from .context import OpContext
from .ops import BACKEND_OPS, OPS
from .ops.io import parameter_type

__all__ = ["convert", "DEFAULT_OPSET", "MIN_OPSET", "MAX_OPSET"]


_SOURCE_OPS = ("Parameter", "Constant")
_UNCLAIMABLE = ("Parameter", "Constant", "Result")  # their tensors are named already


def _unsupported(op: reader.Op) -> DequantizeError:
    if op.op in BACKEND_OPS:
        return DequantizeError(
            f"op type '{op.op}' is internal to nGraph's backends: the graph looks serialized after nGraph's "
            "backend optimization passes (serialize the function before compiling it)"
        )
    if op.op in REFUSED:
        return DequantizeError(f"{op.op} is refused: {REFUSED[op.op]}")
    versions = OPS.get(op.op)
    if versions:
        have = ", ".join(str(v) for v in sorted(versions))
        return DequantizeError(f"{op.op} op_version {op.version} is not supported (supported: {have})")
    return DequantizeError(f"unknown or unsupported op type '{op.op}'")


def _outputs_at(op: reader.Op, tensors: dict[str, list[str]]) -> list[str]:
    """The tensors an op's ``{node, index}`` inputs name; DequantizeError for an index out of range."""
    out = []
    for k, (src, idx) in enumerate(op.inputs):
        have = tensors[src]
        if idx >= len(have):
            n = len(have)
            raise DequantizeError(
                f"input {k} refers to output {idx} of '{src}', which has {n} output{'s' if n != 1 else ''}"
            )
        out.append(have[idx])
    return out


def friendly_name(op: reader.Op) -> str | None:
    """The op's ``friendly_name`` when the file gives one (a non-empty string other than its name)."""
    f = op.js.get("friendly_name")
    return f if type(f) is str and f.strip() and f != op.name else None


def _through_goe(src: tuple[str, int], by_name: dict[str, reader.Op]) -> tuple[str, int]:
    """The op output a GetOutputElement chain starting at ``src`` names (``src`` itself for other ops)."""
    for _ in range(len(by_name)):
        op = by_name[src[0]]
        n = op.js.get("n")
        if op.op != "GetOutputElement" or len(op.sources) != 1 or type(n) is not int or n < 0:
            return src
        src = (op.sources[0], n)
    return src


def _goe_output(op: reader.Op, tensors: dict[str, list[str]]) -> str:
    """The tensor of output ``n`` of the op feeding a GetOutputElement."""
    if len(op.sources) != 1:
        raise DequantizeError(f"GetOutputElement takes 1 input, got {len(op.sources)}")
    n = op.js.get("n")
    if type(n) is not int or n < 0:
        raise DequantizeError(f"GetOutputElement needs 'n', the output index, a non-negative integer; got {n!r:.40}")
    have = tensors[op.sources[0]]
    if n >= len(have):
        raise DequantizeError(
            f"Output at index {n} requested, but node '{op.sources[0]}' has only {len(have)} output"
            f"{'s' if len(have) != 1 else ''}"
        )
    return have[n]


def convert(source: Any, *, function: str | None = None, opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    """The ONNX model of one function of an nGraph serialized graph.

    ``source``: a path, JSON text, or parsed JSON. ``function``: the function's name (default: the last
    function, as nGraph's reader picks). ``opset``: the standard domain's opset (13 and later).
    Raises ``DequantizeError`` naming the file, the op and the rule for anything malformed.
    """
    collecting = gc.isenabled()
    gc.disable()  # the parsed JSON is hundreds of thousands of acyclic objects: collections would only rescan them
    try:
        return _convert_source(source, function, opset)
    finally:
        if collecting:
            gc.enable()


def _convert_source(source: Any, function: str | None, opset: int) -> onnx.ModelProto:
    data, path = reader.load(source)
    fn = reader.read_function(data, function, path)
    try:
        opset = check_opset(opset)
        with np.errstate(over="ignore"):  # Constant values beyond their type's range are infinities
            return _convert(fn, opset, path)
    except DequantizeError as e:
        raise e.at(path=path) from None


def _convert(fn: reader.Function, opset: int, path: str | None) -> onnx.ModelProto:
    by_name = fn.by_name
    b = Builder(opset)
    b.convert_function = partial(_convert, opset=opset, path=None)

    # ops some result depends on
    live = set(fn.results)
    for op in reversed(fn.ops):
        if op.name in live:
            live.update(op.sources)

    for op in fn.ops:  # the ops converted without a converter lookup: their version checked here
        have = sorted(OPS.get(op.op, {0: None}))
        if op.op in _UNCLAIMABLE and op.version not in have:
            raise DequantizeError(
                f"{op.op} op_version {op.version} is not supported (supported: {', '.join(map(str, have))})",
                node=op.name,
            )

    tensors: dict[str, list[str]] = {}
    for name in fn.parameters:
        op = by_name[name]
        ctx = OpContext(op, b, [], [], [])
        try:
            t = parameter_type(ctx)
        except DequantizeError as e:
            raise e.at(node=name) from None
        tname = b.reserve(friendly_name(op) or name)
        b.add_input(tname, t)
        b.graph.input[-1].doc_string = f"nGraph Parameter {name}"
        tensors[name] = [tname]

    # a Result names the tensor of the op output feeding it (through GetOutputElement), unless that is a
    # graph input or initializer
    claims: dict[tuple[str, int], str] = b.claims
    result_tensor: dict[str, str] = {}  # Result op -> its graph output's name (the friendly name where given)
    legacy = by_name[fn.results[0]].op != "Result"
    if not legacy:
        for r in fn.results:
            rop = by_name[r]
            if len(rop.inputs) != 1:
                raise DequantizeError(f"Result takes 1 input, got {len(rop.inputs)}", node=r)
            src = _through_goe(rop.inputs[0], by_name)
            if r not in result_tensor:
                result_tensor[r] = b.reserve(friendly_name(rop) or r)
            if by_name[src[0]].op not in _UNCLAIMABLE and src not in claims:
                claims[src] = result_tensor[r]

    live.difference_update(fn.parameters)  # converted above
    b_types = b.types
    reserve = b.reserve
    listed = set() if legacy else set(fn.results)
    converters = {(kind, v): f for kind, versions in OPS.items() for v, f in versions.items()}
    for op in fn.ops:
        name = op.name
        if name not in live:
            continue
        kind = op.op
        try:
            if op.indices is None:
                inputs = [tensors[src][0] for src in op.sources]
            else:
                inputs = _outputs_at(op, tensors)
            if kind == "GetOutputElement":  # no node: it names output n of the op feeding it
                tensors[name] = [_goe_output(op, tensors)]
                continue
            types = [b_types[i] for i in inputs]
            if kind == "Result":
                if len(inputs) != 1:
                    raise DequantizeError(f"Result takes 1 input, got {len(inputs)}")
                out = result_tensor.get(name, name)
                if claims.get(_through_goe(op.inputs[0], by_name)) != out:
                    if name not in listed:  # a Result that no function result names: an ordinary tensor
                        out = reserve(name)
                    b.node("Identity", inputs, [out], name)
                    b_types[out] = types[0]
                tensors[name] = [out]
                continue
            if kind == "Parameter":
                raise DequantizeError("Parameter is used but not listed in the function's 'parameters'")
            converter = converters.get((kind, op.version))
            if converter is None:
                raise _unsupported(op)
            out = claims.get((name, 0))
            if out is None:
                if kind == "Constant":  # initializers keep the Constant's name, as graph inputs the Parameter's
                    out = reserve(name)
                else:
                    names = op.output_names
                    first = names[0] if type(names) is list and names else None
                    out = reserve(first if type(first) is str and first else f"{name}_0")
            ctx = OpContext(op, b, inputs, types, [out])
            out_types = converter(ctx)
            if len(out_types) == 1:
                b_types[out] = out_types[0]
                tensors[name] = ctx.outputs
            else:
                for i, t in enumerate(out_types):
                    b_types[ctx.out(i)] = t
                tensors[name] = ctx.outputs[: len(out_types)]
        except DequantizeError as e:
            raise e.at(node=name) from None

    outputs: set[str] = set()
    for r in fn.results:
        tname = tensors[r][0]
        if (legacy and by_name[r].op in _SOURCE_OPS) or tname in outputs:
            alias = b.reserve(f"{r}_result")
            b.node("Identity", [tname], [alias], alias)
            b.types[alias] = b.types[tname]
            tname = alias
        outputs.add(tname)
        b.add_output(tname)
        b.graph.output[-1].doc_string = f"nGraph Result {r}"

    b.drop_unused_folded()
    g = b.graph
    g.name = fn.name or "function"  # ONNX requires a non-empty graph name
    imports = [helper.make_opsetid("", opset)]
    if b.uses_custom_domain:
        imports.append(schema.opset_import())
    model = b.model
    model.opset_import.extend(imports)
    model.producer_name = "onnx-dequant"
    model.ir_version = helper.find_min_ir_version_for([imports[0]], ignore_unknown=True)
    where = f" from {shown_text(os.path.basename(path))}" if path else ""  # protobuf strings are UTF-8
    model.doc_string = f"nGraph function '{fn.name}'{where}, converted by onnx_dequant.ngraph"
    return model
