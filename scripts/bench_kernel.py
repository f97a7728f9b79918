#!/usr/bin/env python3
"""Benchmark the Python kernel inside ONNX Runtime against calling the NumPy reference directly.

    python scripts/bench_kernel.py            # 16M int8 elements per case, multi-axis, f32 output
    python scripts/bench_kernel.py --quick    # 1M elements, 3 runs (smoke test)
    python scripts/bench_kernel.py --no-stock # skip the (slow) stock-bridge contrast

Target (issue 4): on 16M int8 elements, multi-axis, f32 output, ``odq.session(...).run`` takes at most
the reference's own time plus two casting copies (int8 -> f32 into a preallocated array). The
contender "reference + 2 casting copies" runs exactly that budget, side by side, and is the baseline.
"kernel in ORT, output not bound" is the same session running ONNX Runtime's own ``run`` (the
extension copies the kernel's result into ONNX Runtime's output) instead of binding the output to an
array the kernel computes into; "kernel in ORT, scratch_bytes=0" is the same session without reusable
output buffers (a fresh array per kernel call): the price of the memory the default session keeps;
"kernel in ORT, read_feeds=False"
the same session with every input handed over by ONNX Runtime (the extension copies each at every
call) instead of read from the caller's arrays. "a call's fixed cost" times a 64-element model (the
kernel against the reference and against ONNX Runtime's own DequantizeLinear on the same input). The
contrast case runs the session through the extension's stock bridge (outputs turned into Python lists),
on a smaller input so it finishes quickly. "activations into Relu" runs the kernel's output into ONNX
Runtime's Relu (bound, an output the session adds and does not show, or not) against ONNX Runtime's own
DequantizeLinear into Relu. "x computed by QuantizeLinear" runs the kernel on an x another node
computes (bound at the shape the model states, or not) against ONNX Runtime's own QuantizeLinear ->
DequantizeLinear. "a held weight into MatMul" runs a constant 1024x1024 int8
weight, dequantized per column, into MatMul with 64 rows of activations: the kernel (a held weight's
output is never bound: the two rows time one thing), the lowered model, and an f32 weight (no
dequantizing) as the floor. "binding the output" runs the kernel's session with its output bound and
not, on 256 KiB to 1 MiB of f32 output, 100 runs a sample: where binding starts to pay
(``session.PLACE_MIN_BYTES``).
"""

from __future__ import annotations

import importlib

import numpy as np
import onnxruntime as ort
from benchlib import Bench, case_data
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.compare import same_bits
from onnx_dequant.ort import kernels

# (name, shape, axes) on 16M elements
CASES = [
    ("rank4 axes{0,3}", (64, 16, 128, 128), (0, 3)),
    ("rank3 axes{0,1}", (256, 256, 256), (0, 1)),
    ("rank4 axes{1,2} +zp", (16, 64, 128, 128), (1, 2)),
]


def model(shape: tuple[int, ...], axes: tuple[int, ...], zero_point: bool):
    sshape = [shape[a] for a in axes]
    ins = ["x", "s"] + (["z"] if zero_point else [])
    vis = [
        helper.make_tensor_value_info("x", TP.INT8, list(shape)),
        helper.make_tensor_value_info("s", TP.FLOAT, sshape),
    ]
    if zero_point:
        vis.append(helper.make_tensor_value_info("z", TP.INT8, sshape))
    graph = helper.make_graph(
        [odq.make_node(ins, ["y"], axes=axes, name="dq")],
        "bench",
        vis,
        [helper.make_tensor_value_info("y", TP.FLOAT, list(shape))],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(odq.DOMAIN, 1)], ir_version=10
    )


