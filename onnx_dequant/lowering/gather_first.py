"""A Dequantize read only by Gathers: each Gather moved before it, so that only the gathered elements
are dequantized.

A quantized embedding table read by a Gather (``Dequantize(table) -> Gather(ids)``) dequantizes the
whole table on every run, in ONNX Runtime as in any runtime; gathering the quantized rows first and
dequantizing those gives the same values bit for bit (the op is elementwise). Where the Gather runs along
a quantized axis (a scale per row of the table, the usual embedding), the scale and zero point are
gathered by the same ids. A (32000, 512) int8 table gathered by 16 fed ids: 3.4-5.0 ms -> 0.004-0.008 ms
with a scale per column, 3.3-3.4 ms -> 0.009-0.012 with one per row (ORT 1.32, one thread;
docs/lowering.md).

The rewrite runs on a graph before its nodes are lowered (in effect the main graph: see ``gather_first``'s
conditions): ``Dequantize(x) -> Gather(d,
i, axis=a)`` becomes ``Gather(x, i, axis=a) -> Dequantize`` (one per Gather, its quantization axes past
``a`` shifted by the indices' rank less one; a quantized ``a`` becomes the indices' axes, its scale and
zero point ``Gather(s, i)`` along their own axis for ``a``), which the planner then lowers as any node.
"""

from __future__ import annotations

from typing import NamedTuple

import onnx
from onnx import helper

from ..contract import TensorType
from ..graphs import FreshNames
from ..schema import is_dequantize, node_attributes
from .options import LowerOptions
from .walk import Scope

__all__ = ["gather_first", "MIN_ROWS"]

MIN_ROWS = 4096
"""Where the Gathers' sizes are not known when lowering (ids of symbolic dims), the move is made only for
a table with at least this many rows along the Gather's axis (an embedding table: a run's ids seldom
outnumber its rows). Ids that outnumber a small table's rows (a codebook read by 200,000 ids) made the
moved form 3.5-4x slower: the gathered elements outnumber the table's."""


def _axis(node: onnx.NodeProto, rank: int) -> int | None:
    """The Gather's axis, non-negative; None where a function's attribute names it."""
    for a in node.attribute:
        if a.name == "axis":
            if a.ref_attr_name:
                return None
            return a.i + rank if a.i < 0 else a.i
    return 0


def _size(dims: tuple) -> int | None:
    n = 1
    for d in dims:
        if not isinstance(d, int):
            return None
        n *= d
    return n


class _Move(NamedTuple):
    """One Gather moved before the Dequantize it reads."""

    gather: onnx.NodeProto
    inputs: tuple[tuple[int, TensorType], ...]  # for each of the node's inputs gathered: the axis, the type after
    axes: tuple[int, ...]  # the new node's quantization axes


def _moves(scope: Scope, node: onnx.NodeProto, wrap_int32: bool) -> list[_Move] | None:
    """Each Gather reading ``node``'s output, moved, where all of them can be moved before it (see
    ``gather_first``); else None."""
    out = node.output[0] if node.output else ""
    gathers = scope.readers(out)
    x = scope.types.get(node.input[0]) if node.input else None
    if not gathers or out in scope.outputs or scope.read_inside(out) or x is None or x.shape is None:
        return None
    bits = getattr(x.elem_type, "bits", 0)
    if bits < 8:
        return None  # ONNX Runtime has no Gather for 4-bit types
    x_fed = scope.depends_on_fed(node.input[0])
    if bits == 32 and not wrap_int32 and not x_fed:
        return None  # the i32 guard checks a constant input when lowering, a gathered one on every run
    axes, _ = node_attributes(node)
    scale = scope.types.get(node.input[1])
    moves: list[_Move] = []
    gathered: int | None = 0
    for g in gathers:
        if g.op_type != "Gather" or g.domain not in ("", "ai.onnx") or list(g.input).count(out) != 1:
            return None
        if g.input[0] != out or len(g.input) != 2 or len(g.output) != 1:
            return None
        axis = _axis(g, len(x.shape))
        ids = scope.types.get(g.input[1])
        if axis is None or not 0 <= axis < len(x.shape) or ids is None or ids.shape is None:
            return None
        if not x_fed and not scope.depends_on_fed(g.input[1]):
            return None  # ORT would fold the Gather of constants into a constant weight (and fuse it)
        rows = x.shape[axis]
        shape = tuple(x.shape[:axis]) + tuple(ids.shape) + tuple(x.shape[axis + 1 :])
        r = len(ids.shape)
        new_axes = tuple(
            i for b in axes for i in ((b,) if b < axis else range(axis, axis + r) if b == axis else (b + r - 1,))
        )
        inputs = [(axis, TensorType(x.elem_type, shape))]
        if axis in axes:  # the scale and zero point gathered too, along their own axis for ``axis``
            if scale is None or scale.elem_type is None:
                return None
            params = tuple(shape[b] for b in new_axes)
            inputs.append((axes.index(axis), TensorType(scale.elem_type, params)))
            if len(node.input) > 2 and node.input[2]:
                inputs.append((axes.index(axis), TensorType(x.elem_type, params)))
        size = _size(shape)
        if size is None and not (isinstance(rows, int) and rows >= MIN_ROWS):
            return None
        for _, t in inputs[1:]:
            size = None if size is None else size + _size(t.shape)  # type: ignore[operator]
        gathered = None if gathered is None or size is None else gathered + size
        moves.append(_Move(g, tuple(inputs), new_axes))
    whole = _size(tuple(x.shape))
    if gathered is not None and whole is not None and gathered > whole:
        return None  # the Gathers repeat more elements than the input holds: dequantize it once
    return moves


