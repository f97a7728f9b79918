"""A Dequantize read by Gathers and Slices: each moved before it, so that only the elements they take are
dequantized.

A quantized embedding table read by a Gather (``Dequantize(table) -> Gather(ids)``) dequantizes the
whole table on every run, in ONNX Runtime as in any runtime; gathering the quantized rows first and
dequantizing those gives the same values bit for bit (the op is elementwise). Where the Gather runs along
a quantized axis (a scale per row of the table, the usual embedding), the scale and zero point are
gathered by the same ids. A (32000, 512) int8 table gathered by 16 fed ids: 3.4-5.0 ms -> 0.004-0.008 ms
with a scale per column, 3.3-3.7 ms -> 0.006 with one per row (ORT 1.32, one thread; docs/lowering.md).
A Slice (a table of positions cut to a run's length) is moved the same way. The node stays where
other readers or the graph's output need all of it (tied embeddings: 0.66-0.77x the time with a Gemm).

The rewrite runs on a graph before its nodes are lowered (in effect the main graph: see ``gather_first``'s
conditions): ``Dequantize(x) -> Gather(d, i, axis=a)`` becomes ``Gather(x, i, axis=a) -> Dequantize`` (one
per reader, its quantization axes past ``a`` shifted by the indices' rank less one; a quantized ``a``
becomes the indices' axes, its scale and zero point ``Gather(s, i)`` along their own axis for ``a``), and
``Dequantize(x) -> Slice(d, ...)`` becomes ``Slice(x, ...) -> Dequantize`` (the scale and zero point
sliced the same where the Slice's axes are quantized); the planner then lowers each new node as any node.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..contract import TensorType
from ..graphs import FreshNames
from ..schema import is_dequantize, node_attributes
from .options import LowerOptions
from .walk import Scope

__all__ = ["gather_first", "MIN_ROWS"]

PARAM_GATHER_COST = 32
"""A Gather of the scale or the zero point by one index, in elements of the input gathered: ORT's Gather
copies each index's slice alone (about 9 ns an index, one thread), which for a scale per row is one element.
Moved anyway, a (4096, 8) table with a scale and zero point per row, read by 2867 ids, was 1.8-1.9x slower;
(2048, 32) by 819 ids 1.2x and (2048, 128) by 1433 ids 1.1x, which this charge keeps where they are, while
(2048, 128) by 819 ids (0.73x) and (1024, 512) by 716 (0.47x) still move."""

MIN_ROW_WIDTH = 64
"""Along a quantized axis, with the Gather's size not known when lowering, the move is made only where a
gathered row holds at least this many elements (the scale's and zero point's Gathers cost about that per
index, ``PARAM_GATHER_COST``)."""

KEPT_SHARE = 4
"""Where the node stays for other readers, the readers moved take at most this share of its input (1/4)."""

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


class _Input(NamedTuple):
    """One of the node's inputs as the reader moved takes it."""

    index: int  # the node's input: 0 the quantized values, 1 the scale, 2 the zero point
    extra: tuple[str | None, ...]  # the reader's inputs after the data (None: ``_Move.param_axes`` as a constant)
    attrs: tuple[tuple[str, int], ...]
    type: TensorType  # its type after


class _Move(NamedTuple):
    """One Gather or Slice moved before the Dequantize it reads."""

    reader: onnx.NodeProto
    inputs: tuple[_Input, ...]
    axes: tuple[int, ...]  # the new node's quantization axes
    size: int | None  # elements the moved readers output (None: not known when lowering)
    param_axes: np.ndarray | None = None  # a Slice's axes of the scale and zero point


