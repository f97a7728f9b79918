"""TensorIterator (nGraph's opset 0, after 0.26): an ONNX Loop whose body is the TensorIterator's body, converted
by the same importer.

The serialized op holds ``body`` (``nodes``, ``parameters``, ``results``: op JSON, as functions hold them),
``input_descriptions`` and ``output_descriptions``:

- ``slice`` input: iteration k takes part k (``part_size`` long, along ``axis``) of the input between ``start`` and
  ``end`` (both inclusive, negative ones counting from the end); a negative ``stride`` walks the parts from the
  end. The iteration count is ``(|end - start| + 1) / part_size``, the same for every sliced input. Outside the
  Loop the input is cut, split into (iterations, part) and its parts put first (reversed for a negative stride);
  in the body a Gather at the iteration number gives the body parameter.
- ``merged`` input: a back edge: the body parameter starts as the input and then takes the body result
  ``body_value_index`` of the previous iteration (a Loop-carried value).
- ``constant`` (invariant) input: the same tensor every iteration (the body reads it from the outer graph).
- ``concat`` output: the body result of every iteration, concatenated along ``axis`` (in reverse for a negative
  ``stride``): the Loop's scan output (stacked on a new first axis), moved into place and merged.
- ``body_output`` output: the body result of iteration ``iteration`` (-1: the last): the final value of a
  carried result, else the scan output's entry.

Sliced inputs need the sliced axis's size; a TensorIterator nested in a body is refused (as nGraph does).
"""

from __future__ import annotations

import copy
from typing import Any

import onnx
from onnx import helper

from ... import dtypes, schema
from ...contract import TensorType
from ...errors import DequantizeError
from ..context import MAX_DIM, OpContext, shape_str
from ..reader import read_function
from . import register


def _ints(ctx: OpContext, d: dict, keys: tuple[str, ...], where: str) -> list[int]:
    out = []
    for k in keys:
        v = d.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or abs(v) > MAX_DIM:
            raise ctx.error(f"{where}: '{k}' must be an integer, got {v!r:.40}")
        out.append(v)
    return out


def _descriptions(ctx: OpContext, key: str) -> list[dict[str, Any]]:
    v = ctx.raw(key)
    if not isinstance(v, list) or not all(isinstance(d, dict) for d in v):
        raise ctx.error(f"'{key}' must be a list of objects")
    return v


def _body(ctx: OpContext) -> tuple[list[dict], list[str], list[str]]:
    body = ctx.raw("body")
    if not isinstance(body, dict):
        raise ctx.error("'body' must be an object with 'nodes', 'parameters' and 'results'")
    parts = []
    for k in ("nodes", "parameters", "results"):
        v = body.get(k)
        if not isinstance(v, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str) for o in v):
            raise ctx.error(f"the body's '{k}' must be a list of ops")
        parts.append(v)
    nodes, params, results = parts
    return copy.deepcopy(nodes), [p["name"] for p in params], [r["name"] for r in results]


def _type_of(vi: onnx.ValueInfoProto) -> TensorType:
    tt = vi.type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    return TensorType(dtypes.parse(int(tt.elem_type)), dims if tt.HasField("shape") else None)


def _rename(g: onnx.GraphProto, prefix: str) -> None:
    """Prefix every tensor and node name the graph defines (its names then cannot meet the outer graph's)."""
    defined = {vi.name for vi in g.input} | {t.name for t in g.initializer}
    defined |= {o for n in g.node for o in n.output if o}

    def r(name: str) -> str:
        return prefix + name if name in defined else name

    for coll in (g.input, g.output, g.value_info, g.initializer):
        for x in coll:
            x.name = r(x.name)
    for n in g.node:
        n.name = prefix + n.name
        n.input[:] = [r(i) for i in n.input]
        n.output[:] = [r(o) for o in n.output]


