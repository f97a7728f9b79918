"""Elementwise ops: unary and binary arithmetic on every element type the importer takes, on each type's edge
values (integer extremes and wrap, signed zeros, NaN, infinities, subnormals), every broadcast rule in each
era's spelling, integer Divide with ``pythondiv`` on and off."""

from __future__ import annotations

import numpy as np

from onnx_dequant import dtypes
from onnx_dequant.ngraph.writer import FunctionWriter

from . import GoldenCase, graph, importable, specials

TYPES = ("f32", "f64", "bf16", "i8", "u8", "i16", "u16", "i32", "i64", "u32", "u64")
"""Not f16: nGraph 0.26's deserializer reads ``float16`` as bf16 (docs/ngraph.md)."""
EXACT_UNARY = ("Abs", "Negative", "Relu", "Sqrt")
MATH = ("Sigmoid", "Tanh", "Exp", "Log")
BINARY = ("Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum")


def _unary(op: str, et: str, x: np.ndarray) -> list:
    w = FunctionWriter()
    w.result(w.op(op, w.parameter(et, list(x.shape))))
    return graph(w)


def _pairs(et: str, divide: bool) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge values (integer Divide: no zero divisor, no MIN / -1: nGraph's C++ traps)."""
    v = specials(et)
    a, b = np.repeat(v, v.size), np.tile(v, v.size)
    if divide and dtypes.parse(et).kind != "real":
        keep = b != 0
        if dtypes.parse(et).signed:
            keep &= ~((a == np.iinfo(a.dtype).min) & (b == -1))
        a, b = a[keep], b[keep]
    return a, b


def _binary(op: str, et: str, a: np.ndarray, b: np.ndarray, era: str = "v0.26", broadcast: str = "none",
            axis: int = -1, **attrs) -> list:  # fmt: skip
    w = FunctionWriter(era=era)
    pa, pb = w.parameter(et, list(a.shape)), w.parameter(et, list(b.shape))
    w.result(w.binary(op, pa, pb, broadcast, axis, **attrs))
    return graph(w)


def cases() -> list[GoldenCase]:
    out: list[GoldenCase] = []

    def add(case: GoldenCase) -> None:
        if importable(case.graph):
            out.append(case)

    for op in EXACT_UNARY + MATH:
        for et in TYPES:
            kind = dtypes.parse(et).kind
            if (op in MATH or op == "Sqrt") and kind != "real":
                continue
            x = specials(et)
            inexact = op in MATH
            add(
                GoldenCase(
                    f"{op.lower()}_{et}",
                    _unary(op, et, x),
                    {"Parameter_0": x},
                    note=f"{op} on {et} edge values",
                    ulp=4 if inexact else None,
                    why="transcendental: nGraph's libm and ONNX Runtime's approximations differ" if inexact else "",
                )
            )
    for op in BINARY:
        for et in TYPES:
            a, b = _pairs(et, op == "Divide")
            variants = [({}, "")]
            if op == "Divide" and dtypes.parse(et).kind != "real":
                variants = [({}, "_floor"), ({"pythondiv": False}, "_trunc")]
            for attrs, suffix in variants:
                add(
                    GoldenCase(
                        f"{op.lower()}_{et}{suffix}",
                        _binary(op, et, a, b, **attrs),
                        {"Parameter_0": a, "Parameter_1": b},
                        note=f"{op} {attrs or ''} on every pair of {et} edge values",
                    )
                )
    # broadcasting: every rule in each era's spelling
    rng = np.random.default_rng(10)
    x = rng.integers(-50, 50, (2, 3, 4)).astype(np.float32)
    shapes = {
        "none": [((2, 3, 4), -1)],
        "numpy": [((3, 1), -1), ((4,), -1), ((2, 1, 4), -1), ((), -1)],
        "pdpd": [((3,), 1), ((3, 4), 1), ((2,), 0), ((3, 1), 1), ((4,), -1)],
    }
    for kind, forms in shapes.items():  # v0.26 spelling: nGraph 0.26 reads no other (v0.25's "autob" key)
        for k, (shape, axis) in enumerate(forms):
            y = rng.integers(-9, 9, shape).astype(np.float32) + 0.5
            for op in ("Subtract", "Divide"):
                expected = None
                if kind == "pdpd":  # nGraph 0.26: "Unsupported auto broadcast specification"; later nGraph's rule
                    f = np.subtract if op == "Subtract" else np.divide
                    expected = {"Result_3": f(x, _pdpd(y, axis, x.ndim))}
                add(
                    GoldenCase(
                        f"broadcast_{kind}{k}_{op.lower()}",
                        _binary(op, "f32", x, y, "v0.26", kind, axis),
                        {"Parameter_0": x, "Parameter_1": y},
                        note=f"{op} (2,3,4) with {shape}, broadcast {kind} axis {axis}",
                        expected=expected,
                    )
                )
    # scalars (a Parameter [1] reshaped: the runner cannot feed a 0-d array) and empty tensors
    w = FunctionWriter()
    p = w.parameter("f32", [1])
    s = w.op("Reshape", p, input_order=[0], output_shape=[])
    w.result(w.op("Abs", w.binary("Multiply", s, s)))
    w.result(w.binary("Add", s, w.constant(np.float32(0.25))))
    add(GoldenCase("scalar_f32", graph(w), {"Parameter_0": np.array([-1.5], np.float32)}, note="0-d tensors"))
    # friendly names (as the TensorFlow and MXNet bridges set them) on the Parameters and a Result
    w = FunctionWriter()
    a, b = w.parameter("f32", [3]), w.parameter("f32", [3])
    w.result(w.binary("Subtract", a, b))
    js = w.to_json()
    for op, friendly in zip(js["ops"], ("_arg_x_0_0", "_arg_y_0_1", None, "_retval_z_0_0")):
        if friendly:
            op["friendly_name"] = friendly
    xy = {"Parameter_0": np.array([1.5, -0.0, 3], np.float32), "Parameter_1": np.array([0.5, 0.0, -1], np.float32)}
    add(GoldenCase("friendly_names", graph(js), xy, note="Parameters and Result with friendly names"))
    for shape in ((0,), (2, 0, 3)):
        a = np.full(shape, -3.5, np.float32)
        tag = "empty" + "x".join(map(str, shape))
        add(GoldenCase(f"add_f32_{tag}", _binary("Add", "f32", a, a), {"Parameter_0": a, "Parameter_1": a}))
        add(GoldenCase(f"abs_f32_{tag}", _unary("Abs", "f32", a), {"Parameter_0": a}))
    return out


def _pdpd(y: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """PDPD broadcasting: ``y``'s dims (trailing ones dropped) placed from ``axis`` (-1: at the end)."""
    dims = list(y.shape)
    while dims and dims[-1] == 1:
        dims.pop()
    start = rank - len(dims) if axis == -1 else axis
    return y.reshape([1] * start + dims + [1] * (rank - start - len(dims)))
