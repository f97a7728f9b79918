"""The op's contract: every check on types, axes and shapes, in nGraph's order with nGraph's messages.

``infer`` takes the types and (possibly partial) shapes of the op's inputs and returns the output's,
or raises ``DequantizeError``. Every other module (the schema, the reference, the lowering, the
importer, the kernel) checks through here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import dtypes
from .dtypes import DType
from .errors import DequantizeError, shown

__all__ = [
    "TensorType",
    "infer",
    "normalize_axes",
    "projected_shape",
    "merge_dim",
    "merge_shapes",
    "shape_str",
    "Dim",
    "Shape",
]

Dim = int | str | None
"""A dimension: a size, a symbolic name (unknown size), or None (unknown)."""
Shape = tuple[Dim, ...] | None
"""A shape: None when even the rank is unknown."""


class TensorType(NamedTuple):
    """A tensor's element type and shape, either of which may be unknown (None).

    ``elem_type`` takes any element type spelling (see ``dtypes.parse``); ``shape`` is None for an
    unknown rank, else a tuple whose dims are ints, or None / a symbolic name for unknown sizes.
    """

    elem_type: Any
    shape: Shape

    @classmethod
    def of(cls, value: Any) -> TensorType:
        """The type of an array (or a TensorType, returned as it is)."""
        if isinstance(value, TensorType):
            return value
        if not isinstance(value, np.ndarray):
            raise DequantizeError(f"Expected a NumPy array, got {type(value).__name__}")
        return cls(dtypes.parse(value.dtype), tuple(int(d) for d in value.shape))


def _type_name(t: DType | None) -> str:
    return "dynamic" if t is None else t.name


def _dim_str(d: Dim) -> str:
    return str(d) if isinstance(d, int) else "?"


def shape_str(shape: Shape) -> str:
    """A shape as nGraph prints it: ``{64,3}``, ``?`` for an unknown dim or rank."""
    if shape is None:
        return "?"
    return "{" + ",".join(_dim_str(d) for d in shape) + "}"


def _axes_str(axes: Sequence[int]) -> str:
    return "AxisSet{" + ", ".join(str(a) for a in axes) + "}"


def merge_dim(a: Dim, b: Dim) -> tuple[bool, Dim]:
    """Two dims that must be equal: (compatible, the merged dim); a known size wins over unknown."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b, a
    if isinstance(a, int):
        return True, a
    if isinstance(b, int):
        return True, b
    return True, a if a is not None else b


def merge_shapes(a: Shape, b: Shape) -> tuple[bool, Shape]:
    """Two shapes that must be equal: (compatible, the merged shape); unknown parts take the known."""
    if a is None:
        return True, b
    if b is None:
        return True, a
    if len(a) != len(b):
        return False, a
    merged = []
    for x, y in zip(a, b):
        ok, m = merge_dim(x, y)
        if not ok:
            return False, a
        merged.append(m)
    return True, tuple(merged)


def _elem(t: Any) -> DType | None:
    return None if t is None else dtypes.parse(t)


def _shape(shape: Any, what: str) -> Shape:
    if shape is None:
        return None
    if isinstance(shape, (str, bytes)):
        raise DequantizeError(f"{what} shape must be a sequence of dimensions, got {shown(shape)}")
    try:
        dims = tuple(shape)
    except TypeError:
        raise DequantizeError(f"{what} shape must be a sequence of dimensions, got {shown(shape)}") from None
    out: list[Dim] = []
    for d in dims:
        if d is None or isinstance(d, str):
            out.append(d)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and d >= 0:
            out.append(int(d))
        else:
            raise DequantizeError(f"{what} shape {shown(shape)} has an invalid dimension {shown(d)}")
    return tuple(out)


def normalize_axes(axes: Any) -> tuple[int, ...]:
    """The axes as a sorted tuple of distinct non-negative ints, or ``DequantizeError``.

    Negative axes are refused (nGraph's AxisSet holds unsigned indices): they would mean different
    axes for inputs of different ranks.
    """
    if axes is None:
        return ()
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, (bool, np.bool_)):
        axes = (axes,)
    if isinstance(axes, np.ndarray) and axes.ndim == 0:
        axes = axes.item()
        if isinstance(axes, int) and not isinstance(axes, bool):
            axes = (axes,)
    if isinstance(axes, (str, bytes)) or not isinstance(axes, Iterable):
        raise DequantizeError(f"Quantization axes must be a set of axis indices, got {shown(axes)}")
    out: list[int] = []
    for a in axes:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise DequantizeError(f"Quantization axis ({shown(a)}) must be an integer")
        if a < 0:
            raise DequantizeError(f"Quantization axis ({int(a)}) must not be negative")
        out.append(int(a))
    if len(set(out)) != len(out):
        raise DequantizeError(f"Quantization axes ({out}) must be distinct")
    return tuple(sorted(out))