def _convert_body(ctx: OpContext, nodes: list[dict], params: list[str], results: list[str]) -> onnx.GraphProto:
    if any(n.get("op") == "TensorIterator" for n in nodes):
        raise ctx.error("No nested TensorIterator")
    fn = {"name": f"{ctx.name}_body", "ops": nodes, "parameters": params, "result": results}
    try:
        model = ctx.b.convert_function(read_function([fn]))  # type: ignore[misc]
    except DequantizeError as e:
        where = f"node '{e.node}' of the body" if e.node else "the body"
        raise ctx.error(f"TensorIterator: {where}: {e.rule}") from None
    if any(n.domain == schema.DOMAIN for n in model.graph.node):
        ctx.b.uses_custom_domain = True
    return model.graph


@register("TensorIterator")
def tensor_iterator(ctx: OpContext) -> list[TensorType]:
    nodes, params, results = _body(ctx)
    ins, outs = _descriptions(ctx, "input_descriptions"), _descriptions(ctx, "output_descriptions")
    if len(ins) != len(ctx.inputs):
        raise ctx.error("Number of inputs must be the same as number of input descriptions")
    by_name = {n["name"]: n for n in nodes}
    iterations: int | None = None
    sliced: dict[int, tuple[str, bool]] = {}  # body parameter -> (outer tensor, parts first), reversed or not
    merged: list[tuple[int, int, int]] = []  # (input, body parameter, body value)
    invariant: dict[int, str] = {}
    for k, d in enumerate(ins):
        kind = d.get("kind")
        where = f"input description {k}"
        idx, p = _ints(ctx, d, ("input_index", "body_parameter_index"), where)
        if idx != k:
            raise ctx.error("Input_index not in order")
        if not 0 <= p < len(params) or p in sliced or p in invariant or p in {m[1] for m in merged}:
            raise ctx.error(f"{where}: body_parameter_index {p} names no body parameter, or one bound twice")
        t = ctx.types[k]
        pshape = t.shape
        if kind == "slice":
            start, stride, part, end, axis = _ints(ctx, d, ("start", "stride", "part_size", "end", "axis"), where)
            rank = ctx.rank(k)
            if not 0 <= axis < rank or part < 1:
                raise ctx.error(f"{where}: axis {axis} or part_size {part} does not fit the input {shape_str(t.shape)}")
            n = t.shape[axis]  # type: ignore[index]
            if not isinstance(n, int):
                raise ctx.error(f"{where}: the sliced axis {axis} of {shape_str(t.shape)} must have a known size")
            s, e = (start + n if start < 0 else start), (end + n if end < 0 else end)
            count = (abs(e - s) + 1) // part
            if iterations is not None and count != iterations:
                raise ctx.error("Number of slices not the same")
            iterations = count
            lo, hi = min(s, e), max(s, e) + 1
            if abs(stride) != part or hi - lo != count * part or lo < 0 or hi > n:
                raise ctx.error(
                    f"{where}: slices of {part} every {stride} between {start} and {end} do not tile axis {axis} "
                    f"of {shape_str(t.shape)} (only contiguous parts are supported)"
                )
            sliced[p] = (_parts_first(ctx, k, axis, lo, hi, count, part, stride < 0), stride < 0)
            pshape = tuple(part if i == axis else dim for i, dim in enumerate(t.shape))  # type: ignore[union-attr]
        elif kind == "merged":
            (value,) = _ints(ctx, d, ("body_value_index",), where)
            if not 0 <= value < len(results):
                raise ctx.error(f"{where}: body_value_index {value} names no body result")
            merged.append((k, p, value))
        elif kind == "constant":
            invariant[p] = ctx.inputs[k]
        else:
            raise ctx.error(f"{where}: unknown kind {kind!r:.40} (slice, merged or constant)")
        _bind(ctx, by_name.get(params[p]), t.elem_type, pshape, where)
    if iterations is None:
        raise ctx.error("TensorIterator needs a sliced input (its iteration count comes from the slices)")
    unbound = [params[p] for p in range(len(params)) if p not in sliced and p not in invariant]
    unbound = [u for u in unbound if u not in {params[m[1]] for m in merged}]
    if unbound:
        raise ctx.error(f"body parameter '{unbound[0]}' has no input description")

    g = _convert_body(ctx, nodes, params, results)
    prefix = f"{ctx.name}/body/"
    _rename(g, prefix)
    value_types = [_type_of(o) for o in g.output]
    value_names = [o.name for o in g.output]
    param_inputs = list(g.input)

    body = helper.make_graph([], f"{ctx.name}_body", [], [])
    it = prefix + "iteration"
    cond_in, cond_out = prefix + "cond", prefix + "cond_out"
    body.input.append(helper.make_tensor_value_info(it, onnx.TensorProto.INT64, []))
    body.input.append(helper.make_tensor_value_info(cond_in, onnx.TensorProto.BOOL, []))
    for _, p, _ in merged:
        body.input.append(param_inputs[p])
    for p, (outer, _) in sliced.items():
        body.node.append(helper.make_node("Gather", [outer, it], [param_inputs[p].name], f"{prefix}slice_{p}", axis=0))
    for p, outer in invariant.items():
        body.node.append(helper.make_node("Identity", [outer], [param_inputs[p].name], f"{prefix}invariant_{p}"))
    body.node.extend(g.node)
    body.initializer.extend(g.initializer)
    body.node.append(helper.make_node("Identity", [cond_in], [cond_out], f"{prefix}cond"))
    body.output.append(helper.make_tensor_value_info(cond_out, onnx.TensorProto.BOOL, []))
    used: set[str] = set()

    def body_output(value: int, tag: str) -> None:
        name = value_names[value]
        if name in used:  # an ONNX graph lists each output once: an alias
            alias = f"{prefix}{tag}"
            body.node.append(helper.make_node("Identity", [name], [alias], alias))
            name = alias
        used.add(name)
        out = copy.deepcopy(g.output[value])
        out.name = name
        body.output.append(out)

    for k, _, value in merged:
        body_output(value, f"carried_{k}")
    scans = sorted({_ints(ctx, d, ("body_value_index",), f"output description {j}")[0] for j, d in enumerate(outs)})
    for value in scans:
        if not 0 <= value < len(results):
            raise ctx.error(f"an output description's body_value_index {value} names no body result")
        body_output(value, f"scan_{value}")

    finals = [ctx.b.reserve(f"{ctx.name}/final_{k}") for k, _, _ in merged]
    stacked = {v: ctx.b.reserve(f"{ctx.name}/scan_{v}") for v in scans}
    loop_in = [ctx.scalar(iterations, "i64"), ""] + [ctx.inputs[k] for k, _, _ in merged]
    ctx.b.node("Loop", loop_in, finals + list(stacked.values()), f"{ctx.name}/Loop", {"body": body})
    for v in scans:
        t = value_types[v]
        ctx.b.types[stacked[v]] = TensorType(t.elem_type, None if t.shape is None else (iterations, *t.shape))

    carried = {value: f for (_, _, value), f in zip(merged, finals)}
    out_types: dict[int, TensorType] = {}
    for j, d in enumerate(outs):
        where = f"output description {j}"
        value, index = _ints(ctx, d, ("body_value_index", "output_index"), where)
        if not 0 <= index < len(outs) or index in out_types:
            raise ctx.error(f"{where}: output_index {index} is out of range or repeated")
        t = value_types[value]
        target = ctx.out(index)
        if d.get("kind") == "concat":
            (stride, axis) = _ints(ctx, d, ("stride", "axis"), where)
            out_types[index] = _concat(ctx, stacked[value], t, iterations, axis, stride < 0, target, where)
        elif d.get("kind") == "body_output":
            (k,) = _ints(ctx, d, ("iteration",), where)
            if not -1 <= k < iterations:
                raise ctx.error(f"{where}: iteration {k} is outside the {iterations} iterations")
            if k in (-1, iterations - 1) and value in carried:
                ctx.emit("Identity", [carried[value]], target)
            else:
                pick = ctx.int64s([iterations - 1 if k == -1 else k])
                ctx.emit("Squeeze", [ctx.emit("Gather", [stacked[value], pick], axis=0), ctx.int64s([0])], target)
            out_types[index] = t
        else:
            raise ctx.error(f"{where}: unknown kind {d.get('kind')!r:.40} (concat or body_output)")
    if sorted(out_types) != list(range(len(outs))):
        raise ctx.error("Number of outputs must be the same as number of output descriptions")
    return [out_types[i] for i in range(len(outs))]


