#!/usr/bin/env python3
"""Benchmark converted QuantizedConvolution / QuantizedDot under ONNX Runtime against hand-written ONNX.

    python scripts/bench_quantized.py            # 1x64x56x56 conv (64 3x3 filters), 256x1024 by 1024x1024 dot
    python scripts/bench_quantized.py --quick    # smaller shapes, 3 runs (smoke test)
    python scripts/bench_quantized.py --profile  # also ONNX Runtime's profile of each model: time per node
    python scripts/bench_quantized.py --threads 1  # one intra-op thread per session (steadier on a loaded machine)

Targets (issue 11): the converted per-channel QuantizedConvolution at most 1.1x a hand-written QLinearConv
model of the same shape and faster than the same convolution in f32, the exact decomposition's cost beside
it; the converted QuantizedDot at most 1.1x a hand-written QLinearMatMul.

Each case runs with full-range i8 filters (|w| <= 127) and with 7-bit ones (|w| <= 64, on which ONNX
Runtime's u8 x i8 kernels are exact). Contenders per case, side by side: the hand-written QLinear* model
(the baseline: ONNX's own int8 op with nGraph's scales, which rounds ties to even and, on AVX2 without
VNNI, saturates u8 x i8 pair sums, so it is not nGraph's result), the converted model as the importer
plans it (the QLinear form with proven scales where ``ties.qlinear_scales`` proves them, per channel), the
exact decomposition forced (ConvInteger / MatMulInteger + requantization), and the f32 op. Each converted
model is checked bit for bit against the op's definition (``tests/quantized_reference.py``) before timing.
Sessions do not spin
(``session.intra_op.allow_spinning`` 0): a contender's idle worker threads would otherwise spin on the
shared cores while the next one runs.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnxruntime as ort
from benchlib import Bench
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnx_dequant as odq
from onnx_dequant.ngraph.ops import quantized
from onnx_dequant.ngraph.writer import FunctionWriter, dumps

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import quantized_reference as ref  # noqa: E402

THREADS = 0
"""Intra-op threads per session (``--threads``; 0: ONNX Runtime's default, one per core)."""


def options() -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.intra_op_num_threads = THREADS
    return so


def session(model) -> ort.InferenceSession:
    so = options()
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def profile(b: Bench, name: str, model, feeds) -> None:
    """With ``--profile``: the median kernel time of each node of ``model`` over ``--repeat`` runs
    (``SessionOptions.enable_profiling``), and its share of their sum."""
    if not b.args.profile:
        return
    with tempfile.TemporaryDirectory() as d:
        so = options()
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(d, "p")
        s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        for _ in range(b.args.repeat + 1):
            s.run(None, feeds)
        with open(s.end_profiling()) as f:
            events = json.load(f)
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            times[(e["args"]["op_name"], e["name"][: -len("_kernel_time")])].append(e["dur"] / 1e3)
    med = {k: statistics.median(v[1:]) for k, v in times.items()}  # the first run warms up
    total = sum(med.values())
    print(f"### profile: {name} (kernel times, median of {b.args.repeat} runs; sum {total:.2f} ms)")
    for (op, node), t in med.items():
        print(f"  {op:<18} {t:7.3f} ms {100 * t / total:5.1f}%  {node}")


def _model(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "bench", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def convert(f: FunctionWriter, exact: bool):
    """The importer's model; ``exact`` forces the decomposition (the QLinear forms are not tried)."""
    saved = quantized.QLINEAR
    quantized.QLINEAR = not exact
    try:
        return odq.ngraph.convert(dumps([f]))
    finally:
        quantized.QLINEAR = saved


def ops(model) -> str:
    names = [n.op_type for n in model.graph.node]
    main = [n for n in names if n in ("QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger")]
    return f"{'+'.join(main)} + {len(names) - len(main)} nodes"


def conv_case(b: Bench, rng: np.random.Generator, wmax: int) -> None:
    n, c, hw = (1, 16, 28) if b.args.quick else (1, 64, 56)
    x = rng.integers(0, 256, (n, c, hw, hw), dtype=np.uint8)
    w = rng.integers(-wmax, wmax + 1, (c, c, 3, 3), dtype=np.int8)
    si, zx, so, zo = np.float32(0.02), np.uint8(128), np.float32(0.5), np.int8(0)
    sf = rng.uniform(0.5, 1.5, c).astype(np.float32) * np.float32(0.01)
    zw = np.zeros(c, np.int8)
    f = FunctionWriter()
    px = f.parameter("u8", list(x.shape))
    consts = [f.constant(v) for v in (w, si, zx, sf, zw, so, zo)]
    pad = {"padding_below": [1, 1], "padding_above": [1, 1]}
    y = f.op(
        "QuantizedConvolution",
        px,
        *consts,
        window_movement_strides=[1, 1],
        window_dilation_strides=[1, 1],
        data_dilation_strides=[1, 1],
        output_type="i8",
        input_axes=[],
        filter_axes=[0],
        output_axes=[],
        **pad,
    )
    f.result(y)
    want = ref.quantized_convolution(
        x, w, si, zx, sf.reshape(1, -1, 1, 1), zw, so, zo, np.int8, pads_below=[1, 1], pads_above=[1, 1]
    )
    planned, exact = convert(f, False), convert(f, True)
    feeds = {"Parameter_0": x}
    s_plan, s_exact = session(planned), session(exact)
    for s in (s_plan, s_exact):
        assert np.array_equal(s.run(None, feeds)[0], want), "converted model differs from the definition"
    vi = helper.make_tensor_value_info
    inits = {"sx": si, "zx": zx, "w": w, "sw": sf, "zw": zw, "sy": so, "zy": np.uint8(128)}
    qlc = _model(
        [helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], pads=[1, 1, 1, 1])],
        [vi("x", TP.UINT8, x.shape)],
        [vi("y", TP.UINT8, None)],
        inits,
    )
    s_qlc = session(qlc)
    xf = x.astype(np.float32)
    conv = _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        [vi("x", TP.FLOAT, x.shape)],
        [vi("y", TP.FLOAT, None)],
        {"w": w.astype(np.float32)},
    )
    s_f32 = session(conv)
    print(f"# planned: {ops(planned)}; forced exact: {ops(exact)}")
    b.case(
        f"per-channel QuantizedConvolution {x.shape} x {w.shape}, |w| <= {wmax}",
        {
            "hand-written QLinearConv (u8 x i8 -> u8)": lambda: s_qlc.run(None, {"x": x}),
            "converted (the importer's plan)": lambda: s_plan.run(None, feeds),
            "exact decomposition (ConvInteger + requantize)": lambda: s_exact.run(None, feeds),
            "f32 Conv": lambda: s_f32.run(None, {"x": xf}),
        },
        baseline="hand-written QLinearConv (u8 x i8 -> u8)",
        targets={"converted (the importer's plan)": ("<= 1.1x QLinearConv", 1.1)},
    )
    if b.wants(f"per-channel QuantizedConvolution {x.shape} x {w.shape}, |w| <= {wmax}"):
        profile(b, "converted", planned, feeds)
        profile(b, "exact decomposition", exact, feeds)
        profile(b, "hand-written QLinearConv", qlc, {"x": x})