def gather_first(scope: Scope, options: LowerOptions, names: FreshNames) -> dict[str, str]:
    """Move the Gathers before each Dequantize of ``scope`` that ``options`` lowers, in place, where: every
    reader of its output is a Gather reading it as its data, with indices of known rank (along a quantized
    axis, the scale's element type known too); the input is 8-bit or wider; the input or the indices are
    computed from the model's inputs (ORT would otherwise fold the Gather into a constant weight, which its
    MatMul fusions then read inexactly); an i32 input without ``wrap_int32`` is not a constant (its check
    would then run on every run); and the Gathers hold no more elements (with a gathered scale and zero
    point) than the input (or, sizes unknown, the table has ``MIN_ROWS``). Returns, for each new Dequantize
    (by its output), the Gather moved before it, as ``"'gather' of 'dequantize'"``."""
    moved: dict[str, str] = {}
    plans = {
        id(n): m
        for n in scope.body.node
        if is_dequantize(n) and options.wants(n) and (m := _moves(scope, n, options.wrap_int32)) is not None
    }
    if not plans:
        return moved
    replaced = {id(m.gather): (n, m) for n in scope.body.node if id(n) in plans for m in plans[id(n)]}
    nodes: list[onnx.NodeProto] = []
    gone: set[str] = set()
    for n in scope.body.node:
        if id(n) in plans:
            gone.add(n.output[0])
            continue  # each of its Gathers gets its own Dequantize
        if id(n) not in replaced:
            nodes.append(n)
            continue
        dq, move = replaced[id(n)]
        label = dq.name or dq.output[0]
        new = onnx.NodeProto()
        new.CopyFrom(dq)
        if len(plans[id(dq)]) > 1 or not dq.name:  # one Gather: the Dequantize keeps its name
            new.name = names.fresh(f"{label}__{n.name or n.output[0]}")
        for i, (axis, t) in enumerate(move.inputs):
            name = names.fresh(f"{label}__{('gathered', 'scale_gathered', 'zp_gathered')[i]}")
            gather = helper.make_node("Gather", [dq.input[i], n.input[1]], [name], name=name, axis=axis)
            if i == 0:  # the Gather moved keeps its name and doc string
                gather.name, gather.doc_string = n.name, n.doc_string
            nodes.append(gather)
            new.input[i] = name
            scope.types[name] = t
        new.output[0] = n.output[0]
        for a in new.attribute:
            if a.name == "axes":
                del a.ints[:]
                a.ints.extend(move.axes)
        nodes.append(new)
        moved[n.output[0]] = f"'{n.name or n.output[0]}' of '{label}'"
    del scope.body.node[:]
    scope.body.node.extend(nodes)
    kept = [v for v in getattr(scope.body, "value_info", ()) if v.name not in gone]
    if len(kept) != len(getattr(scope.body, "value_info", ())):  # the whole output is no value any more
        del scope.body.value_info[:]
        scope.body.value_info.extend(kept)
    scope.forget()
    return moved