def dql_model(shape: tuple[int, ...], axis: int, consumer: str | None = None, *, ours: bool = False):
    """ONNX Runtime's own per-axis DequantizeLinear on the same input (int8 -> f32, no zero point), or
    (``ours``) the Dequantize op on that axis; its output ``y``, or ``consumer``'s of it."""
    t = "t" if consumer else "y"
    if ours:
        nodes = [odq.make_node(["x", "s"], [t], axes=[axis], name="dq")]
    else:
        nodes = [helper.make_node("DequantizeLinear", ["x", "s"], [t], axis=axis)]
    if consumer:
        nodes.append(helper.make_node(consumer, ["t"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "dql",
        [
            helper.make_tensor_value_info("x", TP.INT8, list(shape)),
            helper.make_tensor_value_info("s", TP.FLOAT, [shape[axis]]),
        ],
        [helper.make_tensor_value_info("y", TP.FLOAT, list(shape))],
    )
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid(odq.DOMAIN, 1)] if ours else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def qdq_model(shape: tuple[int, ...], axis: int, scale: float, *, ours: bool):
    """a (f32, fed) -> QuantizeLinear (int8, per tensor) -> x -> the Dequantize op on ``axis`` (``ours``)
    or ONNX Runtime's own per-axis DequantizeLinear -> y: a Dequantize whose x another node computes."""
    inits = [helper.make_tensor("qs", TP.FLOAT, [], [scale]), helper.make_tensor("qz", TP.INT8, [], [0])]
    if ours:
        dq = odq.make_node(["x", "s"], ["y"], axes=[axis], name="dq")
    else:  # an explicit zero point: without one, ONNX Runtime's optimizer hands it the QuantizeLinear's scalar
        dq = helper.make_node("DequantizeLinear", ["x", "s", "dz"], ["y"], axis=axis)
        inits.append(helper.make_tensor("dz", TP.INT8, [shape[axis]], [0] * shape[axis]))
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["a", "qs", "qz"], ["x"]), dq],
        "qdq",
        [
            helper.make_tensor_value_info("a", TP.FLOAT, list(shape)),
            helper.make_tensor_value_info("s", TP.FLOAT, [shape[axis]]),
        ],
        [helper.make_tensor_value_info("y", TP.FLOAT, list(shape))],
        inits,
    )
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid(odq.DOMAIN, 1)] if ours else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def weight_model(weight: np.ndarray, scale: np.ndarray | None, rows: int):
    """a (rows x k, f32, fed) MatMul w: w a Dequantize of the int8 weight per column (``scale`` given),
    else the f32 weight itself."""
    k, n = weight.shape
    inits = [numpy_helper.from_array(weight, "w")]
    nodes = [helper.make_node("MatMul", ["a", "w"], ["y"])]
    if scale is not None:
        inits = [numpy_helper.from_array(weight, "wq"), numpy_helper.from_array(scale, "ws")]
        nodes.insert(0, odq.make_node(["wq", "ws"], ["w"], axes=[1], name="dq_w"))
    graph = helper.make_graph(
        nodes,
        "weight",
        [helper.make_tensor_value_info("a", TP.FLOAT, [rows, k])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [rows, n])],
        inits,
    )
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid(odq.DOMAIN, 1)] if scale is not None else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def placing(fn, min_bytes: int):
    """``fn`` run with kernel outputs bound from ``min_bytes`` (``session.PLACE_MIN_BYTES``) on."""
    session_module = importlib.import_module("onnx_dequant.ort.session")

    def run():
        kept = session_module.PLACE_MIN_BYTES
        session_module.PLACE_MIN_BYTES = min_bytes
        try:
            return fn()
        finally:
            session_module.PLACE_MIN_BYTES = kept

    return run


def calls(fn, n: int = 500):
    """``fn`` called ``n`` times in a row: one sample (ms per sample = 2 us per call at 500)."""
    return lambda: [fn() for _ in range(n)]


def unbound(fn):
    """``fn`` run with no kernel output bound: ONNX Runtime's own ``run``, the extension copying results."""
    return placing(fn, 1 << 62)


def against_plain(bench, title: str, sess, plain, feed: dict, want: np.ndarray, labels: tuple[str, str]) -> None:
    """A case timing the kernel's session (its output bound, and not) against ONNX Runtime's own session
    ``plain`` on ``feed``, once the kernel's output is checked to have ``want``'s bits either way.
    ``labels``: what ONNX Runtime's graph and the kernel's are called."""
    got = sess.run(None, feed)[0]
    assert same_bits(got, want) and same_bits(got, unbound(lambda: sess.run(None, feed))()[0])
    theirs, ours = labels
    bench.case(
        title,
        {
            f"{theirs} (a plain session)": lambda: plain.run(None, feed),
            f"{ours} (odq.session.run)": lambda: sess.run(None, feed),
            f"{ours}, output not bound": unbound(lambda: sess.run(None, feed)),
        },
        baseline=f"{theirs} (a plain session)",
    )


def stock_bridge(fn):
    """``fn`` run with the extension's own (list-building) invocation handler installed."""
    import onnxruntime_extensions as ox
    from onnxruntime_extensions import _ocos

    def run():
        ox.PyCustomOpDef.install_hooker(_ocos._on_pyop_invocation)
        try:
            return fn()
        finally:
            kernels.reinstall_hook()

    return run


