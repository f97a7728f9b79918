#!/usr/bin/env python3
"""Checks, on the installed versions, each dependency fact that onnx_dequant works around.

Prints one line per fact: `holds` (the behaviour docs/ort-facts.md describes, as measured), or `changed`
(a newer release behaves otherwise; the project's results stay exact either way, but a workaround may no
longer be needed). `--json` prints the same for programs. Exit 0 always: a changed fact is news, not a failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper

FACTS = []


def fact(fn):
    FACTS.append(fn)
    return fn


def _session(model: onnx.ModelProto, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL, **config):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.log_severity_level = 4
    for k, v in config.items():
        so.add_session_config_entry(k, v)
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


@fact
def dql_28_has_no_kernel():
    """ONNX Runtime has no kernel for DequantizeLinear-28 (onnx 1.23's default opset)."""
    m = _model(
        [helper.make_node("DequantizeLinear", ["x", "s"], ["y"])],
        [_vi("x", TP.INT8, [4])],
        [_vi("y", TP.FLOAT, [4])],
        [helper.make_tensor("s", TP.FLOAT, [], [0.5])],
        opset=28,
    )
    try:
        _session(m)
    except Exception:
        return True
    return False


@fact
def int8_dql_then_reshape_fails_at_opset_21():
    """At opsets 21+, an int8 per-tensor DQL with a zero point, then Reshape, fails to load at the default level."""
    m = _model(
        [
            helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"]),
            helper.make_node("Reshape", ["d", "shape"], ["y"]),
        ],
        [_vi("x", TP.INT8, [4, 6])],
        [_vi("y", TP.FLOAT, [24])],
        [
            helper.make_tensor("s", TP.FLOAT, [], [0.5]),
            helper.make_tensor("z", TP.INT8, [], [3]),
            helper.make_tensor("shape", TP.INT64, [1], [24]),
        ],
    )
    try:
        _session(m)
    except Exception:
        return True
    return False


@fact
def int8_dql_without_zero_point_then_reshape_is_wrong_at_opset_13():
    """At opsets 13-20, an int8 DQL with a one-element scale and no zero point, then Reshape, clamps negatives to 0."""
    m = _model(
        [
            helper.make_node("DequantizeLinear", ["x", "s"], ["d"]),
            helper.make_node("Reshape", ["d", "shape"], ["y"]),
        ],
        [_vi("x", TP.INT8, [4])],
        [_vi("y", TP.FLOAT, [4])],
        [helper.make_tensor("s", TP.FLOAT, [], [0.5]), helper.make_tensor("shape", TP.INT64, [1], [4])],
        opset=13,
    )
    (y,) = _session(m).run(None, {"x": np.array([-4, -1, 0, 3], np.int8)})
    return bool(y[0] != -2.0)


def _int32_dql_then(op: str, opset: int, zero_point: bool) -> onnx.ModelProto:
    """An int32 DequantizeLinear with a one-element scale (and a zero zero point), then ``op``."""
    inits = [helper.make_tensor("s", TP.FLOAT, [], [0.5]), helper.make_tensor("shape", TP.INT64, [1], [4])]
    if zero_point:
        inits.append(helper.make_tensor("z", TP.INT32, [], [0]))
    after = (
        helper.make_node("Reshape", ["d", "shape"], ["y"])
        if op == "Reshape"
        else helper.make_node("Transpose", ["d"], ["y"], perm=[1, 0])
    )
    g = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["x", "s", "z"] if zero_point else ["x", "s"], ["d"]), after],
        "g",
        [_vi("x", TP.INT32, [4] if op == "Reshape" else [2, 2])],
        [_vi("y", TP.FLOAT, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _fails_to_load(model: onnx.ModelProto) -> bool:
    try:
        _session(model)
    except Exception:
        return True
    return False


@fact
def int32_dql_then_reshape_fails_at_opset_21():
    """At opset 21+, an int32 per-tensor DQL, then Reshape, fails to load (QDQ propagation; no int32 QuantizeLinear)."""
    return _fails_to_load(_int32_dql_then("Reshape", 21, zero_point=False))


@fact
def int32_dql_then_reshape_clamps_at_opset_13():
    """At opsets 13-20, an int32 per-tensor DQL without a zero point, then Reshape, clamps to [0, 255] * scale."""
    (y,) = _session(_int32_dql_then("Reshape", 13, zero_point=False)).run(
        None, {"x": np.array([-4, -1, 0, 300], np.int32)}
    )
    return bool(y[0] == 0.0 and y[3] == 127.5)


@fact
def int32_dql_with_zero_point_then_transpose_fails():
    """An int32 DQL with a zero point (zero too, any opset), then Transpose, fails to load at the default level."""
    return _fails_to_load(_int32_dql_then("Transpose", 13, zero_point=True)) and _fails_to_load(
        _int32_dql_then("Transpose", 21, zero_point=True)
    )


def optimized_dqls(model: onnx.ModelProto) -> int:
    """DequantizeLinear nodes in ORT's optimized graph (default level)."""
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.optimized_model_filepath = str(Path(d) / "opt.onnx")
        so.log_severity_level = 4
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return sum(n.op_type == "DequantizeLinear" for n in onnx.load(so.optimized_model_filepath).graph.node)


@fact
def dql_copied_per_reader_not_past_flatten():
    """A DQL read by two nodes is copied once per reader (both run); after Flatten + Reshape back, it runs once."""

    def two_readers(barrier: bool) -> onnx.ModelProto:
        nodes = [helper.make_node("DequantizeLinear", ["x", "s"], ["d" if barrier else "y"])]
        if barrier:
            nodes += [
                helper.make_node("Flatten", ["d"], ["f"], axis=0),
                helper.make_node("Reshape", ["f", "shape"], ["y"]),
            ]
        nodes += [helper.make_node("Relu", ["y"], ["a"]), helper.make_node("Sigmoid", ["y"], ["b"])]
        inits = [helper.make_tensor("s", TP.FLOAT, [], [0.5]), helper.make_tensor("shape", TP.INT64, [2], [4, 4])]
        outs = [_vi("a", TP.FLOAT, [4, 4]), _vi("b", TP.FLOAT, [4, 4])]
        return _model(nodes, [_vi("x", TP.INT8, [4, 4])], outs, inits)

    return optimized_dqls(two_readers(False)) == 2 and optimized_dqls(two_readers(True)) == 1


@fact
def int32_dql_wraps():
    """ORT's int32 DequantizeLinear subtracts in int32 and wraps: (2^31-1) - (-2^31) gives -1."""
    m = _model(
        [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])],
        [_vi("x", TP.INT32, [1])],
        [_vi("y", TP.FLOAT, [1])],
        [helper.make_tensor("s", TP.FLOAT, [], [1.0]), helper.make_tensor("z", TP.INT32, [], [-(2**31)])],
    )
    (y,) = _session(m).run(None, {"x": np.array([2**31 - 1], np.int32)})
    return bool(y[0] == -1.0)