def dot_case(b: Bench, rng: np.random.Generator, wmax: int) -> None:
    m, k, n = (64, 256, 256) if b.args.quick else (256, 1024, 1024)
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)
    w = rng.integers(-wmax, wmax + 1, (k, n), dtype=np.int8)
    sa, za, sb, zb, so, zo = np.float32(0.02), np.uint8(128), np.float32(0.01), np.int8(0), np.float32(2.0), np.int8(0)
    f = FunctionWriter()
    pa = f.parameter("u8", [m, k])
    consts = [f.constant(v) for v in (w, sa, za, sb, zb, so, zo)]
    y = f.op(
        "QuantizedDot",
        pa,
        *consts,
        reduction_axes_count=1,
        output_type="i8",
        input0_axes=[],
        input1_axes=[],
        output_axes=[],
    )
    f.result(y)
    want = ref.quantized_dot(a, w, sa, za, sb, zb, so, zo, np.int8)
    planned, exact = convert(f, False), convert(f, True)
    feeds = {"Parameter_0": a}
    s_plan, s_exact = session(planned), session(exact)
    for s in (s_plan, s_exact):
        assert np.array_equal(s.run(None, feeds)[0], want), "converted model differs from the definition"
    vi = helper.make_tensor_value_info
    inits = {"sa": sa, "za": za, "b": w, "sb": sb, "zb": zb, "sy": so, "zy": np.uint8(128)}
    qlm = _model(
        [helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])],
        [vi("a", TP.UINT8, a.shape)],
        [vi("y", TP.UINT8, None)],
        inits,
    )
    s_qlm = session(qlm)
    af = a.astype(np.float32)
    mm = _model(
        [helper.make_node("MatMul", ["a", "b"], ["y"])],
        [vi("a", TP.FLOAT, a.shape)],
        [vi("y", TP.FLOAT, None)],
        {"b": w.astype(np.float32)},
    )
    s_f32 = session(mm)
    print(f"# planned: {ops(planned)}; forced exact: {ops(exact)}")
    b.case(
        f"QuantizedDot {a.shape} x {w.shape}, |w| <= {wmax}",
        {
            "hand-written QLinearMatMul (u8 x i8 -> u8)": lambda: s_qlm.run(None, {"a": a}),
            "converted (the importer's plan)": lambda: s_plan.run(None, feeds),
            "exact decomposition (MatMulInteger + requantize)": lambda: s_exact.run(None, feeds),
            "f32 MatMul": lambda: s_f32.run(None, {"a": af}),
        },
        baseline="hand-written QLinearMatMul (u8 x i8 -> u8)",
        targets={"converted (the importer's plan)": ("<= 1.1x QLinearMatMul", 1.1)},
    )
    if b.wants(f"QuantizedDot {a.shape} x {w.shape}, |w| <= {wmax}"):
        profile(b, "converted", planned, feeds)
        profile(b, "exact decomposition", exact, feeds)
        profile(b, "hand-written QLinearMatMul", qlm, {"a": a})


def main(argv: list[str] | None = None) -> int:
    b = Bench("converted nGraph quantized ops under ONNX Runtime", argv, default_repeat=21)
    b.parser.add_argument("--profile", action="store_true", help="also print ONNX Runtime's profile of each model")
    b.parser.add_argument("--threads", type=int, default=0, help="intra-op threads per session (0: ORT's default)")
    global THREADS
    THREADS = b.args.threads
    rng = np.random.default_rng(11)
    for wmax in (127, 64):  # full-range i8 filters; 7-bit ones (ORT's u8 x i8 kernels are exact on them)
        conv_case(b, rng, wmax)
        dot_case(b, rng, wmax)
    return b.finish()


if __name__ == "__main__":
    sys.exit(main())
