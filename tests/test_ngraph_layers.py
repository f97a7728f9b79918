"""GroupConvolution, LayerNorm, MVN, Interpolate, BinaryConvolution, DeformableConvolution, CropAndResize: bad input
(a DequantizeError naming the node and nGraph's rule) and behaviour the golden cases (tests/golden/ops_layers*)
do not pin down."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnx_dequant as odq
from onnx_dequant.ngraph.writer import FunctionWriter, Ref, dumps


def _convert(w: FunctionWriter) -> onnx.ModelProto:
    model = odq.ngraph.convert(dumps([w]))
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(w: FunctionWriter, *feeds: np.ndarray) -> list[np.ndarray]:
    model = _convert(w)
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {i.name: x for i, x in zip(model.graph.input, feeds)})


def _refused(w: FunctionWriter, match: str) -> odq.DequantizeError:
    with pytest.raises(odq.DequantizeError) as info:
        odq.ngraph.convert(dumps([w]))
    assert match in str(info.value), str(info.value)
    assert info.value.node is not None and info.value.node in str(info.value)
    return info.value


def _one(op: str, shapes, *, et="f32", version: int = 0, era: str = "v0.26", **attrs) -> FunctionWriter:
    w = FunctionWriter(era=era)
    ps = [w.parameter(et, s) for s in shapes]
    w.result(w.op(op, *ps, version=version, **attrs))
    return w


# ---------------------------------------------------------------- GroupConvolution

V0 = dict(
    window_movement_strides=[1, 1],
    window_dilation_strides=[1, 1],
    padding_below=[0, 0],
    padding_above=[0, 0],
    data_dilation_strides=[1, 1],
)
V1 = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[0, 0], pads_end=[0, 1], auto_pad="EXPLICIT")


@pytest.mark.parametrize(
    ("shapes", "version", "attrs", "match"),
    [
        ([[1, 6, 5, 5], [4, 2, 3, 3]], 0, dict(groups=4, **V0), "Data channels not a multiple of group size"),
        ([[1, 6, 5, 5], [5, 2, 3, 3]], 0, dict(groups=3, **V0), "# Filters not a multiple of group size"),
        ([[1, 6, 5, 5], [6, 3, 3, 3]], 0, dict(groups=3, **V0), "Incorrect number of channels per filter"),
        ([[1, 6, 5, 5], [6, 2, 3, 3]], 0, dict(groups=0, **V0), "'groups' must be an integer in [1,"),
        ([[1, 6, 5, 5], [6, 2, 3, 3]], 1, V1, "Filters shape {6,2,3,3} must have rank 5"),
        ([[1, 6, 5, 5], [3, 2, 3, 3, 3]], 1, V1, "Incorrect number of channels per filter"),
        ([[1, 6, 5, 5], [3, 2, 2, 7, 3]], 1, V1, "Window after dilation has dimension (7) larger than"),
        (
            [[1, 6, 5], [3, 2, 2, 3]],
            0,
            {**V0, "window_movement_strides": [1]},
            "'window_dilation_strides' must have 1 entries",
        ),
    ],
)
def test_group_convolution_rules(shapes, version, attrs, match):
    _refused(_one("GroupConvolution", shapes, version=version, era="v0.29" if version else "v0.26", **attrs), match)


def test_group_convolution_element_types():
    w = FunctionWriter()
    w.result(
        w.op("GroupConvolution", w.parameter("f32", [1, 2, 3, 3]), w.parameter("f64", [2, 1, 1, 1]), groups=2, **V0)
    )
    _refused(w, "Element types for data batch and filters do not match")
    _refused(_one("GroupConvolution", [[1, 2, 3, 3], [2, 1, 1, 1]], et="i32", groups=2, **V0), "real types only")


def test_group_convolution_is_one_conv_with_group():
    """Depthwise (groups == channels), op_version 1: one Conv node with ``group``, the filters reshaped."""
    w = _one("GroupConvolution", [[1, 4, 3, 3], [4, 1, 1, 2, 2]], version=1, era="v0.29", **V1)
    model = _convert(w)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == 1
    assert {a.name: onnx.helper.get_attribute_value(a) for a in convs[0].attribute}["group"] == 4
    x = np.arange(36, dtype=np.float32).reshape(1, 4, 3, 3)
    f = np.ones((4, 1, 1, 2, 2), np.float32)
    (y,) = _run(w, x, f)
    padded = np.pad(x, [(0, 0), (0, 0), (0, 0), (0, 1)])
    want = sum(padded[:, :, i : i + 2, j : j + 3] for i in range(2) for j in range(2))
    assert y.shape == (1, 4, 2, 3) and np.array_equal(y, want)


# ---------------------------------------------------------------- LayerNorm


def _layer_norm(shape, begin, affine=None, **kw) -> FunctionWriter:
    w = FunctionWriter()
    ps = [w.parameter("f32", shape)] + [w.parameter("f32", s) for s in affine or ()]
    attrs = dict(keep_stats=False, use_affine=affine is not None, epsilon=1e-5, begin_norm_axis=begin) | kw
    ln = w.op("LayerNorm", *ps, **attrs)
    for i in range(3 if attrs["keep_stats"] else 1):
        w.result(Ref(ln, i))
    return w


@pytest.mark.parametrize(
    ("shape", "begin", "affine", "match"),
    [
        ([2, 3], 2, None, "begin_norm_axis is out of range"),
        ([2, 3], -3, None, "begin_norm_axis is out of range"),
        ([2, 3, 4], 1, [[3, 4], [12]], "Scale and/or bias rank is incorrect"),
        ([2, 3, 4], 1, [[3, 4, 1], [3, 4, 1]], "Scale and/or bias rank is incorrect"),
        ([2, 3, 4], 1, [[4, 3], [4, 3]], "Scale shape {4,3} must be the normalized axes' {3,4} or {12}"),
        ([2, 3, 4], 1, [[12], [11]], "Bias shape {11} must be"),
    ],
)
def test_layer_norm_rules(shape, begin, affine, match):
    _refused(_layer_norm(shape, begin, affine), match)


def test_layer_norm_types_and_inputs():
    w = FunctionWriter()
    w.result(w.op("LayerNorm", w.parameter("i32", [2, 3]), keep_stats=False, use_affine=False, epsilon=0.0,
                  begin_norm_axis=1))  # fmt: skip
    _refused(w, "Argument element type must be f16, bf16, f32, f64 or dynamic (got i32).")
    _refused(_layer_norm([2, 3], 1, [[3], [3]], use_affine=False), "LayerNorm takes 1 input, got 3")
    _refused(_layer_norm([2, 3], 1, None, epsilon="small"), "'epsilon' must be a number")


def test_layer_norm_negative_axis_flattened_scale_and_stats():
    """begin_norm_axis -2 with a flattened scale (nGraph's decomposition offsets the shape by the negative
    attribute there, undefined behaviour: the normalized axes are meant); keep_stats gives mean and variance."""
    w = _layer_norm([2, 3, 4], -2, [[12], [12]], keep_stats=True)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    s, b = rng.standard_normal(12).astype(np.float32), rng.standard_normal(12).astype(np.float32)
    y, mean, var = _run(w, x, s, b)
    m = x.mean(axis=(1, 2), dtype=np.float64)
    v = ((x - m[:, None, None]) ** 2).mean(axis=(1, 2))
    want = (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5) * s.reshape(3, 4) + b.reshape(3, 4)
    assert mean.shape == var.shape == (2,)
    np.testing.assert_allclose(mean, m, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(var, v, rtol=1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- MVN


def test_mvn_rules():
    _refused(_one("MVN", [[2, 3]], reduction_axes=[2], normalize_variance=True, eps=1e-9), "Reduction axis (2) is out")
    _refused(_one("MVN", [[2, 3]], et="i32", reduction_axes=[1], normalize_variance=True, eps=1e-9), "real types only")
    _refused(_one("MVN", [[2, 3]], reduction_axes=[1], normalize_variance=True, eps=None), "MVN has no 'eps'")
    _refused(_one("MVN", [[2, 3]], reduction_axes=[1], normalize_variance=2, eps=0.1), "'normalize_variance' must be")


def test_mvn_epsilon_after_the_square_root():
    """eps is added to the standard deviation, not to the variance: a constant row gives 0 / eps = 0, and a row
    of two values +-1 gives +-1 / (1 + eps)."""
    w = _one("MVN", [[2, 2]], reduction_axes=[1], normalize_variance=True, eps=0.5)
    (y,) = _run(w, np.array([[3, 3], [-1, 1]], np.float32))
    assert np.array_equal(y, np.array([[0, 0], [-1 / 1.5, 1 / 1.5]], np.float32))


# ---------------------------------------------------------------- Interpolate


def _interp(shape, sizes, *, et="f32", size_type="i64", **attrs) -> FunctionWriter:
    w = FunctionWriter(era="v0.29")
    p = w.parameter(et, shape)
    c = w.constant(np.array(sizes, odq.dtypes.parse(size_type).numpy))
    full = {"attrs.axes": [2, 3], "attrs.mode": "nearest", "attrs.align_corners": False} | attrs
    w.result(w.op("Interpolate", p, c, attribute_visitor=True, **{k: v for k, v in full.items() if v is not None}))
    return w


@pytest.mark.parametrize(
    ("sizes", "attrs", "kw", "match"),
    [
        ([4, 4], {"attrs.mode": "area"}, {}, "mode 'area' has no ONNX counterpart"),
        ([4, 4], {"attrs.antialias": True}, {}, "antialias has no ONNX counterpart"),
        ([4, 4], {"attrs.mode": "bilinear"}, {}, "'mode' must be one of nearest, linear, cubic, area"),
        ([4, 4], {"attrs.axes": [2, 4]}, {}, "Interpolation axis (4) must be less than the image rank (4)"),
        ([4], {}, {}, "output shape [4] must have one size per interpolated axis [2, 3]"),
        ([4, 0], {}, {}, "Interpolate to size 0 on axis 3"),
        ([4, 4], {"attrs.pads_begin": [1, 1]}, {}, "'pads_begin' must have 4 entries"),
        ([4, 4], {}, {"size_type": "f32"}, "output shape must be an integral number."),
        ([4, 4], {"attrs.mode": "linear"}, {"et": "i32"}, "mode 'linear' on i32 is not supported"),
        ([4, 4], {"attrs.axes": None, "axes": None}, {}, "Interpolate has no 'attrs.axes' attribute"),
    ],
)
def test_interpolate_rules(sizes, attrs, kw, match):
    _refused(_interp([1, 2, 3, 3], sizes, **attrs, **kw), match)


def test_interpolate_sizes_must_be_a_constant():
    w = FunctionWriter()
    w.result(w.op("Interpolate", w.parameter("f32", [1, 1, 2, 2]), w.parameter("i64", [2]), axes=[2, 3], mode="linear"))
    _refused(w, "Interpolate needs its output shape (input 1) as a Constant")


def test_interpolate_plain_attribute_names_and_nearest_rounding():
    """Attributes without the ``attrs.`` prefix; nearest rounds down on the growing axis, up on the shrinking
    one (Resize-10): 2 -> 3 reads rows 0, 0, 1; 5 -> 2 reads columns 0, 3 (ceil(2.5))."""
    w = FunctionWriter()
    c = w.constant(np.array([3, 2], np.int32))
    w.result(w.op("Interpolate", w.parameter("f32", [1, 1, 2, 5]), c, axes=[2, 3], mode="nearest", align_corners=False))
    x = np.arange(10, dtype=np.float32).reshape(1, 1, 2, 5)
    (y,) = _run(w, x)
    assert np.array_equal(y, x[:, :, [0, 0, 1]][:, :, :, [0, 3]])


# ---------------------------------------------------------------- BinaryConvolution, DeformableConvolution

BIN = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], auto_pad="EXPLICIT", pad_value=0.0)


def _binary(xs, fs, fet="f32", **attrs) -> FunctionWriter:
    w = FunctionWriter(era="v0.29")
    p = w.parameter("f32", xs)
    f = w.constant(np.ones(fs, odq.dtypes.parse(fet).numpy))
    w.result(
        w.op("BinaryConvolution", p, f, version=1, attribute_visitor=True, **({"mode": "xnor-popcount"} | BIN | attrs))
    )
    return w


@pytest.mark.parametrize(
    ("xs", "fs", "attrs", "match"),
    [
        ([1, 2, 4, 4], [3, 2, 2, 2], {"mode": "xor"}, "'mode' must be xnor-popcount"),
        ([1, 2, 4, 4], [3, 3, 2, 2], {}, "Data batch channel count (2) does not match filter input channel count (3)"),
        ([1, 2, 4, 4], [3, 2, 2, 2], {"pad_value": "zero"}, "'pad_value' must be a number"),
        ([1, 2, 4, 4], [3, 2, 5, 2], {}, "Window after dilation has dimension (5) larger than"),
    ],
)
def test_binary_convolution_rules(xs, fs, attrs, match):
    _refused(_binary(xs, fs, **attrs), match)


def test_binary_convolution_counts_matches():
    """All-ones filters: a window of ones gives +taps, of zeros -taps, a value neither 0 nor 1 counts as a
    mismatch, padding reads pad_value (1: a match)."""
    w = _binary([1, 1, 2, 2], [1, 1, 2, 2], pads_begin=[0, 0], pads_end=[0, 1], pad_value=1.0)
    (y,) = _run(w, np.array([[[[1, 1], [1, 0.5]]]], np.float32))
    assert np.array_equal(y, np.array([[[[2 * 3 - 4, 2 * 3 - 4]]]], np.float32))


def _deform(xs, offs, fs, **attrs) -> FunctionWriter:
    w = FunctionWriter(era="v0.29")
    ps = [w.parameter("f32", s) for s in (xs, offs, fs)]
    base = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], auto_pad="EXPLICIT", group=1)
    w.result(
        w.op(
            "DeformableConvolution", *ps, version=1, attribute_visitor=True, **(base | {"deformable_group": 1} | attrs)
        )
    )
    return w


@pytest.mark.parametrize(
    ("shapes", "attrs", "match"),
    [
        (([1, 2, 4, 4], [1, 6, 3, 3], [1, 2, 2, 2]), {}, "Offsets shape {1,6,3,3} must be {1,8,3,3}"),
        (([1, 2, 4, 4], [1, 8, 3, 3], [1, 2, 2, 2]), {"group": 2}, "evenly divisible by the 'group' value"),
        (([1, 3, 4, 4], [1, 8, 3, 3], [1, 3, 2, 2]), {"deformable_group": 2}, "evenly divisible by 'deformable_group'"),
        (([1, 2, 4, 4, 4], [1, 8, 3, 3, 3], [1, 2, 2, 2, 2]), {}, "DeformableConvolution is 2-D"),
        (([1, 2, 4, 4], [1, 8, 3, 3], [1, 2, 2, 2]), {"pads_begin": [-1, 0]}, "negative padding is not supported"),
    ],
)
def test_deformable_convolution_rules(shapes, attrs, match):
    _refused(_deform(*shapes, **attrs), match)


def test_deformable_convolution_needs_opset_19():
    with pytest.raises(odq.DequantizeError, match="opset 19 or later"):
        odq.ngraph.convert(dumps([_deform([1, 1, 3, 3], [1, 8, 2, 2], [1, 1, 2, 2])]), opset=17)


def test_deformable_convolution_border_rule():
    """A 1x1 filter of weight 1: the output is the data sampled at (row + dy, col + dx). Inside the last row and
    column nGraph repeats them (2.5 -> row 2 whole); outside [0, size) the tap reads nothing (-0.5 -> 0)."""
    w = _deform([1, 1, 3, 3], [1, 2, 3, 3], [1, 1, 1, 1])
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    off = np.zeros((1, 2, 3, 3), np.float32)
    off[0, 0, 0] = [2.5, -0.5, 1.0]  # dy for outputs (0, 0), (0, 1), (0, 2)
    off[0, 1, 0] = [0.0, 0.0, -0.75]  # dx
    (y,) = _run(w, x, off, np.ones((1, 1, 1, 1), np.float32))
    want = x.copy()
    want[0, 0, 0] = [6.0, 0.0, 0.75 * 4 + 0.25 * 5]
    assert np.array_equal(y, want)


# ---------------------------------------------------------------- CropAndResize


def _crop(image=(1, 4, 4, 2), boxes=(2, 4), ind=(2,), size=(2, 2), *, bet="f32", iet="i32", set_="i32", **attrs):
    w = FunctionWriter()
    ps = [w.parameter("f32", list(image)), w.parameter(bet, list(boxes)), w.parameter(iet, list(ind))]
    c = w.constant(np.array(size, odq.dtypes.parse(set_).numpy))
    full = {"resize_method": "bilinear", "extrapolation_value": 0.0} | attrs
    w.result(w.op("CropAndResize", *ps, c, **full))
    return w


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"resize_method": "unspecified"}, "Resize method not specified"),
        ({"resize_method": "bicubic"}, "'resize_method' must be bilinear or nearest"),
        ({"image": (4, 4, 2)}, "Image must be NHWC"),
        ({"boxes": (2, 4, 1)}, "Boxes must be 2d"),
        ({"boxes": (2, 3)}, "Second boxes dimension must be 4"),
        ({"bet": "i32"}, "Boxes must be real values in [0, 1]"),
        ({"ind": (2, 1)}, "Box indices must have rank 1"),
        ({"iet": "f32"}, "Box indices must be integers"),
        ({"set_": "f32"}, "crops_size must be integral"),
        ({"size": (2, 2, 2)}, "crop_size must be a vector of length 2"),
        ({"extrapolation_value": "x"}, "'extrapolation_value' must be a number"),
    ],
)
def test_crop_and_resize_rules(kw, match):
    _refused(_crop(**kw), match)


def test_crop_and_resize_nearest_rounds_half_away_from_zero():
    """A 1 x 3 row cropped to 5 points over x in [0, 1]: positions 0, 0.5, 1, 1.5, 2 read columns 0, 1, 1, 2, 2
    (roundf; ONNX Round would give 0, 0, 1, 2, 2)."""
    w = _crop((1, 1, 3, 1), (1, 4), (1,), (1, 5), resize_method="nearest")
    image = np.array([10, 20, 30], np.float32).reshape(1, 1, 3, 1)
    (y,) = _run(w, image, np.array([[0, 0, 0, 1]], np.float32), np.array([0], np.int32))
    assert np.array_equal(y.reshape(-1), np.float32([10, 20, 20, 30, 30]))


# ---------------------------------------------------------------- every op: odd attributes raise DequantizeError only


def test_odd_attributes_raise_dequantize_error_only():
    graphs = [
        _one("GroupConvolution", [[1, 4, 3, 3], [2, 2, 2, 1, 1]], version=1, era="v0.29", **V1),
        _one("GroupConvolution", [[1, 4, 3, 3], [4, 2, 1, 1]], groups=2, **V0),
        _layer_norm([2, 3, 4], 1, [[3, 4], [3, 4]], keep_stats=True),
        _one("MVN", [[2, 3, 4]], reduction_axes=[0, 2], normalize_variance=True, eps=0.1),
        _interp([1, 2, 3, 3], [4, 2], **{"attrs.pads_begin": [0, 0, 1, 1], "attrs.pads_end": [0, 0, 0, 1]}),
        _binary([1, 2, 4, 4], [3, 2, 2, 2], fet="boolean"),
        _deform([1, 2, 4, 4], [1, 8, 3, 3], [1, 2, 2, 2]),
        _crop(resize_method="nearest"),
    ]
    junk = [None, True, -1, 2**70, 1.5, "x", [], [-1], [1, 2, 3, 4, 5], {"a": 1}]
    for w in graphs:
        doc = [w.to_json()]
        target = next(o for o in doc[0]["ops"] if o["op"] not in ("Parameter", "Result"))
        for key in [k for k in target if k not in ("name", "op", "inputs", "outputs", "op_version")]:
            for v in junk:
                bad = json.loads(json.dumps(doc))
                op = next(o for o in bad[0]["ops"] if o["name"] == target["name"])
                op[key] = v
                try:
                    odq.ngraph.convert(json.dumps(bad))
                except odq.DequantizeError:
                    pass


# ---------------------------------------------------------------- ConvolutionBias, ConvolutionBiasAdd


@pytest.mark.parametrize(
    ("op", "shapes", "types", "match"),
    [
        (
            "ConvolutionBias",
            [[1, 2, 5, 5], [3, 2, 3, 3], [3]],
            ["f32", "f32", "f64"],
            "Element types for bias and filters do not match (bias element type: f64, filters element type: f32)",
        ),  # noqa: E501
        (
            "ConvolutionBias",
            [[1, 2, 5, 5], [3, 2, 3, 3], [3, 1]],
            ["f32"] * 3,
            "Bias must have a rank of 1 (bias_shape: {3,1})",
        ),  # noqa: E501
        (
            "ConvolutionBias",
            [[1, 2, 5, 5], [3, 2, 3, 3], [4]],
            ["f32"] * 3,
            "Bias channel count (4) does not match filter output channel count (3)",
        ),  # noqa: E501
        ("ConvolutionBias", [[1, 2, 5, 5], [3, 2, 3, 3]], ["f32"] * 2, "takes 3 inputs, got 2"),
        (
            "ConvolutionBiasAdd",
            [[1, 2, 5, 5], [3, 2, 3, 3], [3], [1, 3, 4, 3]],
            ["f32"] * 4,
            "Argument shapes are inconsistent",
        ),  # noqa: E501
        ("ConvolutionBiasAdd", [[1, 2, 5, 5], [3, 2, 3, 3], [3]], ["f32"] * 3, "takes 4 inputs, got 3"),
    ],
)
def test_convolution_bias_bad_input(op, shapes, types, match):
    w = FunctionWriter(era="v0.26")
    ps = [w.parameter(t, s) for t, s in zip(types, shapes)]
    w.result(w.op(op, *ps, **V0))
    _refused(w, match)


@pytest.mark.parametrize("op", ["ConvolutionBias", "ConvolutionBiasAdd"])
def test_convolution_bias_with_relu_is_the_relu_of_the_sum(op):
    """``with_relu`` (which nGraph 0.26's deserializer drops, so the golden cases cannot show it): the
    result is nGraph's Relu (-0 and NaN give +0) of the same op without it, bit for bit."""
    rng = np.random.default_rng(3)
    shapes = [[1, 2, 5, 5], [3, 2, 3, 3], [3]] + ([[1, 3, 3, 3]] if op == "ConvolutionBiasAdd" else [])
    feeds = [(rng.integers(-8, 8, s) / 4).astype(np.float32) for s in shapes]
    feeds[0][0, 0, 0, 0] = np.nan
    got = {}
    for relu in (False, True):
        w = FunctionWriter(era="v0.26")
        ps = [w.parameter("f32", s) for s in shapes]
        w.result(w.op(op, *ps, with_relu=relu, **V0))
        got[relu] = _run(w, *feeds)[0]
    plain = got[False]
    assert np.isnan(plain).any() and (plain < 0).any()
    want = np.where(plain > 0, plain, np.float32(0))
    assert np.array_equal(got[True].view(np.uint32), want.view(np.uint32))


# ---------------------------------------------------------------- BatchMatMulTranspose


@pytest.mark.parametrize(
    ("shapes", "types", "match"),
    [
        ([[2, 3, 4], [2, 4, 5]], ["f32", "f64"], "Inputs arg0 and arg1 must have compatible element type."),
        ([[3, 4], [2, 4, 5]], ["f32"] * 2, "Input arg0 shape must have rank 3, got {3,4}."),
        (
            [[2, 3, 4], [3, 4, 5]],
            ["f32"] * 2,
            "Batch size dimensions are not equal while creating BatchMatMulTranspose.",
        ),  # noqa: E501
        ([[2, 3, 4], [2, 5, 5]], ["f32"] * 2, "Product dimensions are not equal while creating BatchMatMulTranspose."),
    ],
)
def test_batch_matmul_transpose_bad_input(shapes, types, match):
    w = FunctionWriter(era="v0.29")
    ps = [w.parameter(t, s) for t, s in zip(types, shapes)]
    w.result(w.op("BatchMatMulTranspose", *ps, transpose_0=False, transpose_1=False))
    _refused(w, match)


def test_convolution_bias_backprop_filters_bias_checks_the_bias_shape():
    w = FunctionWriter(era="v0.26")
    x, d = w.parameter("f32", [1, 2, 4, 4]), w.parameter("f32", [1, 3, 2, 2])
    fwd = {k + "_forward": v for k, v in V0.items()}
    w.result(w.op("ConvolutionBiasBackpropFiltersBias", x, d, filters_shape=[3, 2, 3, 3], bias_shape=[2], **fwd))
    _refused(w, "bias_shape {2} must be the filters' output channels (3)")