@fact
def cast_f64_to_f16_rounds_twice():
    """ORT's Cast float64 -> float16 goes through float32 (two roundings)."""
    m = _model(
        [helper.make_node("Cast", ["x"], ["y"], to=TP.FLOAT16)], [_vi("x", TP.DOUBLE, [1])], [_vi("y", TP.FLOAT16, [1])]
    )
    value = 1.0 + 2.0**-11 + 2.0**-40  # just above an f16 tie; f32 rounds it onto the tie, which then goes even
    (y,) = _session(m).run(None, {"x": np.array([value])})
    return bool(float(y[0]) == 1.0)


@fact
def where_loses_negative_zero():
    """ORT's Where returns +0 when it selects -0 (onnxruntime #32191)."""
    m = _model(
        [helper.make_node("Where", ["c", "a", "b"], ["y"])],
        [_vi("c", TP.BOOL, [1]), _vi("a", TP.FLOAT, [1]), _vi("b", TP.FLOAT, [1])],
        [_vi("y", TP.FLOAT, [1])],
    )
    (y,) = _session(m).run(
        None, {"c": np.array([True]), "a": np.array([-0.0], np.float32), "b": np.array([1.0], np.float32)}
    )
    return not bool(np.signbit(y[0]))


@fact
def no_int4_reshape():
    """ORT has no Reshape kernel for int4."""
    m = _model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [],
        [_vi("y", TP.INT4, [4])],
        [
            helper.make_tensor("x", TP.INT4, [2, 2], [1, -2, 3, -4]),
            helper.make_tensor("shape", TP.INT64, [1], [4]),
        ],
    )
    try:
        _session(m, ort.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, {})
    except Exception:
        return True
    return False


