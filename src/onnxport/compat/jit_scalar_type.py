"""``JitScalarType``: torch's scalar types with their names, torch dtypes and ONNX types,
numbered as torch.onnx numbers them so that symbolic functions written for it work unchanged."""

from __future__ import annotations

import enum
from typing import Any

import onnx_ir as ir
import torch

from onnxport.dtypes import SCALAR_TYPE_DTYPES
from onnxport.errors import OnnxExporterError


class JitScalarType(enum.IntEnum):
    """A torch scalar type; converts between torch dtypes, JIT names and ONNX data types.

    >>> JitScalarType.from_value(torch.ones(1, 2)).onnx_type()
    <DataType.FLOAT: 1>
    """

    # Numbered as c10's ScalarType (torch.onnx exposes the same numbers).
    UINT8 = 0
    INT8 = 1
    INT16 = 2
    INT = 3
    INT64 = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    COMPLEX32 = 8
    COMPLEX64 = 9
    COMPLEX128 = 10
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    FLOAT8E5M2 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E5M2FNUZ = 18
    FLOAT8E4M3FNUZ = 19
    UNDEFINED = 20

    @classmethod
    def _from_name(cls, name: str | None) -> "JitScalarType":
        """From a JIT scalar type name ("Float") or a torch type name ("float")."""
        if name is None:
            raise OnnxExporterError("Scalar type name cannot be None")
        if name in _NAME_TO_TYPE:
            return _NAME_TO_TYPE[name]
        if name in _TORCH_NAME_TO_TYPE:
            return _TORCH_NAME_TO_TYPE[name]
        raise OnnxExporterError(f"Unknown torch or scalar type: {name!r}")

    @classmethod
    def from_dtype(cls, dtype: torch.dtype | None) -> "JitScalarType":
        if dtype not in _DTYPE_TO_TYPE:
            raise OnnxExporterError(f"Unknown dtype: {dtype}")
        return _DTYPE_TO_TYPE[dtype]

    @classmethod
    def from_onnx_type(cls, onnx_type: int | None) -> "JitScalarType":
        if onnx_type is None or int(onnx_type) not in _ONNX_TO_TYPE:
            raise OnnxExporterError(f"Unknown onnx_type: {onnx_type}")
        return _ONNX_TO_TYPE[int(onnx_type)]

    @classmethod
    def from_value(cls, value: Any, default: "JitScalarType | None" = None) -> "JitScalarType":
        """The scalar type of a tensor or of a value seen by a symbolic function; ``default``
        when it has none (or is not a tensor value), else an error."""
        if isinstance(value, torch.Tensor):
            return cls.from_dtype(value.dtype)
        dtype = None
        if isinstance(value, ir.Value):
            dtype = value.dtype
        elif hasattr(value, "ir_value"):  # the values symbolic functions receive
            dtype = value.ir_value.dtype
        elif isinstance(value, ir.DataType):
            dtype = value
        if dtype is not None and int(dtype) in _ONNX_TO_TYPE:
            return _ONNX_TO_TYPE[int(dtype)]
        if default is not None:
            if not isinstance(default, JitScalarType):
                raise OnnxExporterError("default value must be a JitScalarType object.")
            return default
        raise OnnxExporterError(
            f"Cannot determine the scalar type of {value!r} and no default was given; pass "
            f"default=JitScalarType.FLOAT (or another) to from_value.")

    def scalar_name(self) -> str:
        return _TYPE_TO_NAME[self]

    def torch_name(self) -> str:
        return _TYPE_TO_TORCH_NAME[self]

    def dtype(self) -> torch.dtype:
        return _TYPE_TO_DTYPE[self]

    def onnx_type(self) -> ir.DataType:
        if self not in _TYPE_TO_ONNX:
            raise OnnxExporterError(f"Scalar type {self} cannot be converted to ONNX")
        return _TYPE_TO_ONNX[self]

    def onnx_compatible(self) -> bool:
        return self in _TYPE_TO_ONNX and self not in (JitScalarType.UNDEFINED,
                                                       JitScalarType.COMPLEX32)


def valid_scalar_name(name: str) -> bool:
    return name in _NAME_TO_TYPE


