"""The contract: nGraph's nine checks in nGraph's order with nGraph's texts, on partial shapes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

import onnx_dequant as odq
from onnx_dequant import dtypes
from onnx_dequant.contract import TensorType as T

# (input, scale, zero_point, axes, dtype) -> message of the first failing check
FAILURES = [
    (T("i8", (2,)), T(None, (2,)), None, [0], None, "Output element type must not be dynamic"),
    (T("i8", (2,)), T("i8", (2,)), None, [0], "i8", "Output element type (i8) must be a floating point type"),
    (
        T("i8", (2,)),
        T("f32", (2,)),
        T("u8", (2,)),
        [0],
        "f32",
        "Zero point element type (u8) must match input element type (i8)",
    ),
    (
        T("f32", (2,)),
        T("f32", (2,)),
        T("f32", (2,)),
        [0],
        "f32",
        "Zero point / input element type (f32) must be a quantized type",
    ),
    (
        T(None, (2,)),
        T("f32", (2,)),
        T("i64", (2,)),
        [0],
        None,
        "Zero point / input element type (i64) must be a quantized type",
    ),
    (T("i8", (2,)), T("f64", (2,)), None, [0], "f32", "Scale element type (f64) must match output element type (f32)"),
    (
        T("i8", (1, 2, 3, 4)),
        T("f32", (4,)),
        None,
        [4],
        None,
        "Quantization axis (4) must be less than input shape rank (4)",
    ),
    (
        T("i8", (64, 4, 5)),
        T("f32", (64, 4)),
        T("i8", (64, 3)),
        [0, 1],
        None,
        "Scale shape ({64,4}) and zero point shape ({64,3}) must match",
    ),
    (
        T("i8", (64, 4, 5)),
        T("f32", (64, 4, 5)),
        None,
        [0, 1],
        None,
        "Scale / zero point rank (3) does not match the number of quantization axes (2)",
    ),
    (
        T("i8", (2, 5, 6, None, 10, None)),
        T("f32", (4, 8, None)),
        None,
        [1, 3, 5],
        None,
        "Scale / zero point shape ({4,8,?}) must match input shape ({2,5,6,?,10,?}) at the quantization axes (AxisSet{1, 3, 5})",  # noqa: E501  (nGraph's message, whole so it can be searched)
    ),
    # order: the first failing check wins
    (
        T("f32", (2,)),
        T("f64", (3,)),
        T("u8", (2,)),
        [5],
        "i8",
        "Output element type (i8) must be a floating point type",
    ),
    (
        T("f32", (2,)),
        T("f64", (3,)),
        T("u8", (2,)),
        [5],
        "f32",
        "Zero point element type (u8) must match input element type (f32)",
    ),
    (T("i8", (2,)), T("f64", (3,)), None, [5], "f32", "Scale element type (f64) must match output element type (f32)"),
    (
        T("i8", (2,)),
        T("f32", (3, 3)),
        T("i8", (4,)),
        [5],
        None,
        "Quantization axis (5) must be less than input shape rank (1)",
    ),
]


@pytest.mark.parametrize("x,s,z,axes,dtype,message", FAILURES)
def test_each_check_and_its_message(x, s, z, axes, dtype, message):
    with pytest.raises(odq.DequantizeError) as e:
        odq.infer(x, s, z, axes=axes, dtype=dtype)
    assert str(e.value) == message


def test_unknown_facts_pass():
    # unknown rank: the axis check cannot fail; the output rank stays unknown
    out = odq.infer(T("i8", None), T("f32", (3, 4)), None, axes=[7, 9])
    assert out == T("f32", None) and out.elem_type == np.float32
    # unknown input type merges with the zero point's
    assert odq.infer(T(None, (2,)), T("f32", (2,)), T("u8", (2,)), axes=[0]).shape == (2,)
    # unknown scale type: the output is the type attribute
    assert odq.infer(T("i8", (2,)), T(None, (2,)), None, axes=[0], dtype="bf16").elem_type == ml_dtypes.bfloat16
    # unknown scale rank merges with the zero point's shape
    assert odq.infer(T("i8", (None, 3)), T("f32", None), T("i8", (5,)), axes=[0]).shape == (5, 3)


def test_output_shape_takes_known_dims_from_either_side():
    out = odq.infer(T("u8", ("N", None, 3, None)), T("f16", (7, None)), T("u8", (None, 9)), axes=[0, 3])
    assert out == T("f16", (7, None, 3, 9))
    out = odq.infer(T("u8", ("N", 4)), T("f32", ()), None, axes=[])
    assert out.shape == ("N", 4)  # symbolic names are kept


def test_zero_point_is_optional():
    assert odq.infer(T("i32", (2, 3)), T("f64", (3,)), None, axes=[1]) == T("f64", (2, 3))


def test_nine_checks_accept_every_type_pair():
    for q in dtypes.QUANTIZED:
        for r in dtypes.REAL:
            assert odq.infer(T(q, (4, 5)), T(r, (5,)), T(q, (5,)), axes=[1], dtype=r.onnx) == T(r, (4, 5))


def test_arrays_and_type_spellings():
    x = np.zeros((2, 3), np.uint8)
    out = odq.infer(x, np.ones(3, np.float32), x[0], axes=(1,), dtype=TensorProto.FLOAT)
    assert out == T("float", (2, 3)) and out == T(np.float32, (2, 3))


@pytest.mark.parametrize(
    "axes,message",
    [
        ([0, 0], "Quantization axes ([0, 0]) must be distinct"),
        ([-1], "Quantization axis (-1) must not be negative"),
        ([1.5], "Quantization axis (1.5) must be an integer"),
        ("01", "must be a set of axis indices"),
        ([True], "must be an integer"),
    ],
)
def test_bad_axes(axes, message):
    with pytest.raises(odq.DequantizeError) as e:
        odq.infer(T("i8", (2, 2)), T("f32", (2,)), None, axes=axes)
    assert message in str(e.value)


def _nested(depth: int) -> list:
    value: list = [0]
    for _ in range(depth):
        value = [value]
    return value


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    "axes,shape,message",
    [
        (_nested(5000), (2,), "Quantization axis ([[[[...]]]]) must be an integer"),  # was RecursionError
        ([list(range(10**5))], (2,), "Quantization axis ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...]) must be"),
        ([_BadRepr()], (2,), "Quantization axis (<_BadRepr instance at "),
        ([0], _nested(5000), "Scale shape [[[[...]]]] has an invalid dimension [[[[...]]]]"),
    ],
)
def test_hostile_values_are_shown_cut_short(axes, shape, message):
    """A value an error message shows is cut short: a deeply nested or huge one, or one whose repr raises,
    still gives the contract's error."""
    with pytest.raises(odq.DequantizeError) as e:
        odq.infer(T("i8", (2, 2)), T("f32", shape), None, axes=axes)
    assert message in str(e.value) and len(str(e.value)) < 200


@pytest.mark.parametrize("shape", [(2, -1), (2.5,), "ab", 3, (True,)])
def test_bad_shapes(shape):
    with pytest.raises(odq.DequantizeError):
        odq.infer(T("i8", shape), T("f32", ()), None, axes=[])


def test_dtype_table_spellings():
    for t in dtypes.TABLE:
        for spelling in (t.name, t.ctype, t.onnx, t.numpy, t.onnx_name, t.numpy.type):
            assert dtypes.parse(spelling) is t
    for bad in ("q7", 999, True, object(), "float128", np.complex64):
        with pytest.raises(odq.DequantizeError):
            dtypes.parse(bad)
    assert dtypes.parse("f32") != "f64" and dtypes.parse("f32") != "nonsense"