def _gather(scope: Scope, node: onnx.NodeProto, g: onnx.NodeProto, x: TensorType) -> _Move | None:
    """The Gather ``g`` moved before ``node``, or None where it cannot be."""
    axes, _ = node_attributes(node)
    axis = _axis(g, len(x.shape))
    ids = scope.types.get(g.input[1]) if len(g.input) == 2 else None
    if axis is None or not 0 <= axis < len(x.shape) or ids is None or ids.shape is None:
        return None
    shape = tuple(x.shape[:axis]) + tuple(ids.shape) + tuple(x.shape[axis + 1 :])
    r = len(ids.shape)
    new_axes = tuple(
        i for b in axes for i in ((b,) if b < axis else range(axis, axis + r) if b == axis else (b + r - 1,))
    )
    inputs = [_Input(0, (g.input[1],), (("axis", axis),), TensorType(x.elem_type, shape))]
    if axis in axes:  # the scale and zero point gathered too, along their own axis for ``axis``
        params = tuple(shape[b] for b in new_axes)
        inputs += _params(scope, node, x, params, (g.input[1],), (("axis", axes.index(axis)),))
    size = _size(shape)
    rows = x.shape[axis]
    if size is None and not (isinstance(rows, int) and rows >= MIN_ROWS):
        return None
    row = _size(tuple(x.shape[:axis]) + tuple(x.shape[axis + 1 :]))
    if size is None and axis in axes and (row is None or row < MIN_ROW_WIDTH):
        return None
    if size is not None and axis in axes:  # each of the scale's and zero point's Gathers, by index
        size += (len(inputs) - 1) * (_size(tuple(ids.shape)) or 0) * PARAM_GATHER_COST
    return _Move(g, tuple(inputs), new_axes, size)


def _slice(scope: Scope, node: onnx.NodeProto, sl: onnx.NodeProto, x: TensorType) -> _Move | None:
    """The Slice ``sl`` moved before ``node``, or None where it cannot be: its axes must be known when
    lowering, and either none of them quantized (the scale as it is) or all of them (the scale and zero point
    sliced the same)."""
    axes, _ = node_attributes(node)
    rank = len(x.shape)
    if not 3 <= len(sl.input) <= 5:
        return None
    starts = scope.constants.value(sl.input[1])
    count = len(starts.reshape(-1)) if starts is not None else _known_length(scope, sl.input[1])
    if count is None:
        return None
    if len(sl.input) > 3 and sl.input[3]:
        given = scope.constants.value(sl.input[3])
        if given is None:
            return None
        sliced = [int(a) + rank if int(a) < 0 else int(a) for a in given.reshape(-1)]
    else:
        sliced = list(range(count))
    if len(sliced) != count or not all(0 <= a < rank for a in sliced) or len(set(sliced)) != count:
        return None
    quantized = [a in axes for a in sliced]
    if any(quantized) and not all(quantized):
        return None
    shape = list(x.shape)
    ends = scope.constants.value(sl.input[2])
    steps = scope.constants.value(sl.input[4]) if len(sl.input) > 4 and sl.input[4] else np.ones(count, np.int64)
    for i, a in enumerate(sliced):
        d = shape[a]
        known = starts is not None and ends is not None and steps is not None and isinstance(d, int)
        if known and len(ends.reshape(-1)) == len(steps.reshape(-1)) == count:  # type: ignore[union-attr]
            ends_i, step = int(ends.reshape(-1)[i]), int(steps.reshape(-1)[i])  # type: ignore[union-attr]
            if step == 0:
                return None  # (ORT refuses it)
            shape[a] = _sliced_length(d, int(starts.reshape(-1)[i]), ends_i, step)  # type: ignore[arg-type,union-attr]
        else:
            shape[a] = None
    shape_t = tuple(shape)
    inputs = [_Input(0, tuple(sl.input[1:]), (), TensorType(x.elem_type, shape_t))]
    param_axes = None
    if any(quantized):  # the scale's axes, of the type of the Slice's other indices (int32 or int64)
        index = scope.types.get(sl.input[1])
        if index is None or index.elem_type is None:
            return None
        param_axes = np.array([axes.index(a) for a in sliced], index.elem_type.numpy)
        extra = (sl.input[1], sl.input[2], None) + ((sl.input[4],) if len(sl.input) > 4 and sl.input[4] else ())
        inputs += _params(scope, node, x, tuple(shape_t[a] for a in axes), extra, ())
    size = _size(shape_t)
    for p in inputs[1:]:
        size = None if size is None else size + _size(p.type.shape)  # type: ignore[operator]
    return _Move(sl, tuple(inputs), axes, size, param_axes)