@fact
def no_int4_shape():
    """ORT has no Shape kernel for int4 (a form over symbolic dims reads no 4-bit input's Shape)."""
    m = _model(
        [helper.make_node("Cast", ["x8"], ["x"], to=TP.INT4), helper.make_node("Shape", ["x"], ["y"])],
        [_vi("x8", TP.INT8, ["n"])],
        [_vi("y", TP.INT64, [1])],
    )
    try:
        _session(m, ort.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, {"x8": np.ones(3, np.int8)})
    except Exception:
        return True
    return False


@fact
def blocked_dql_open_block_needs_an_empty_scale_for_an_empty_axis():
    """A blocked DequantizeLinear with a block longer than its axis runs with a scale of one element there,
    and over an empty axis needs a scale of none (ceil(0 / block_size)): the open block's Slice."""

    def run(rows: int, scale_rows: int) -> bool:
        n = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=0, block_size=1 << 40)
        m = _model([n], [_vi("x", TP.INT8, ["r", 4]), _vi("s", TP.FLOAT, ["q", 4])], [_vi("y", TP.FLOAT, None)])
        feed = {"x": np.ones((rows, 4), np.int8), "s": np.full((scale_rows, 4), 0.5, np.float32)}
        try:
            return _session(m).run(None, feed)[0].shape == (rows, 4)
        except Exception:
            return False

    return run(5, 1) and run(1, 1) and run(0, 0) and not run(0, 1)


@fact
def matmulnbits_fusion_is_lossy():
    """ORT fuses a constant int8 DQL -> MatMul into MatMulNBits, which by default quantizes activations to int8."""
    rng = np.random.default_rng(0)
    k, n = 64, 32
    w = rng.integers(-128, 128, (k, n), dtype=np.int8)
    s = rng.uniform(0.01, 0.02, n).astype(np.float32)
    m = _model(
        [
            helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=1),
            helper.make_node("MatMul", ["a", "wf"], ["y"]),
        ],
        [_vi("a", TP.FLOAT, [4, k])],
        [_vi("y", TP.FLOAT, [4, n])],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(s, "s")],
    )
    a = rng.standard_normal((4, k)).astype(np.float32)
    (fused,) = _session(m).run(None, {"a": a})
    (plain,) = _session(m, ort.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, {"a": a})
    return bool(np.abs(fused - plain).max() > 1e-4 * np.abs(plain).max())


@fact
def reference_evaluator_lacks_early_dql():
    """onnx's ReferenceEvaluator has DequantizeLinear kernels only from version 19."""
    from onnx.reference import ReferenceEvaluator

    m = _model(
        [helper.make_node("DequantizeLinear", ["x", "s"], ["y"])],
        [_vi("x", TP.INT8, [2])],
        [_vi("y", TP.FLOAT, [2])],
        [helper.make_tensor("s", TP.FLOAT, [], [0.5])],
        opset=17,
    )
    try:
        ReferenceEvaluator(m).run(None, {"x": np.array([1, 2], np.int8)})
    except Exception:
        return True
    return False


