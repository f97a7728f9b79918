#!/usr/bin/env python
"""Write the sample nGraph graphs to models/ (deterministic; each well under 1 MB).

- ``quantized_mlp.json`` (format of nGraph v0.29: op_version, attribute_visitor, string broadcasts):
  a two-layer MLP with an i8 per-channel weight (axes {1}) and a u8 weight quantized on two axes
  (axes {0, 1}) that a Reshape with ``input_order`` transposes into place; Dot, Add, Relu, Softmax.
- ``qdq_chain.json`` (v0.25: no op_version, ``autob``): Quantize -> Dequantize with a scale fed at run
  time, per-axis (round half away from zero), per-tensor with a scale computed in the graph (half to
  even), two axes (half up); Convert and integer Divide (floor), Maximum / Minimum.
- ``conv_block.json`` (v0.26: ``auto_broadcast`` objects): i8 per-output-channel conv weights,
  Convolution, Broadcast bias, Relu, MaxPool, AvgPool, Concat, Slice, Reshape, u8 per-tensor Dot, Tanh.
- ``quantized_conv_net.json`` (v0.26): Quantize -> QuantizedConvolutionBias (ReLU) -> QuantizedConvolutionRelu
  -> QuantizedConvolution (per-channel filter scale, i8) -> Dequantize (axes {1}); Reshape -> QuantizedDot ->
  Dequantize.

Usage: ``python scripts/make_models.py [--out models]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from onnx_dequant.fileio import atomic_path
from onnx_dequant.ngraph.writer import FunctionWriter, dumps

SEED = 20191105


def quantized_mlp(rng: np.random.Generator) -> FunctionWriter:
    w = FunctionWriter("quantized_mlp", era="v0.29")
    x = w.parameter("f32", [None, 64])
    # layer 1: i8 weight, one scale and zero point per output channel
    w1 = w.constant(rng.integers(-127, 128, (64, 32), dtype=np.int8))
    s1 = w.constant((rng.uniform(0.5, 2.0, 32) / 64).astype(np.float32))
    z1 = w.constant(rng.integers(-3, 4, 32, dtype=np.int8))
    w1f = w.op("Dequantize", w1, s1, z1, type="f32", axes=[1])
    h = w.op("Dot", x, w1f, reduction_axes_count=1)
    h = w.binary("Add", h, w.constant(rng.uniform(-0.5, 0.5, 32).astype(np.float32)))
    h = w.op("Relu", h)
    # layer 2: u8 weight stored as (groups=4, out=10, in_per_group=8), quantized per (group, out)
    w2 = w.constant(rng.integers(0, 256, (4, 10, 8), dtype=np.uint8))
    s2 = w.constant((rng.uniform(0.5, 2.0, (4, 10)) / 256).astype(np.float32))
    z2 = w.constant(rng.integers(120, 137, (4, 10), dtype=np.uint8))
    w2f = w.op("Dequantize", w2, s2, z2, type="f32", axes=[0, 1])
    w2m = w.op("Reshape", w2f, input_order=[0, 2, 1], output_shape=[32, 10])
    logits = w.op("Dot", h, w2m, reduction_axes_count=1)
    logits = w.binary("Add", logits, w.constant(rng.uniform(-0.1, 0.1, 10).astype(np.float32)))
    probs = w.op("Softmax", logits, softmax_axes=[1])
    w.result(probs)
    w.result(logits)
    return w


def qdq_chain(rng: np.random.Generator) -> FunctionWriter:
    w = FunctionWriter("qdq_chain", era="v0.25")
    x = w.parameter("f32", [4, 6, 8])
    s = w.parameter("f32", [6])  # the per-channel scale, fed at run time
    z = w.constant(rng.integers(-4, 5, 6, dtype=np.int8))
    q1 = w.op("Quantize", x, s, z, type="i8", axes=[1], round_mode=0)
    d1 = w.op("Dequantize", q1, s, z, type="f32", axes=[1])
    # a per-tensor scale computed from the fed one: 4 * s[0] (exact)
    s0 = w.op(
        "Reshape", w.op("Slice", s, lower_bounds=[0], upper_bounds=[1], strides=[1]), input_order=[0], output_shape=[]
    )
    s2 = w.binary("Multiply", s0, w.constant(np.float32(4.0)), broadcast="none")
    z2 = w.constant(np.uint8(128))
    q2 = w.op("Quantize", d1, s2, z2, type="u8", axes=[], round_mode=4)
    d2 = w.op("Dequantize", q2, s2, z2, type="f32", axes=[])
    # two axes, half up
    s3 = w.constant(rng.uniform(0.01, 0.05, (4, 8)).astype(np.float32))
    z3 = w.constant(rng.integers(-2, 3, (4, 8), dtype=np.int8))
    q3 = w.op("Quantize", d2, s3, z3, type="i8", axes=[0, 2], round_mode=2)
    d3 = w.op("Dequantize", q3, s3, z3, type="f32", axes=[0, 2])
    err = w.binary("Subtract", x, d3, broadcast="none")
    # integer side: widen, floor-divide by 3, clamp
    wide = w.op("Convert", q1, target_type="i32")
    three = w.op("Broadcast", w.constant(np.int32(3)), shape=[4, 6, 8], axes=[0, 1, 2])
    div = w.binary("Divide", wide, three, broadcast="none")
    lo = w.op("Broadcast", w.constant(np.int32(-20)), shape=[4, 6, 8], axes=[0, 1, 2])
    hi = w.op("Broadcast", w.constant(np.int32(20)), shape=[4, 6, 8], axes=[0, 1, 2])
    clamped = w.binary("Minimum", w.binary("Maximum", div, lo, broadcast="none"), hi, broadcast="none")
    for r in (q1, d3, err, clamped):
        w.result(r)
    return w


def conv_block(rng: np.random.Generator) -> FunctionWriter:
    w = FunctionWriter("conv_block", era="v0.26")
    img = w.parameter("f32", [1, 3, 12, 12])
    wq = w.constant(rng.integers(-127, 128, (8, 3, 3, 3), dtype=np.int8))
    ws = w.constant((rng.uniform(0.5, 2.0, 8) / 128).astype(np.float32))
    wz = w.constant(np.zeros(8, np.int8))
    wf = w.op("Dequantize", wq, ws, wz, type="f32", axes=[0])
    conv = w.op(
        "Convolution",
        img,
        wf,
        window_movement_strides=[1, 1],
        window_dilation_strides=[1, 1],
        padding_below=[1, 1],
        padding_above=[1, 1],
        data_dilation_strides=[1, 1],
    )
    bias = w.op(
        "Broadcast", w.constant(rng.uniform(-0.2, 0.2, 8).astype(np.float32)), shape=[1, 8, 12, 12], axes=[0, 2, 3]
    )
    act = w.op("Relu", w.binary("Add", conv, bias, broadcast="none"))
    mp = w.op(
        "MaxPool", act, window_shape=[2, 2], window_movement_strides=[2, 2], padding_below=[0, 0], padding_above=[0, 0]
    )
    ap = w.op(
        "AvgPool",
        mp,
        window_shape=[3, 3],
        window_movement_strides=[1, 1],
        padding_below=[1, 1],
        padding_above=[1, 1],
        include_padding_in_avg_computation=False,
    )
    cat = w.op("Concat", mp, ap, axis=1)
    mid = w.op("Slice", cat, lower_bounds=[0, 0, 1, 1], upper_bounds=[1, 16, 5, 5], strides=[1, 1, 1, 1])
    flat = w.op("Reshape", mid, input_order=[0, 1, 2, 3], output_shape=[1, 256])
    fq = w.constant(rng.integers(0, 256, (256, 10), dtype=np.uint8))
    fs = w.constant(np.float32(1.0 / 512))
    fz = w.constant(np.uint8(128))
    ff = w.op("Dequantize", fq, fs, fz, type="f32", axes=[])
    out = w.op("Tanh", w.op("Dot", flat, ff, reduction_axes_count=1))
    w.result(out)
    return w


def _conv_attrs(stride: int, pad: int) -> dict:
    return {
        "window_movement_strides": [stride, stride],
        "window_dilation_strides": [1, 1],
        "padding_below": [pad, pad],
        "padding_above": [pad, pad],
        "data_dilation_strides": [1, 1],
    }


def quantized_conv_net(rng: np.random.Generator) -> FunctionWriter:
    w = FunctionWriter("quantized_conv_net", era="v0.26")
    img = w.parameter("f32", [1, 3, 16, 16])
    q = w.op(
        "Quantize", img, w.constant(np.float32(1 / 64)), w.constant(np.uint8(128)), type="u8", axes=[], round_mode=4
    )
    # QuantizedConvolutionBias with ReLU: u8 out (bias i32, one requantization scale)
    w1 = w.constant(rng.integers(-127, 128, (8, 3, 3, 3), dtype=np.int8))
    b1 = w.constant(rng.integers(-4000, 4000, 8).astype(np.int32))
    c1 = w.op(
        "QuantizedConvolutionBias", q, w1, b1, w.constant(np.float32(0.0021)), with_relu=True, **_conv_attrs(1, 1)
    )
    # QuantizedConvolutionRelu, stride 2
    w2 = w.constant(rng.integers(-127, 128, (8, 8, 3, 3), dtype=np.int8))
    c2 = w.op("QuantizedConvolutionRelu", c1, w2, w.constant(np.float32(0.0013)), **_conv_attrs(2, 1))
    # QuantizedConvolution, per-output-channel filter scale, i8 out
    w3 = w.constant(rng.integers(-127, 128, (4, 8, 1, 1), dtype=np.int8))
    sf = w.constant((rng.uniform(0.5, 2.0, 4) / 256).astype(np.float32))
    c3 = w.op(
        "QuantizedConvolution",
        c2,
        w3,
        w.constant(np.float32(0.05)),
        w.constant(np.uint8(0)),
        sf,
        w.constant(np.zeros(4, np.int8)),
        w.constant(np.float32(0.1)),
        w.constant(np.int8(-3)),
        output_type="i8",
        input_axes=[],
        filter_axes=[0],
        output_axes=[],
        **_conv_attrs(1, 0),
    )
    ds = w.constant((rng.uniform(0.5, 2.0, 4) / 16).astype(np.float32))
    feat = w.op("Dequantize", c3, ds, w.constant(np.full(4, -3, np.int8)), type="f32", axes=[1])
    # QuantizedDot on the flattened u8 features
    flat = w.op("Reshape", c2, input_order=[0, 1, 2, 3], output_shape=[1, 512])
    w4 = w.constant(rng.integers(-127, 128, (512, 10), dtype=np.int8))
    pairs = (np.float32(0.05), np.uint8(0), np.float32(0.01), np.int8(0), np.float32(0.8), np.int8(0))
    d = w.op(
        "QuantizedDot",
        flat,
        w4,
        *[w.constant(v) for v in pairs],
        reduction_axes_count=1,
        output_type="i8",
        input0_axes=[],
        input1_axes=[],
        output_axes=[],
    )
    logits = w.op("Dequantize", d, w.constant(np.float32(0.8)), w.constant(np.int8(0)), type="f32", axes=[])
    w.result(feat)
    w.result(logits)
    return w


MODELS = {
    "quantized_mlp.json": quantized_mlp,
    "qdq_chain.json": qdq_chain,
    "conv_block.json": conv_block,
    "quantized_conv_net.json": quantized_conv_net,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "models"), help="output folder")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i, (name, make) in enumerate(MODELS.items()):
        text = dumps([make(np.random.default_rng(SEED + i))], indent=1) + "\n"
        with atomic_path(out / name) as tmp:
            tmp.write_text(text)
        print(f"wrote {out / name} ({len(text):,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