def _bind(ctx: OpContext, param: dict | None, et: dtypes.DType, shape: Any, where: str) -> None:
    """Give the body parameter the type its input description implies (nGraph infers it the same way)."""
    if param is None or param.get("op") != "Parameter":
        raise ctx.error(f"{where}: the body parameter is not a Parameter op of the body's nodes")
    given = param.get("shape")
    if isinstance(given, list) and shape is not None and len(given) == len(shape):
        if any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(given, shape)):
            raise ctx.error(f"{where}: Iterator input is not compatible with body param ({given} and {list(shape)})")
    param["shape"] = None if shape is None else [d if isinstance(d, int) else None for d in shape]
    param["element_type"] = et.ctype


def _parts_first(ctx: OpContext, k: int, axis: int, lo: int, hi: int, count: int, part: int, reverse: bool) -> str:
    """Input ``k`` cut to ``[lo, hi)`` on ``axis``, as (count, ..., part, ...): part i first (last i if reversed)."""
    t = ctx.types[k]
    shape = list(t.shape)  # type: ignore[arg-type]
    if not all(isinstance(d, int) for d in shape):
        raise ctx.error(f"a sliced input needs a static shape, got {shape_str(t.shape)}")
    ctx.require_onnx(t.elem_type, "Slice", "Reshape", "Transpose", "Gather")
    x = ctx.inputs[k]
    if (lo, hi) != (0, shape[axis]):
        x = ctx.emit("Slice", [x, ctx.int64s([lo]), ctx.int64s([hi]), ctx.int64s([axis])])
    split = shape[:axis] + [count, part] + shape[axis + 1 :]
    x = ctx.emit("Reshape", [x, ctx.int64s(split)])
    perm = [axis] + [i for i in range(len(split)) if i != axis]
    x = ctx.emit("Transpose", [x], perm=perm)
    if reverse:
        x = ctx.emit("Slice", [x, ctx.int64s([-1]), ctx.int64s([-MAX_DIM]), ctx.int64s([0]), ctx.int64s([-1])])
    return x


def _concat(
    ctx: OpContext, stacked: str, t: TensorType, count: int, axis: int, reverse: bool, target: str, where: str
) -> TensorType:
    """The per-iteration values (stacked first) concatenated along ``axis``."""
    shape = t.shape
    if shape is None or not 0 <= axis < len(shape) or not all(isinstance(d, int) for d in shape):
        raise ctx.error(f"{where}: axis {axis} does not fit the body value {shape_str(shape)} (static shapes only)")
    x = stacked
    if reverse:
        x = ctx.emit("Slice", [x, ctx.int64s([-1]), ctx.int64s([-MAX_DIM]), ctx.int64s([0]), ctx.int64s([-1])])
    rank = len(shape)
    perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank + 1))
    x = ctx.emit("Transpose", [x], perm=perm)
    out = tuple(d * count if i == axis else d for i, d in enumerate(shape))  # type: ignore[operator]
    ctx.emit("Reshape", [x, ctx.int64s(list(out))], target)
    return TensorType(t.elem_type, out)