def main() -> int:
    bench = Bench("onnx_dequant kernel: odq.session (Python kernel in ONNX Runtime) vs the reference called directly")
    bench.parser.add_argument("--no-stock", action="store_true", help="skip the stock-bridge contrast case")
    args = bench.args
    quick = 16 if args.quick else 1
    rng = np.random.default_rng(0)
    import onnxruntime_extensions as ox

    print(f"onnxruntime {ort.__version__}, onnxruntime-extensions {ox.__version__}", flush=True)
    for name, full_shape, axes in CASES:
        if not bench.wants(name):
            continue
        shape = (full_shape[0] // quick,) + full_shape[1:]
        zero_point = name.endswith("+zp")
        x, s, z = case_data(rng, shape, axes, zero_point)
        feed = {"x": x, "s": s, **({"z": z} if zero_point else {})}
        sess = odq.session(model(shape, axes, zero_point))
        fresh = odq.session(model(shape, axes, zero_point), scratch_bytes=0)
        through = odq.session(model(shape, axes, zero_point), read_feeds=False)
        assert kernels.fast_bridge_installed(), "the fast hook is not installed: figures would be the stock bridge's"
        out = np.empty(shape, np.float32)
        want = odq.dequantize(x, s, z, axes=axes)
        for each in (sess, fresh, through):
            assert same_bits(each.run(None, feed)[0], want)

        def copy() -> None:
            np.copyto(out, x, casting="unsafe")

        def reference() -> np.ndarray:
            return odq.dequantize(x, s, z, axes=axes)

        def budget() -> None:
            reference()
            copy()
            copy()

        bench.case(
            f"{name} {np.prod(shape) / 2**20:.0f}M int8 -> f32",
            {
                "casting copy int8->f32 (preallocated)": copy,
                "reference (odq.dequantize)": reference,
                "reference + 2 casting copies": budget,
                "kernel in ORT (odq.session.run)": lambda: sess.run(None, feed),
                "kernel in ORT, output not bound": unbound(lambda: sess.run(None, feed)),
                "kernel in ORT, scratch_bytes=0": lambda: fresh.run(None, feed),
                "kernel in ORT, read_feeds=False": lambda: through.run(None, feed),
            },
            baseline="reference + 2 casting copies",
            targets={"kernel in ORT (odq.session.run)": ("<= reference + 2 casting copies", 1.0)},
        )

    if bench.wants("fixed cost"):
        shape, axes = (4, 16), (1,)
        x, s, _ = case_data(rng, shape, axes, False)
        sess = odq.session(model(shape, axes, False))
        plain = ort.InferenceSession(dql_model(shape, 1).SerializeToString(), providers=["CPUExecutionProvider"])
        assert same_bits(sess.run(None, {"x": x, "s": s})[0], odq.dequantize(x, s, axes=axes))

        bench.case(
            "a call's fixed cost, 64 int8 -> f32, 500 calls a sample",
            {
                "ORT's own DequantizeLinear (a plain session)": calls(lambda: plain.run(None, {"x": x, "s": s})),
                "reference (odq.dequantize)": calls(lambda: odq.dequantize(x, s, axes=axes)),
                "kernel in ORT (odq.session.run)": calls(lambda: sess.run(None, {"x": x, "s": s})),
            },
            baseline="ORT's own DequantizeLinear (a plain session)",
        )

    if bench.wants("binding"):  # where binding a kernel's output starts to pay (``session.PLACE_MIN_BYTES``)
        for kib in (256, 384, 512, 768, 1024):
            shape, axes = (kib * 256 // 64 // quick, 64), (1,)  # kib KiB of f32 output
            x, s, _ = case_data(rng, shape, axes, False)
            feed = {"x": x, "s": s}
            sess = odq.session(model(shape, axes, False))
            want = odq.dequantize(x, s, axes=axes)
            assert same_bits(placing(lambda: sess.run(None, feed), 1)()[0], want)
            bench.case(
                f"binding the output, {np.prod(shape) * 4 >> 10} KiB of f32, 100 runs a sample",
                {
                    "kernel in ORT, output not bound": calls(unbound(lambda: sess.run(None, feed)), 100),
                    "kernel in ORT, output bound": calls(placing(lambda: sess.run(None, feed), 1), 100),
                    "reference (odq.dequantize)": calls(lambda: odq.dequantize(x, s, axes=axes), 100),
                },
                baseline="kernel in ORT, output not bound",
            )

    if bench.wants("into Relu"):
        shape = (64 // quick, 16, 128, 128)
        x, s, _ = case_data(rng, shape, (1,), False)
        sess = odq.session(dql_model(shape, 1, "Relu", ours=True))
        plain = ort.InferenceSession(
            dql_model(shape, 1, "Relu").SerializeToString(), providers=["CPUExecutionProvider"]
        )
        feed = {"x": x, "s": s}
        against_plain(
            bench,
            f"activations into Relu, {np.prod(shape) / 2**20:.0f}M int8 -> f32 per channel",
            sess,
            plain,
            feed,
            np.maximum(odq.dequantize(x, s, axes=[1]), 0),
            ("ORT's DequantizeLinear -> Relu", "kernel in ORT -> Relu"),
        )

    if bench.wants("QuantizeLinear"):
        shape = (64 // quick, 16, 128, 128)
        a = rng.standard_normal(shape).astype(np.float32)
        s = rng.uniform(0.001, 0.01, shape[1]).astype(np.float32)
        sess = odq.session(qdq_model(shape, 1, 0.05, ours=True))
        plain = ort.InferenceSession(
            qdq_model(shape, 1, 0.05, ours=False).SerializeToString(), providers=["CPUExecutionProvider"]
        )
        feed = {"a": a, "s": s}
        against_plain(
            bench,
            f"x computed by QuantizeLinear, {np.prod(shape) / 2**20:.0f}M f32 -> int8 -> f32 per channel",
            sess,
            plain,
            feed,
            plain.run(None, feed)[0],  # int8 x f32 scale: one rounding either way
            ("ORT's QuantizeLinear -> DequantizeLinear", "QuantizeLinear -> kernel"),
        )

    if bench.wants("weight"):
        rows, k, n = 64, 1024 // quick, 1024
        weight = rng.integers(-128, 128, (k, n), dtype=np.int8)
        scale = rng.uniform(0.001, 0.01, n).astype(np.float32)
        a = rng.standard_normal((rows, k)).astype(np.float32)
        quantized = weight_model(weight, scale, rows)
        sess = odq.session(quantized)
        lowered = ort.InferenceSession(odq.lower(quantized).SerializeToString(), providers=["CPUExecutionProvider"])
        floor = ort.InferenceSession(
            weight_model(odq.dequantize(weight, scale, axes=[1]), None, rows).SerializeToString(),
            providers=["CPUExecutionProvider"],
        )
        got = sess.run(None, {"a": a})[0]
        assert same_bits(got, unbound(lambda: sess.run(None, {"a": a}))()[0])
        # the f32 weight is a constant ONNX Runtime packs for MatMul: other sums, the same values nearly
        assert np.allclose(got, floor.run(None, {"a": a})[0], rtol=1e-4, atol=1e-4)
        bench.case(
            f"a held {k}x{n} int8 weight into MatMul, {rows} rows",
            {
                "f32 weight MatMul (a plain session)": lambda: floor.run(None, {"a": a}),
                "kernel in ORT (odq.session.run)": lambda: sess.run(None, {"a": a}),
                "kernel in ORT, output not bound": unbound(lambda: sess.run(None, {"a": a})),
                "lowered (odq.lower) in ORT": lambda: lowered.run(None, {"a": a}),
            },
            baseline="f32 weight MatMul (a plain session)",
        )

    if not args.no_stock and bench.wants("stock"):
        shape, axes = (16 // quick, 16, 128, 128), (0, 3)  # 4M elements: the stock bridge takes seconds on 16M
        x, s, _ = case_data(rng, shape, axes, False)
        sess = odq.session(model(shape, axes, False))
        slow = stock_bridge(lambda: sess.run(None, {"x": x, "s": s}))
        assert same_bits(slow()[0], odq.dequantize(x, s, axes=axes))
        bench.case(
            f"stock bridge contrast {np.prod(shape) / 2**20:.0f}M int8 -> f32",
            {
                "reference (odq.dequantize)": lambda: odq.dequantize(x, s, axes=axes),
                "kernel in ORT, fast hook": lambda: sess.run(None, {"x": x, "s": s}),
                "kernel in ORT, stock bridge": slow,
            },
            baseline="reference (odq.dequantize)",
        )
    return bench.finish()


if __name__ == "__main__":
    raise SystemExit(main())
