"""The one table of element types: nGraph name, nGraph C type string, ONNX data type, NumPy dtype.

Every module that names, parses or converts an element type uses this table. ``parse`` accepts any
spelling (an nGraph name ``"i8"``, a C type string ``"int8_t"``, a NumPy/ml_dtypes dtype or scalar
type, an ONNX ``TensorProto`` data type as an int or its name ``"INT8"``) and returns a ``DType``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import ml_dtypes
import numpy as np
from onnx import TensorProto

from .errors import DequantizeError

__all__ = ["DType", "Kind", "TABLE", "parse", "QUANTIZED", "REAL"]

Kind = Literal["quantized", "real", "integer", "boolean"]


@dataclass(frozen=True, eq=False)
class DType:
    """One element type. Compares equal to any spelling of itself (``DType('f32') == np.float32``)."""

    name: str  # nGraph's name: "i8", "f32"
    ctype: str  # nGraph's C type string in serialized JSON: "int8_t", "float"
    onnx: int  # ONNX TensorProto data type
    numpy: np.dtype  # NumPy or ml_dtypes dtype
    bits: int
    kind: Kind
    signed: bool

    @property
    def is_quantized(self) -> bool:
        """Accepted as the op's input / zero point type."""
        return self.kind == "quantized"

    @property
    def is_real(self) -> bool:
        """Accepted as the op's scale / output type."""
        return self.kind == "real"

    @property
    def onnx_name(self) -> str:
        """ONNX's name of the type: ``FLOAT``, ``INT8``."""
        return TensorProto.DataType.Name(self.onnx)

    @property
    def min(self) -> int | float:
        """Smallest finite value."""
        if self.kind == "boolean":
            return 0
        if self.kind == "real":
            return float(ml_dtypes.finfo(self.numpy).min)
        return int(ml_dtypes.iinfo(self.numpy).min)

    @property
    def max(self) -> int | float:
        """Largest finite value."""
        if self.kind == "boolean":
            return 1
        if self.kind == "real":
            return float(ml_dtypes.finfo(self.numpy).max)
        return int(ml_dtypes.iinfo(self.numpy).max)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self is other
        try:
            return parse(other) is self  # type: ignore[arg-type]
        except DequantizeError:
            return False

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DType({self.name!r})"


def _t(name: str, ctype: str, onnx: int, numpy: Any, bits: int, kind: Kind, signed: bool) -> DType:
    return DType(name, ctype, onnx, np.dtype(numpy), bits, kind, signed)


TABLE: tuple[DType, ...] = (
    # quantized: the op's input and zero point (nGraph: i8, u8, i32; ONNX adds i16, u16, i4, u4)
    _t("i8", "int8_t", TensorProto.INT8, np.int8, 8, "quantized", True),
    _t("u8", "uint8_t", TensorProto.UINT8, np.uint8, 8, "quantized", False),
    _t("i16", "int16_t", TensorProto.INT16, np.int16, 16, "quantized", True),
    _t("u16", "uint16_t", TensorProto.UINT16, np.uint16, 16, "quantized", False),
    _t("i32", "int32_t", TensorProto.INT32, np.int32, 32, "quantized", True),
    _t("i4", "int4_t", TensorProto.INT4, ml_dtypes.int4, 4, "quantized", True),
    _t("u4", "uint4_t", TensorProto.UINT4, ml_dtypes.uint4, 4, "quantized", False),
    # real: the op's scale and output
    _t("bf16", "bfloat16", TensorProto.BFLOAT16, ml_dtypes.bfloat16, 16, "real", True),
    _t("f16", "float16", TensorProto.FLOAT16, np.float16, 16, "real", True),
    _t("f32", "float", TensorProto.FLOAT, np.float32, 32, "real", True),
    _t("f64", "double", TensorProto.DOUBLE, np.float64, 64, "real", True),
    # other types nGraph graphs carry (the importer's ops use them; the op does not accept them)
    _t("i64", "int64_t", TensorProto.INT64, np.int64, 64, "integer", True),
    _t("u32", "uint32_t", TensorProto.UINT32, np.uint32, 32, "integer", False),
    _t("u64", "uint64_t", TensorProto.UINT64, np.uint64, 64, "integer", False),
    _t("boolean", "char", TensorProto.BOOL, np.bool_, 8, "boolean", False),
)

QUANTIZED: tuple[DType, ...] = tuple(t for t in TABLE if t.is_quantized)
REAL: tuple[DType, ...] = tuple(t for t in TABLE if t.is_real)

_BY_KEY: dict[Any, DType] = {}
for _d in TABLE:
    _BY_KEY[("s", _d.name)] = _d
    _BY_KEY[("s", _d.ctype)] = _d
    _BY_KEY[("s", _d.onnx_name.lower())] = _d
    _BY_KEY[("s", _d.numpy.name)] = _d
    _BY_KEY[("i", _d.onnx)] = _d
    _BY_KEY[("d", _d.numpy)] = _d
_BY_KEY[("s", "bool")] = _BY_KEY[("d", np.dtype(np.bool_))]


def parse(spelling: Any) -> DType:
    """The table entry for any spelling of an element type; ``DequantizeError`` when there is none."""
    if isinstance(spelling, DType):
        return spelling
    if isinstance(spelling, str):
        found = _BY_KEY.get(("s", spelling.strip().lower()))
        if found is None:
            raise DequantizeError(f"Unknown element type '{spelling}'")
        return found
    if isinstance(spelling, (bool, np.bool_)):
        raise DequantizeError(f"Unknown element type {spelling!r}")
    if isinstance(spelling, (int, np.integer)):
        found = _BY_KEY.get(("i", int(spelling)))
        if found is None:
            raise DequantizeError(f"Unsupported ONNX element type {int(spelling)}")
        return found
    try:
        dt = np.dtype(spelling)
    except (TypeError, ValueError):
        raise DequantizeError(f"Unknown element type {spelling!r}") from None
    found = _BY_KEY.get(("d", dt))
    if found is None:
        raise DequantizeError(f"Unsupported element type '{dt}'")
    return found