def _sliced_length(d: int, start: int, end: int, step: int) -> int | None:
    """The length of ONNX's Slice of a ``d``-long axis (its clamping differs from Python's for a negative
    step: a start before the axis is its first element, not none); None where ORT 1.32 departs from ONNX's
    text (an end of INT32_MAX or INT64_MAX with a negative step, which it reads as "to the first element")."""
    if step < 0 and end >= 2**31 - 1:
        return None
    start, end = start + d if start < 0 else start, end + d if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), d), min(max(end, 0), d)
        return max(0, (end - start + step - 1) // step)
    start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
    return max(0, (start - end - step - 1) // -step)


def _known_length(scope: Scope, name: str) -> int | None:
    """The length of a 1-D value whose length is known when lowering."""
    t = scope.types.get(name)
    if t is None or t.shape is None or len(t.shape) != 1 or not isinstance(t.shape[0], int):
        return None
    return t.shape[0]


def _params(
    scope: Scope, node: onnx.NodeProto, x: TensorType, shape: tuple, extra: tuple, attrs: tuple
) -> list[_Input]:
    """The scale and zero point (where the node has one) taken by a reader moved along a quantized axis."""
    scale = scope.types.get(node.input[1])
    elem = scale.elem_type if scale is not None else None
    if elem is None:
        raise _Unknown
    out = [_Input(1, extra, attrs, TensorType(elem, shape))]
    if len(node.input) > 2 and node.input[2]:
        out.append(_Input(2, extra, attrs, TensorType(x.elem_type, shape)))
    return out


class _Unknown(Exception):
    """The scale's element type is not known: no move."""


READERS = {"Gather": _gather, "Slice": _slice}
"""The readers that take part of the node's output, and how each is moved before it."""


def _moves(scope: Scope, node: onnx.NodeProto, options: LowerOptions) -> tuple[list[_Move], bool] | None:
    """Each Gather or Slice reading ``node``'s output that can be moved before it (see ``gather_first``), and
    whether the node stays for its other readers (or the graph's output); None where none moves."""
    out = node.output[0] if node.output else ""
    readers = scope.readers(out)
    x = scope.types.get(node.input[0]) if node.input else None
    if not readers or x is None or x.shape is None:
        return None
    bits = getattr(x.elem_type, "bits", 0)
    if bits < 8:
        return None  # ONNX Runtime has no Gather or Slice for 4-bit types
    x_fed = scope.depends_on_fed(node.input[0])
    if bits == 32 and not options.wrap_int32 and not x_fed:
        return None  # the i32 guard checks a constant input when lowering, a gathered one on every run
    whole = _size(tuple(x.shape))
    kept = out in scope.outputs or scope.read_inside(out)
    moves: list[_Move] = []
    for r in readers:
        m = _move(scope, node, r, x, x_fed)
        if m is None or (m.size is not None and whole is not None and m.size > whole):
            kept = True  # it reads the node's output as it is
        else:
            moves.append(m)
    sizes = [m.size for m in moves]
    if not moves:
        return None
    if not kept:
        if None not in sizes and whole is not None and sum(sizes) > whole:  # type: ignore[arg-type]
            return None  # the readers repeat more elements than the input holds: dequantize it once
        return moves, kept
    # The node stays: a moved reader saves the copy of the whole DequantizeLinear ORT gives it, which for a
    # constant table ``run_once`` often does not prevent (a table the graph returns, one a Transpose reads:
    # 1.4-2x slower unmoved), and for a fed one only where another reader may fuse with the DequantizeLinear
    # (tied embeddings' Gemm, where ``run_once`` adds no pair; beside a Relu it runs it once, and moving
    # dequantized the reader's elements twice, 1.1-1.6x slower). A weight folded to float
    # (``weights="float"``) the reader reads as it is.
    if (x_fed and not scope.reads(out).fusing) or options.weights == "float" or None in sizes or whole is None:
        return None
    if sum(sizes) * KEPT_SHARE > whole:  # type: ignore[arg-type]
        return None
    return moves, kept


def _move(scope: Scope, node: onnx.NodeProto, r: onnx.NodeProto, x: TensorType, x_fed: bool) -> _Move | None:
    """The reader ``r`` moved before ``node``, or None where it cannot be."""
    move = READERS.get(r.op_type)
    out = node.output[0]
    if move is None or r.domain not in ("", "ai.onnx") or len(r.output) != 1:
        return None
    if r.input[0] != out or list(r.input).count(out) != 1:
        return None
    if not x_fed and not any(scope.depends_on_fed(i) for i in r.input[1:] if i):
        return None  # ORT would fold the reader of constants into a constant weight (and fuse it)
    try:
        return move(scope, node, r, x)
    except _Unknown:
        return None


def gather_first(scope: Scope, options: LowerOptions, names: FreshNames) -> dict[str, str]:
    """Move the Gathers and Slices before each Dequantize of ``scope`` that ``options`` lowers, in place, where: the
    reader reads the node's output as its data; a Gather's indices are of known rank, a Slice's axes known when
    lowering and either all quantized or none; along a quantized axis, the scale's element type is known; the input
    is 8-bit or wider; the input or the reader's other inputs are computed from the model's inputs (ORT would
    otherwise fold the reader into a constant weight, which its MatMul fusions then read inexactly); an i32 input
    without ``wrap_int32`` is not a constant (its check would then run on every run); and the reader takes no more
    elements (with a gathered scale and zero point) than the input (or, a Gather's size unknown, the table has
    ``MIN_ROWS``), nor, where every reader moves, do they all. The node stays, for the graph's output and its other
    readers, where it has them; readers move beside it where its input is constant or another reader may fuse
    with its DequantizeLinear (ORT would give the Gather its own DequantizeLinear of the whole table), take at most
    ``1/KEPT_SHARE`` of it together, and ``weights`` is not "float". Returns, for each new Dequantize (by
    its output), the reader moved before it, as ``"'reader' of 'dequantize'"``."""
    moved: dict[str, str] = {}
    plans = {
        id(n): m
        for n in scope.body.node
        if is_dequantize(n) and options.wants(n) and (m := _moves(scope, n, options)) is not None
    }
    if not plans:
        return moved
    replaced = {id(m.reader): (n, m) for n in scope.body.node if id(n) in plans for m in plans[id(n)][0]}
    nodes: list[onnx.NodeProto] = []
    gone: set[str] = set()
    for n in scope.body.node:
        if id(n) in plans and not plans[id(n)][1]:
            gone.add(n.output[0])
            continue  # each of its readers gets its own Dequantize
        if id(n) not in replaced:
            nodes.append(n)
            continue
        dq, move = replaced[id(n)]
        label = dq.name or dq.output[0]
        new = onnx.NodeProto()
        new.CopyFrom(dq)
        moves, kept = plans[id(dq)]
        if len(moves) > 1 or kept or not dq.name:  # one reader, the node gone: the Dequantize keeps its name
            new.name = names.fresh(f"{label}__{n.name or n.output[0]}")
        param_axes = None
        if move.param_axes is not None:  # a Slice's axes of the scale and zero point
            param_axes = names.fresh(f"{label}__param_axes")
            value = numpy_helper.from_array(move.param_axes)
            nodes.append(helper.make_node("Constant", [], [param_axes], name=param_axes, value=value))
        for p in move.inputs:
            name = names.fresh(f"{label}__{('gathered', 'scale_gathered', 'zp_gathered')[p.index]}")
            extra = [param_axes if e is None else e for e in p.extra]
            taken = helper.make_node(n.op_type, [dq.input[p.index], *extra], [name], name=name, **dict(p.attrs))
            if p.index == 0:  # the reader moved keeps its name and doc string
                taken.name, taken.doc_string = n.name, n.doc_string
            nodes.append(taken)
            new.input[p.index] = name
            scope.types[name] = p.type
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