def valid_torch_name(name: str) -> bool:
    return name in _TORCH_NAME_TO_TYPE


_T = JitScalarType
_TYPE_TO_NAME = {
    _T.BOOL: "Bool", _T.UINT8: "Byte", _T.INT8: "Char", _T.INT16: "Short", _T.INT: "Int",
    _T.INT64: "Long", _T.HALF: "Half", _T.FLOAT: "Float", _T.DOUBLE: "Double",
    _T.COMPLEX32: "ComplexHalf", _T.COMPLEX64: "ComplexFloat", _T.COMPLEX128: "ComplexDouble",
    _T.QINT8: "QInt8", _T.QUINT8: "QUInt8", _T.QINT32: "QInt32", _T.BFLOAT16: "BFloat16",
    _T.FLOAT8E5M2: "Float8E5M2", _T.FLOAT8E4M3FN: "Float8E4M3FN",
    _T.FLOAT8E5M2FNUZ: "Float8E5M2FNUZ", _T.FLOAT8E4M3FNUZ: "Float8E4M3FNUZ",
    _T.UNDEFINED: "Undefined",
}
_NAME_TO_TYPE = {v: k for k, v in _TYPE_TO_NAME.items()}
_TYPE_TO_TORCH_NAME = {
    _T.BOOL: "bool", _T.UINT8: "uint8_t", _T.INT8: "int8_t", _T.INT16: "int16_t", _T.INT: "int",
    _T.INT64: "int64_t", _T.HALF: "half", _T.FLOAT: "float", _T.DOUBLE: "double",
    _T.COMPLEX32: "complex32", _T.COMPLEX64: "complex64", _T.COMPLEX128: "complex128",
    _T.QINT8: "qint8", _T.QUINT8: "quint8", _T.QINT32: "qint32", _T.BFLOAT16: "bfloat16",
    _T.FLOAT8E5M2: "float8_e5m2", _T.FLOAT8E4M3FN: "float8_e4m3fn",
    _T.FLOAT8E5M2FNUZ: "float8_e5m2fnuz", _T.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
}
_TORCH_NAME_TO_TYPE = {v: k for k, v in _TYPE_TO_TORCH_NAME.items()}
_D = ir.DataType
_TYPE_TO_ONNX = {
    _T.BOOL: _D.BOOL, _T.UINT8: _D.UINT8, _T.INT8: _D.INT8, _T.INT16: _D.INT16,
    _T.INT: _D.INT32, _T.INT64: _D.INT64, _T.HALF: _D.FLOAT16, _T.FLOAT: _D.FLOAT,
    _T.DOUBLE: _D.DOUBLE, _T.COMPLEX64: _D.COMPLEX64, _T.COMPLEX128: _D.COMPLEX128,
    _T.BFLOAT16: _D.BFLOAT16, _T.UNDEFINED: _D.UNDEFINED, _T.COMPLEX32: _D.UNDEFINED,
    _T.QINT8: _D.INT8, _T.QUINT8: _D.UINT8, _T.QINT32: _D.INT32,
    _T.FLOAT8E5M2: _D.FLOAT8E5M2, _T.FLOAT8E4M3FN: _D.FLOAT8E4M3FN,
    _T.FLOAT8E5M2FNUZ: _D.FLOAT8E5M2FNUZ, _T.FLOAT8E4M3FNUZ: _D.FLOAT8E4M3FNUZ,
}
# As torch.onnx: an ONNX type maps back to the first scalar type listed for it (INT8 -> INT8,
# not QINT8), and UNDEFINED to UNDEFINED.
_ONNX_TO_TYPE: dict[int, JitScalarType] = {}
for _type, _onnx in _TYPE_TO_ONNX.items():
    if _type is not _T.COMPLEX32:
        _ONNX_TO_TYPE.setdefault(int(_onnx), _type)
_TYPE_TO_DTYPE = {_T(code): dtype for code, dtype in SCALAR_TYPE_DTYPES.items()}
_DTYPE_TO_TYPE = {v: k for k, v in _TYPE_TO_DTYPE.items()}
del _T, _D, _type, _onnx
