"""Casts around ONNX ops whose input dtype is valid ONNX but has no ONNX Runtime CPU kernel
(Max of bools, Conv of int64...): torch computes these, so the graph computes them in a dtype
the runtime has and casts the result back."""

from __future__ import annotations

import onnx_ir as ir

_D = ir.DataType
_SMALL = {_D.UINT8, _D.INT8, _D.INT32, _D.INT64, _D.FLOAT, _D.DOUBLE, _D.FLOAT16}
_FLOATS = {_D.FLOAT, _D.FLOAT16}
_WIDE = {_D.INT32, _D.INT64, _D.FLOAT, _D.FLOAT16, _D.DOUBLE}

# op type -> (positions of the inputs of the data type T, dtypes ONNX Runtime's CPU kernels
# take for T), from probing ONNX Runtime 1.2x sessions op by op.
_KERNELS: dict[str, tuple[tuple[int, ...], set]] = {
    "Max": ((0, 1, 2, 3), _SMALL), "Min": ((0, 1, 2, 3), _SMALL),
    "Where": ((1, 2), _SMALL), "Sign": ((0,), _SMALL), "Clip": ((0, 1, 2), _SMALL),
    "Abs": ((0,), _SMALL), "Add": ((0, 1), _SMALL), "Mul": ((0, 1), _SMALL), "ReduceMax": ((0,), _SMALL), "ReduceMin": ((0,), _SMALL),
    "Conv": ((0, 1, 2), _FLOATS), "ConvTranspose": ((0, 1, 2), _FLOATS),
    "AveragePool": ((0,), _FLOATS), "MaxPool": ((0,), {_D.UINT8, _D.INT8, *_FLOATS, _D.DOUBLE}),
    "Gemm": ((0, 1, 2), {*_FLOATS, _D.DOUBLE}),
    # Also outside ONNX's own type constraints (int8 Pow and MatMul are invalid ONNX), or
    # without a kernel for the small integers (int16 Pad, int8 Trilu, uint8 Unique):
    "Pow": ((0,), _WIDE), "MatMul": ((0, 1), {*_WIDE, _D.UINT32, _D.UINT64}),
    "Trilu": ((0,), {*_WIDE, _D.BOOL}), "Unique": ((0,), {_D.INT8, _D.INT64, *_FLOATS, _D.DOUBLE}),
    "Pad": ((0, 2), set(_D) - {_D.INT16, _D.UINT16}), "CumSum": ((0,), _WIDE),
    "Einsum": (tuple(range(8)), _WIDE), "ReduceSum": ((0,), _WIDE), "ReduceProd": ((0,), _WIDE),
    "ReduceMean": ((0,), _WIDE), "Relu": ((0,), {*_WIDE, _D.INT8}),
    "Neg": ((0,), {*_WIDE, _D.INT8, _D.INT16}),
}
# Inputs of another type constraint that the compute dtype is given too when outside the
# kernel's set (Pow's exponent, T1: int32, int64 and floats only).
_ALSO_CAST = {"Pow": (1,)}
# The dtype to compute in, first that the kernel takes: exact for bools (uint8), small
# integers (int32 or int64: a product that overflows wraps back as torch's does when cast
# back) and integers below 2**53 (double); Conv and AveragePool have float32 only (exact
# below 2**24).
_SMALL_INTEGERS = (_D.INT32, _D.INT64, _D.DOUBLE, _D.FLOAT)
_PREFERRED = {_D.BOOL: (_D.UINT8, _D.INT32, _D.FLOAT), _D.FLOAT16: (_D.FLOAT,),
              _D.INT8: _SMALL_INTEGERS, _D.UINT8: _SMALL_INTEGERS, _D.INT16: _SMALL_INTEGERS,
              _D.UINT16: _SMALL_INTEGERS, _D.UINT32: (_D.INT64, _D.DOUBLE, _D.FLOAT)}
_PREFERRED_OTHERS = (_D.DOUBLE, _D.FLOAT)


# Scatters with a reduction (add, mul, max, min): ONNX Runtime's CPU kernels of the reducing
# ScatterND and ScatterElements have no float16 (data and updates are inputs 0 and 2).
_REDUCING_SCATTERS = {"ScatterND", "ScatterElements"}
_SCATTER_DATA = (0, 2)


def _kernel(op_type: str, attributes) -> tuple[tuple[int, ...], set] | None:
    if op_type in _REDUCING_SCATTERS:
        reduction = (attributes or {}).get("reduction_s")
        if reduction in (None, "none"):
            return None
        return _SCATTER_DATA, set(_D) - {_D.FLOAT16}
    return _KERNELS.get(op_type)


def compute_dtype(domain: str, op_type: str, inputs, attributes=None) -> ir.DataType | None:
    """The dtype to cast ``op_type``'s T inputs to, None when the runtime takes them as they are."""
    kernel = _kernel(op_type, attributes)
    if domain not in ("", "ai.onnx") or kernel is None:
        return None
    positions, supported = kernel
    dtypes = {inputs[i].dtype for i in positions if i < len(inputs) and inputs[i] is not None}
    if len(dtypes) != 1:
        return None
    (dtype,) = dtypes
    # bfloat16 is left as the schema allows: ONNX Runtime's CPU has no bfloat16 MatMul either,
    # so casting a few ops would add nodes without making such a model run there.
    if dtype is None or dtype in supported or dtype == _D.BFLOAT16:
        return None
    for candidate in _PREFERRED.get(dtype, _PREFERRED_OTHERS):
        if candidate in supported:
            return candidate
    return None


def cast_around(g, op_type: str, inputs: list, compute: ir.DataType, outputs: int, attributes):
    """``op_type`` on ``inputs`` computed in ``compute``; its first output cast back."""
    positions, supported = _kernel(op_type, attributes)
    original = next(inputs[i].dtype for i in positions if i < len(inputs) and inputs[i] is not None)
    also = [i for i in _ALSO_CAST.get(op_type, ()) if i < len(inputs) and inputs[i] is not None
            and inputs[i].dtype not in supported]
    cast_inputs = [g.op("Cast", value, to_i=int(compute))
                   if (i in positions or i in also) and value is not None else value
                   for i, value in enumerate(inputs)]
    result = g.op(op_type, *cast_inputs, outputs=outputs, **attributes)
    first = result[0] if outputs > 1 else result
    back = g.op("Cast", first, to_i=int(original))
    return (back, *result[1:]) if outputs > 1 else back
