#!/usr/bin/env python3
"""Calibrate the lowering planner's cost model: time each ONNX Runtime kernel the lowered forms use.

    python scripts/calibrate_costs.py            # measure, print, write onnx_dequant/lowering/strategies/ort_costs.py
    python scripts/calibrate_costs.py --dry-run  # measure and print only
    python scripts/calibrate_costs.py --elements 1M --repeat 5
    python scripts/calibrate_costs.py --rounds 5  # each entry the median of 5 whole measurements, with its spread
    python scripts/calibrate_costs.py --only cast_to_bf16,cast_to_bf16_chunked   # write these, keep the rest

Each kernel runs alone in a graph of its own (a one-node graph of the kernel, int8 input and f32 output
for the DequantizeLinear ones; the i32 guard's checks, ``check_i32`` and ``check_f32``, are their two or
three nodes over an int32 input, and ``*_cached`` the same read from cache; ``cast_to_*_chunked`` what a
Cast adds to a DequantizeLinear in a Scan's row, where the f32 product between them stays in cache),
input and output bound to preallocated buffers, side by side with a casting copy int8 -> f32
(``np.copyto``) timed in the same rounds (a form and its ``@`` variants in the same rounds too); its
median time over the copy's, times the copy's 5 bytes per element, is its cost in *copy bytes per
element*: what the planner charges per element of the tensor (scale and zero-point bytes are added by the
planner as bytes); ``node`` is the fixed cost of running one node, in copy bytes. Per-row overheads (a
DequantizeLinear walking rows of 8 elements instead of 4096, or rows of 16, one vector of its loop with no
scalar rest, ``*_row_vec``; a broadcasting Mul whose operand repeats every 8 elements) come from the
difference of two shapes. Each kernel is measured at one ORT thread and
at every core; the table keeps both and the planner charges their mean, so a kernel ORT runs
single-threaded (the blocked DequantizeLinear) costs more than a threaded one.

The figures are machine- and version-specific: rerun after an ORT upgrade and commit the table.
``--only`` measures everything and writes only the named entries (a kernel added to the model): they
must name partners together (``PARTNERS``), and the table records them in ``MERGED``.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from onnx_dequant.lowering.strategies.chunked import CHUNK_TARGET

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402  (beside this script)

TABLE = Path(__file__).resolve().parent.parent / "onnx_dequant" / "lowering" / "strategies" / "ort_costs.py"
COPY_BYTES = 5  # int8 in, f32 out
CACHED_PARTS = 8
"""An ``@cached`` form runs on an input this many times smaller, as many times in a row (the elements of
one call of the others), after an untimed run: its input is read from the last-level cache. Its figure
includes eight runs' fixed cost instead of one (a few microseconds against about a millisecond)."""
CHUNKED_ROW = CHUNK_TARGET
"""A ``@chunked`` form is a DequantizeLinear and a Cast as a Scan's row runs them (``chunked.CHUNK_TARGET``
elements), run over consecutive parts of an input and an output of the others' size (in memory), the f32
product between them in ORT's arena (in cache); ``derive`` takes the whole DequantizeLinear's time
(``@dql``, timed in the same rounds) from it: the Cast's cost in a row."""
BF16 = np.dtype(ml_dtypes.bfloat16)
VECTOR_ROW = 16
"""The ``@vec`` forms' rows: one vector of ORT's DequantizeLinear loops over int8 (16 bytes), which leave no
scalar remainder (``dql.vector_elements``); the ``@narrow`` ones' rows of 8 are all remainder."""
NODE_RUNS = 256
"""The ``node`` forms run this many times a call (one run of a one-element graph is a few microseconds)."""
TILE_K = 8
"""The ``tile`` forms tile their input this many times along its last axis."""