@fact
def ml_dtypes_f64_to_bf16_rounds_twice():
    """ml_dtypes casts float64 -> bf16 through float32 (two roundings); 0.7 rounds once."""
    value = np.array([2.0**25 + 2.0**17 + 1])
    return bool(float(value.astype(ml_dtypes.bfloat16)[0]) == 2.0**25)


@fact
def lower_rank_operand_against_trailing_one_is_slow():
    """ORT's Mul broadcasts a lower-rank scalar element by element against an input whose last dim is 1
    (f64 (3, 437226, 1) times (): 10x or more the same Mul with the scalar shaped (1, 1, 1))."""
    import time

    def timed(s_shape):
        x = np.ones((3, 437226, 1))
        m = _model(
            [helper.make_node("Mul", ["x", "s"], ["y"])],
            [_vi("x", TP.DOUBLE, list(x.shape)), _vi("s", TP.DOUBLE, list(s_shape))],
            [_vi("y", TP.DOUBLE, None)],
        )
        sess, feeds = _session(m), {"x": x, "s": np.ones(s_shape)}
        sess.run(None, feeds)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            best = min(best, time.perf_counter() - t0)
        return best

    return bool(timed(()) > 4 * timed((1, 1, 1)))


@fact
def bf16_rounding_in_integer_ops_is_slower_than_cast():
    """ORT has BitCast (opset 26), but rounding float32 to bf16 bits in its integer ops (BitCast, BitShift,
    BitwiseAnd, Add, Cast to uint16) takes 2x or more a Cast to bf16 (even one followed by a BitCast to
    uint16), with the same bits."""
    import time

    n = 1 << 20
    u32 = lambda name, v: helper.make_tensor(name, TP.UINT32, [], [v])  # noqa: E731
    chain = [
        helper.make_node("BitCast", ["x"], ["u"], to=TP.UINT32),
        helper.make_node("BitShift", ["u", "k16"], ["a"], direction="RIGHT"),
        helper.make_node("BitwiseAnd", ["a", "k1"], ["b"]),
        helper.make_node("Add", ["u", "b"], ["c"]),
        helper.make_node("Add", ["c", "k7fff"], ["d"]),
        helper.make_node("BitShift", ["d", "k16"], ["e"], direction="RIGHT"),
        helper.make_node("Cast", ["e"], ["y"], to=TP.UINT16),
    ]
    cast = [
        helper.make_node("Cast", ["x"], ["b"], to=TP.BFLOAT16),
        helper.make_node("BitCast", ["b"], ["y"], to=TP.UINT16),
    ]
    x = (np.random.default_rng(0).standard_normal(n) * 1e3).astype(np.float32)
    sessions = [
        _session(
            _model(nodes, [_vi("x", TP.FLOAT, [n])], [_vi("y", TP.UINT16, [n])], inits, opset=26),
            ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        )
        for nodes, inits in ((cast, ()), (chain, (u32("k16", 16), u32("k1", 1), u32("k7fff", 0x7FFF))))
    ]
    results = [s.run(None, {"x": x})[0] for s in sessions]
    if not np.array_equal(results[0], results[1]):
        return False
    best = [float("inf")] * 2
    for _ in range(5):
        for i, s in enumerate(sessions):
            t0 = time.perf_counter()
            s.run(None, {"x": x})
            best[i] = min(best[i], time.perf_counter() - t0)
    return bool(best[1] > 2 * best[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    versions = {
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
        "ml_dtypes": ml_dtypes.__version__,
        "numpy": np.__version__,
    }
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in FACTS:
            try:
                holds = fn()
                results.append({"fact": fn.__name__, "holds": holds, "what": fn.__doc__})
            except Exception as e:  # a fact that cannot be checked here is reported, not fatal
                results.append({"fact": fn.__name__, "holds": None, "what": fn.__doc__, "error": str(e)[:200]})
    if args.json:
        json.dump({"versions": versions, "facts": results}, sys.stdout, indent=2)
        print()
    else:
        print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
        for r in results:
            state = {True: "holds", False: "changed", None: "unknown"}[r["holds"]]
            print(f"{state:8} {r['fact']}: {r['what']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