def _as_type(value: Any, what: str) -> TensorType:
    if isinstance(value, np.ndarray):
        return TensorType.of(value)
    if isinstance(value, TensorType) or (isinstance(value, tuple) and len(value) == 2):
        elem, shape = value
        return TensorType(_elem(elem), _shape(shape, what))
    raise DequantizeError(f"{what} must be a TensorType or an array, got {type(value).__name__}")


def infer(x: Any, scale: Any, zero_point: Any = None, *, axes: Any = (), dtype: Any = None) -> TensorType:
    """Check the op's inputs against the contract and return the output's ``TensorType``.

    ``x``, ``scale`` and ``zero_point`` are ``TensorType`` (or arrays); ``zero_point=None`` means the
    op has none (zero). ``dtype`` is the ``type`` attribute (None: the scale's type). Raises
    ``DequantizeError`` with nGraph's message for the first check that fails.
    """
    axes_t = normalize_axes(axes)
    xt = _as_type(x, "Input")
    st = _as_type(scale, "Scale")
    zt = None if zero_point is None else _as_type(zero_point, "Zero point")
    out_type = _elem(dtype) if dtype is not None else st.elem_type

    # 1-2: the output type
    if out_type is None:
        raise DequantizeError("Output element type must not be dynamic")
    if not out_type.is_real:
        raise DequantizeError(f"Output element type ({out_type}) must be a floating point type")
    # 3-4: input and zero point share one quantized type
    quantized = xt.elem_type
    if zt is not None and zt.elem_type is not None:
        if quantized is not None and quantized is not zt.elem_type:
            raise DequantizeError(
                f"Zero point element type ({zt.elem_type}) must match input element type ({_type_name(xt.elem_type)})"
            )
        quantized = zt.elem_type
    if quantized is not None and not quantized.is_quantized:
        raise DequantizeError(f"Zero point / input element type ({quantized}) must be a quantized type")
    # 5: scale type equals the output type
    if st.elem_type is not None and st.elem_type is not out_type:
        raise DequantizeError(f"Scale element type ({st.elem_type}) must match output element type ({out_type})")
    # 6: axes inside the input's rank
    in_shape = xt.shape
    if in_shape is not None:
        for a in axes_t:
            if a >= len(in_shape):
                raise DequantizeError(f"Quantization axis ({a}) must be less than input shape rank ({len(in_shape)})")
    # 7: scale and zero point shapes agree
    sz_shape = st.shape
    if zt is not None:
        ok, sz_shape = merge_shapes(st.shape, zt.shape)
        if not ok:
            raise DequantizeError(
                f"Scale shape ({shape_str(st.shape)}) and zero point shape ({shape_str(zt.shape)}) must match"
            )
    # 8: one scale dimension per axis
    if sz_shape is not None and len(sz_shape) != len(axes_t):
        raise DequantizeError(
            f"Scale / zero point rank ({len(sz_shape)}) does not match the number of quantization axes ({len(axes_t)})"
        )
    # 9: scale dims equal the input dims at the axes
    if in_shape is None:
        return TensorType(out_type, None)
    if sz_shape is None:
        return TensorType(out_type, in_shape)
    at = dict(zip(axes_t, sz_shape))
    ok, result = merge_shapes(in_shape, tuple(at.get(i) for i in range(len(in_shape))))
    if not ok:
        raise DequantizeError(
            f"Scale / zero point shape ({shape_str(sz_shape)}) must match input shape ({shape_str(in_shape)}) "
            f"at the quantization axes ({_axes_str(axes_t)})"
        )
    return TensorType(out_type, result)


def projected_shape(shape: Sequence[Dim], axes: Sequence[int]) -> tuple[Dim, ...]:
    """The shape projected onto the axes: the scale's and zero point's shape for an input of ``shape``."""
    return tuple(shape[a] for a in axes)