def graph(node: onnx.NodeProto, x_type: int, x_shape, y_type: int, inits) -> onnx.ModelProto:
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", x_type, list(x_shape))],
        [helper.make_tensor_value_info("y", y_type, None)],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def dql(x_shape, s_shape, **attrs) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    s = rng.uniform(0.01, 0.1, s_shape).astype(np.float32)
    z = rng.integers(-128, 128, s_shape).astype(np.int8)
    inits = [numpy_helper.from_array(s, "s"), numpy_helper.from_array(z, "z")]
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], **attrs)
    return graph(node, TP.INT8, x_shape, TP.FLOAT, inits)


def dql_cast(x_shape, to: int) -> onnx.ModelProto:
    """A per-tensor DequantizeLinear (int8 -> f32) and its product's Cast to ``to``: a Scan's row."""
    m = dql(x_shape, ())
    m.graph.node[0].output[0] = "p"
    m.graph.node.append(helper.make_node("Cast", ["p"], ["y"], to=to))
    m.graph.output[0].type.tensor_type.elem_type = to
    return m


def check(n: int, as_f32: bool) -> onnx.ModelProto:
    """The i32 guard's check of an int32 input of ``n`` elements: its ReduceMax and ReduceMin (over the input
    cast to f32 where ``as_f32``)."""
    nodes = [helper.make_node("Cast", ["x"], ["v"], to=TP.FLOAT)] if as_f32 else []
    v = "v" if as_f32 else "x"
    nodes += [helper.make_node(op, [v], [y], keepdims=0) for op, y in (("ReduceMax", "y"), ("ReduceMin", "y_min"))]
    t = TP.FLOAT if as_f32 else TP.INT32
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TP.INT32, [n])],
        [helper.make_tensor_value_info("y", t, []), helper.make_tensor_value_info("y_min", t, [])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def expand(x_shape, const: onnx.TensorProto) -> onnx.ModelProto:
    """``const`` (one row, or one column) expanded to ``x``'s shape, read from ``x`` when the model runs."""
    m = graph(helper.make_node("Expand", ["c", "t"], ["y"]), TP.FLOAT, x_shape, TP.FLOAT, [const])
    m.graph.node.insert(0, helper.make_node("Shape", ["x"], ["t"]))
    return m


def tile(x_shape, k: int) -> onnx.ModelProto:
    """``x`` tiled ``k`` times along its last axis (a tiled form's scale fed at run time)."""
    repeats = numpy_helper.from_array(np.array([1, k], np.int64), "r")
    return graph(helper.make_node("Tile", ["x", "r"], ["y"]), TP.FLOAT, x_shape, TP.FLOAT, [repeats])


def chain(k: int) -> onnx.ModelProto:
    """``k`` Relu nodes in a row over one element: what ORT spends running a node, whatever it computes."""
    m = graph(helper.make_node("Relu", ["x"], ["y" if k == 1 else "t1"]), TP.FLOAT, (1,), TP.FLOAT, [])
    for i in range(1, k):
        m.graph.node.append(helper.make_node("Relu", [f"t{i}"], ["y" if i == k - 1 else f"t{i + 1}"]))
    return m


def unary(op: str, x_type: int, x_shape, y_type: int, inits=(), extra=(), **attrs) -> onnx.ModelProto:
    return graph(helper.make_node(op, ["x", *extra], ["y"], **attrs), x_type, x_shape, y_type, list(inits))


def forms(n: int) -> dict[str, tuple[onnx.ModelProto, np.dtype, tuple[int, ...], np.dtype]]:
    """name: (model, input dtype, input shape, output dtype)."""
    wide, narrow, vec = 4096, 8, VECTOR_ROW
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    i8, i32 = np.dtype(np.int8), np.dtype(np.int32)
    chunk = min(n, CHUNKED_ROW)
    shape_w, shape_n, shape_v = (n // wide, wide), (n // narrow, narrow), (n // vec, vec)
    row = numpy_helper.from_array(np.full((1, wide), 0.5, np.float32), "c")
    row_n = numpy_helper.from_array(np.full((1, narrow), 0.5, np.float32), "c")

    def column(rows: int) -> onnx.TensorProto:
        return numpy_helper.from_array(np.full((rows, 1), 0.5, np.float32), "c")

    return {
        "dql_tensor": (dql((n,), ()), i8, (n,), f32),
        "dql_axis": (dql(shape_w, (shape_w[0],), axis=0), i8, shape_w, f32),
        "dql_axis@narrow": (dql(shape_n, (shape_n[0],), axis=0), i8, shape_n, f32),
        # rows of one vector of the kernel's loop: no scalar remainder
        "dql_axis@vec": (dql(shape_v, (shape_v[0],), axis=0), i8, shape_v, f32),
        "dql_axis_last": (dql(shape_w, (wide,), axis=1), i8, shape_w, f32),
        "dql_blocked": (dql((8, n // 8), (1, n // 8), axis=0, block_size=8), i8, (8, n // 8), f32),
        # the scale rows after the reduced axis fit in L1 (256 elements) instead of streaming
        "dql_blocked_l1": (dql((n // 256, 256), (1, 256), axis=0, block_size=n // 256), i8, (n // 256, 256), f32),
        # the same with rows of 8 after the reduced axis: the kernel's inner loop runs once per row
        "dql_blocked@narrow": (dql(shape_n, (1, narrow), axis=0, block_size=shape_n[0]), i8, shape_n, f32),
        "dql_blocked@vec": (dql(shape_v, (1, vec), axis=0, block_size=shape_v[0]), i8, shape_v, f32),
        "dql_blocked_last": (dql(shape_n, (shape_n[0], 1), axis=1, block_size=narrow), i8, shape_n, f32),
        "dql_blocked_last@wide": (dql(shape_w, (shape_w[0], 1), axis=1, block_size=wide), i8, shape_w, f32),
        "cast_to_f16": (unary("Cast", TP.FLOAT, (n,), TP.FLOAT16, to=TP.FLOAT16), f32, (n,), f16),
        "cast_to_bf16": (unary("Cast", TP.FLOAT, (n,), TP.BFLOAT16, to=TP.BFLOAT16), f32, (n,), BF16),
        # in a Scan's row: a DequantizeLinear and the Cast over a row, less the DequantizeLinear over the whole
        "cast_to_f16@chunked": (dql_cast((chunk,), TP.FLOAT16), i8, (chunk,), f16),
        "cast_to_f16@dql": (dql((n,), ()), i8, (n,), f32),
        "cast_to_bf16@chunked": (dql_cast((chunk,), TP.BFLOAT16), i8, (chunk,), BF16),
        "cast_to_bf16@dql": (dql((n,), ()), i8, (n,), f32),
        "cast_int_to_f32": (unary("Cast", TP.INT8, (n,), TP.FLOAT, to=TP.FLOAT), i8, (n,), f32),
        # a fed f16/bf16 scale's Cast to the DequantizeLinear's f32
        "cast_f16_to_f32": (unary("Cast", TP.FLOAT16, (n,), TP.FLOAT, to=TP.FLOAT), f16, (n,), f32),
        "cast_bf16_to_f32": (unary("Cast", TP.BFLOAT16, (n,), TP.FLOAT, to=TP.FLOAT), BF16, (n,), f32),
        # the i32 guard's check: ReduceMax and ReduceMin over the input, or over it cast to f32; from memory,
        # and (@cached) an input of an eighth the size checked eight times in a row, read from cache
        "check_i32": (check(n, as_f32=False), i32, (n,), i32),
        "check_f32": (check(n, as_f32=True), i32, (n,), f32),
        "check_i32@cached": (check(n // CACHED_PARTS, as_f32=False), i32, (n // CACHED_PARTS,), i32),
        "check_f32@cached": (check(n // CACHED_PARTS, as_f32=True), i32, (n // CACHED_PARTS,), f32),
        "binary_f32": (unary("Mul", TP.FLOAT, shape_w, TP.FLOAT, [row], ["c"]), f32, shape_w, f32),
        # a broadcast operand that repeats every 8 elements: ORT's Mul runs its inner loop once per run
        "binary_f32@narrow": (unary("Mul", TP.FLOAT, shape_n, TP.FLOAT, [row_n], ["c"]), f32, shape_n, f32),
        # a scale's expansion when the model runs: its row copied along new outer rows; its column along a
        # new inner axis (ORT copies each element, then doubles it: a cost per element of the column); and
        # a Transpose of narrow rows (a form may expand along an outer axis, then transpose it inward)
        "expand_f32": (expand(shape_w, row), f32, shape_w, f32),
        "expand_inner": (expand(shape_w, column(shape_w[0])), f32, shape_w, f32),
        "expand_inner@narrow": (expand(shape_n, column(shape_n[0])), f32, shape_n, f32),
        "transpose_f32": (unary("Transpose", TP.FLOAT, shape_n[::-1], TP.FLOAT, perm=[1, 0]), f32, shape_n[::-1], f32),
        # a tiled form's scale fed at run time: rows tiled TILE_K times to n elements; ORT's Tile copies each
        # run (a row) on its own, at a cost per run copied (rows of 512 against rows of 2)
        "tile_f32": (tile((n // wide, wide // TILE_K), TILE_K), f32, (n // wide, wide // TILE_K), f32),
        "tile_f32@narrow": (tile((n // (2 * TILE_K), 2), TILE_K), f32, (n // (2 * TILE_K), 2), f32),
        # a node's fixed cost: a chain of nine tiny nodes against one (``derive`` takes the difference)
        "node": (chain(1), f32, (1,), f32),
        "node@nine": (chain(9), f32, (1,), f32),
        "copy_f32": (
            unary("Reshape", TP.FLOAT, (n,), TP.FLOAT, [numpy_helper.from_array(np.array(shape_w), "c")], ["c"]),
            f32,
            (n,),
            f32,
        ),
    }


class Runner:
    """One form's session over bound buffers; a call runs it ``runs`` times (``warm``: once, untimed, before
    a timed call of several runs, so that their input is read from cache). With ``parts``, ``x`` and ``y``
    hold that many inputs and outputs along their first axis, a run each, in turn (from and to memory)."""

    def __init__(
        self, m: onnx.ModelProto, x: np.ndarray, y: np.ndarray, threads: int, runs: int = 1, parts: bool = False
    ) -> None:
        self.runs = runs
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads = threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the kernel as written
        self.sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self.bindings = [self._bind(xi, yi) for xi, yi in zip(x, y)] if parts else [self._bind(x, y)]

    def _bind(self, x: np.ndarray, y: np.ndarray) -> Any:
        b = self.sess.io_binding()
        if x.dtype == BF16:  # ORT's NumPy bridge has no bf16: an OrtValue holding its bits instead
            b.x = ort.OrtValue.ortvalue_from_shape_and_type(list(x.shape), TP.BFLOAT16)
            ctypes.memmove(b.x.data_ptr(), np.ascontiguousarray(x).ctypes.data, x.nbytes)
            b.bind_ortvalue_input("x", b.x)
        else:
            b.bind_cpu_input("x", x)
        if y.dtype == BF16:
            b.y = ort.OrtValue.ortvalue_from_shape_and_type(list(y.shape), TP.BFLOAT16)
            b.bind_ortvalue_output("y", b.y)
        else:
            b.y = y  # ORT writes into this memory: it lives as long as the binding
            b.bind_output("y", "cpu", 0, y.dtype, y.shape, y.ctypes.data)
        for other in self.sess.get_outputs()[1:]:  # every output is computed (the check's ReduceMin)
            b.bind_output(other.name, "cpu")
        return b

    def __call__(self) -> None:
        for i in range(self.runs):
            self.sess.run_with_iobinding(self.bindings[i % len(self.bindings)])

    def warm(self) -> None:
        if self.runs > 1:
            self.sess.run_with_iobinding(self.bindings[0])


def timed(fns: dict[str, Callable[[], None]], repeat: int) -> dict[str, float]:
    for f in fns.values():
        f()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            getattr(f, "warm", lambda: None)()  # untimed
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def measure(n: int, repeat: int, threads: int) -> dict[str, float]:
    """Each form's cost in copy bytes per element at ``threads`` ORT threads; a form and its variants
    (``name@variant``, whose differences the table derives) side by side in the same rounds."""
    rng = np.random.default_rng(1)
    groups: dict[str, dict[str, tuple[onnx.ModelProto, np.dtype, tuple[int, ...], np.dtype]]] = {}
    for name, form in forms(n).items():
        groups.setdefault(name.split("@")[0], {})[name] = form
    out: dict[str, float] = {}
    for group in groups.values():
        shape = next(iter(group.values()))[2]
        xi8 = rng.integers(-100, 100, n).astype(np.int8)  # (n elements: every group's, a one-element graph's too)
        copy_out = np.empty(n, np.float32)
        fns: dict[str, Callable[[], None]] = {"copy": lambda: np.copyto(copy_out, xi8, casting="unsafe")}
        for name, (m, xt, shape, yt) in group.items():
            runs = n // math.prod(shape) if name.endswith(("@cached", "@chunked")) else 1  # n elements in all
            runs = NODE_RUNS if name.startswith("node") else runs
            parts = (runs,) if name.endswith("@chunked") else ()  # an input and an output a run
            x = rng.integers(-100, 100, parts + shape).astype(xt)
            y = np.empty(parts + _out_shape(name, shape), yt)
            fns[name] = Runner(m, x, y, threads, runs, parts=bool(parts))
        t = timed(fns, repeat)
        out.update({name: t[name] / t["copy"] * COPY_BYTES for name in group})
    return out


def _out_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    if name.startswith("check"):
        return ()
    if name.startswith("tile"):
        return (shape[0], shape[1] * TILE_K)
    if name == "transpose_f32":
        return shape[::-1]
    return (int(np.prod(shape)) // 4096, 4096) if name == "copy_f32" else shape


def derive(raw: dict[str, float], n: int) -> dict[str, float]:
    """The table's entries: per-element costs, and per-row costs from the narrow/wide differences."""
    wide, narrow = 4096, 8
    rows_n, rows_w, rows_v = n // narrow, n // wide, n // VECTOR_ROW
    d = {k: v for k, v in raw.items() if "@" not in k}
    # cost(n, rows) = n * per_element + rows * per_row, from two shapes of the same n
    d["dql_axis_row"] = max(0.0, (raw["dql_axis@narrow"] - raw["dql_axis"]) * n / (rows_n - rows_w))
    d["dql_axis_row_vec"] = max(0.0, (raw["dql_axis@vec"] - raw["dql_axis"]) * n / (rows_v - rows_w))
    blocked_rows = raw["dql_blocked_last"] - raw["dql_blocked_last@wide"]
    d["dql_blocked_last_row"] = max(0.0, blocked_rows * n / (rows_n - rows_w))
    d["dql_blocked_last"] = raw["dql_blocked_last@wide"]
    d["dql_blocked_row"] = max(0.0, (raw["dql_blocked@narrow"] - raw["dql_blocked_l1"]) * n / (rows_n - n // 256))
    d["dql_blocked_row_vec"] = max(0.0, (raw["dql_blocked@vec"] - raw["dql_blocked_l1"]) * n / (rows_v - n // 256))
    d["binary_f32_row"] = max(0.0, (raw["binary_f32@narrow"] - raw["binary_f32"]) * n / (rows_n - rows_w))
    d["node"] = max(0.0, (raw["node@nine"] - raw["node"]) * n / 8 / NODE_RUNS)  # per node, not per element
    d["expand_inner_row"] = max(0.0, (raw["expand_inner@narrow"] - raw["expand_inner"]) * n / (rows_n - rows_w))
    d["tile_f32_row"] = max(0.0, (raw["tile_f32@narrow"] - raw["tile_f32"]) * n / (n // 2 - n // (wide // TILE_K)))
    d.update({k.replace("@", "_"): v for k, v in raw.items() if k.endswith("@cached")})
    for cast in ("cast_to_f16", "cast_to_bf16"):  # what the Cast adds to a row's DequantizeLinear
        d[f"{cast}_chunked"] = max(0.0, raw[f"{cast}@chunked"] - raw[f"{cast}@dql"])
    return d


def summarize(
    runs: dict[str, list[dict[str, float]]],
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Per thread count, each entry's median over the rounds ``runs`` (rounded as the table keeps it) and
    its spread over the median: the interquartile range from four rounds, below that max - min."""
    table: dict[str, dict[str, float]] = {}
    spread: dict[str, dict[str, float]] = {}
    for t, rounds in runs.items():
        table[t], spread[t] = {}, {}
        for k in rounds[0]:
            values = [r[k] for r in rounds]
            mid = statistics.median(values)
            table[t][k] = round(mid, 3)
            q = statistics.quantiles(values, n=4) if len(values) >= 4 else [min(values), mid, max(values)]
            spread[t][k] = (q[-1] - q[0]) / mid if mid else 0.0
    return table, spread


def names_literal(names: tuple[str, ...], indent: int = len("MERGED = ")) -> str:
    """``names`` as a tuple literal in the repository's format (double quotes; one name a line where the
    line, ``indent`` characters in, would pass 120, as ruff formats it)."""
    inner = ", ".join(f'"{k}"' for k in names)
    one_line = f"({inner},)" if len(names) == 1 else f"({inner})"
    if indent + len(one_line) <= 120:
        return one_line
    return "(\n" + "".join(f'    "{k}",\n' for k in names) + ")"


def literal(table: dict[str, dict[str, float]]) -> str:
    """``table`` as a Python literal in the repository's format (ruff format leaves it as it is)."""
    lines = ["{"]
    for threads, costs in table.items():
        lines.append(f'    "{threads}": {{')
        lines += [f'        "{k}": {v!r},' for k, v in sorted(costs.items())]
        lines.append("    },")
    return "\n".join(lines + ["}"])


PARTNERS = (
    {"cast_to_f16", "cast_to_f16_chunked"},
    {"cast_to_bf16", "cast_to_bf16_chunked"},
    {"expand_f32", "expand_inner", "expand_inner_row", "transpose_f32"},
    {"tile_f32", "tile_f32_row"},
    {"check_i32", "check_f32", "check_i32_cached", "check_f32_cached"},
)
"""Entries the planner weighs against each other (a ratio, or the cheaper of two): merged together or not
at all, so that both come from one machine."""


def committed() -> Any:
    """The committed table's module (``ort_costs.py``), read from its file."""
    spec = importlib.util.spec_from_file_location("ort_costs", TABLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def merged(
    measured: dict[str, dict[str, float]], only: list[str], current: Any, n: int, version: str
) -> tuple[dict[str, dict[str, float]], tuple[str, ...]]:
    """The ``current`` table with the entries ``only`` replaced by their ``measured`` figures, and the
    names of every entry merged so far (``MERGED``); ``SystemExit`` where the result would not be one
    table: an unknown or missing entry, a partner left out (``PARTNERS``), another machine's thread
    counts, ORT version or kernel size."""

    def refuse(why: str) -> SystemExit:
        return SystemExit(f"calibrate_costs: --only {','.join(only) or '(nothing)'}: {why}")

    names = set(next(iter(measured.values())))
    if not only:
        raise refuse("name the entries to write")
    if set(only) - names:
        raise refuse(f"no such entries {sorted(set(only) - names)}")
    if set(current.COSTS) != set(measured):
        raise refuse(f"the table has thread counts {sorted(current.COSTS)}, this machine {sorted(measured)}")
    if (current.ORT_VERSION, current.ELEMENTS) != (version, n):
        raise refuse(
            f"the table was measured with ORT {current.ORT_VERSION} on {current.ELEMENTS} elements: recalibrate all"
        )
    for t, by_name in current.COSTS.items():
        if names - set(by_name) - set(only):
            raise refuse(f"the table lacks {sorted(names - set(by_name) - set(only))}: name them too")
    for pair in PARTNERS:
        if pair & set(only) and not pair <= set(only):
            raise refuse(f"{sorted(pair)} are weighed against each other: merge them together")
    table = {t: {**current.COSTS[t], **{k: measured[t][k] for k in only}} for t in measured}
    return table, tuple(sorted(set(getattr(current, "MERGED", ())) | set(only)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--elements", type=benchlib.parse_size, default="4M", help="elements per kernel (default 4M)")
    p.add_argument("--repeat", type=benchlib.count, default=9, help="timed samples per kernel (median taken)")
    p.add_argument(
        "--rounds",
        type=benchlib.count,
        default=1,
        help="measure the whole table this many times and keep each entry's median (its spread is printed)",
    )
    p.add_argument("--json", metavar="FILE", help="write every round's entries, the medians and spreads as JSON")
    p.add_argument("--dry-run", action="store_true", help="print the table, do not write it")
    p.add_argument(
        "--only",
        metavar="NAMES",
        help="comma-separated entries to write (a kernel added to the model); the table's others stay as they are",
    )
    args = p.parse_args(argv)
    n = args.elements
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    runs: dict[str, list[dict[str, float]]] = {str(t): [] for t in sorted({1, cores})}
    for r in range(args.rounds):  # thread counts alternate, so that a change of load meets both
        for threads in runs:
            print(f"# round {r + 1}/{args.rounds}: {threads} thread(s), {n} elements", file=sys.stderr, flush=True)
            runs[threads].append(derive(measure(n, args.repeat, int(threads)), n))
    table, spread = summarize(runs)
    names = list(next(iter(table.values())))
    print(f"{'kernel':<24}" + "".join(f"{t + ' thr':>10}" + ("  spread" if args.rounds > 1 else "") for t in table))
    for k in names:
        cells = (f"{table[t][k]:>10.3f}" + (f"  {spread[t][k]:>5.0%} " if args.rounds > 1 else "") for t in table)
        print(f"{k:<24}" + "".join(cells))
    if args.json:
        Path(args.json).write_text(json.dumps({"rounds": runs, "table": table, "spread": spread}, indent=1))
    if args.dry_run:
        return 0
    merged_names: tuple[str, ...] = ()
    if args.only is not None:
        only = [k for k in args.only.split(",") if k]
        table, merged_names = merged(table, only, committed(), n, ort.__version__)
    text = (
        '"""ONNX Runtime kernel costs for the lowering planner, in copy bytes per element (per row for\n'
        "``*_row``), by ORT intra-op thread count. Generated by ``scripts/calibrate_costs.py``: do not edit by\n"
        "hand; rerun it after an ORT upgrade. ``MERGED``: the entries measured later than the others\n"
        '(``--only``), on the machine the docs name."""\n\n'
        '__all__ = ["COSTS", "ELEMENTS", "MERGED", "ORT_VERSION"]\n\n'
        f'ORT_VERSION = "{ort.__version__}"\n'
        f"ELEMENTS = {n}\n"
        f"MERGED = {names_literal(merged_names)}\n"
        f"COSTS = {literal(table)}\n"
    )
    TABLE.write_text(text)
    print(f"wrote {TABLE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
