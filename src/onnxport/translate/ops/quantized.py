"""Quantization: PT2E's ``quantized_decomposed`` quantize/dequantize calls (also what the
reference form of torch.ao's quantized modules calls, capture/quirks/quantized_modules.py) as ONNX
QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear. Q/DQ pairs stay in the graph: ONNX
Runtime fuses them with their neighbours (QLinearConv, MatMulInteger) itself."""

from __future__ import annotations

import onnx_ir as ir
import torch

from onnxport.dtypes import QUANTIZED_AS_INTEGER, SCALAR_TYPE_DTYPES
from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import FLOAT_TYPES, cast, onnx_dtype
from onnxport.translate.registry import translates

# The integer dtypes QuantizeLinear has, with their full ranges.
_RANGES = {ir.DataType.UINT8: (0, 255), ir.DataType.INT8: (-128, 127),
           ir.DataType.UINT16: (0, 65535), ir.DataType.INT16: (-32768, 32767)}


def _scalar_type(dtype) -> ir.DataType:
    if isinstance(dtype, int):  # the TorchScript path passes ScalarType codes
        dtype = SCALAR_TYPE_DTYPES[dtype]
    return onnx_dtype(dtype)


def _integer_dtype(g, dtype) -> ir.DataType:
    result = _scalar_type(dtype)
    if result not in _RANGES:
        raise TranslationError(f"quantizing to {dtype} has no ONNX QuantizeLinear form "
                               "(uint8, int8, uint16 and int16 do)")
    if result in (ir.DataType.UINT16, ir.DataType.INT16) and g.opset < 21:
        raise TranslationError(f"QuantizeLinear to {dtype} needs opset_version >= 21")
    return result


def _float_input(g, x: ir.Value) -> ir.Value:
    # QuantizeLinear takes float16/bfloat16 inputs only from opset 19.
    if x.dtype == ir.DataType.FLOAT or (g.opset >= 19 and x.dtype in (
            ir.DataType.FLOAT16, ir.DataType.BFLOAT16)):
        return x
    return cast(g, x, ir.DataType.FLOAT)


def _scale(g, scale, dtype: ir.DataType) -> ir.Value:
    if isinstance(scale, ir.Value):
        return cast(g, _per_tensor(g, scale, 1), dtype)
    return g.const(float(scale), dtype)


def _zero_point(g, zero_point, dtype: ir.DataType) -> ir.Value:
    if isinstance(zero_point, ir.Value):
        return cast(g, _per_tensor(g, zero_point, 2), dtype)
    return g.const(int(zero_point), dtype)


def _per_tensor(g, value: ir.Value, output: int) -> ir.Value:
    """A per-tensor parameter as a scalar: torch's are 1-element tensors, and a 1-D one would
    make Q/DQ per-axis. Parameters DynamicQuantizeLinear chose are taken from it directly."""
    source = value.meta.get("onnxport.dynamic_quantization")
    if source is not None:
        return source[1].outputs[output]
    if value.shape is not None and len(value.shape) == 0:
        return value
    return g.op("Reshape", value, g.const([], ir.DataType.INT64))


def _clip(g, q: ir.Value, quant_min: int, quant_max: int, dtype: ir.DataType) -> ir.Value:
    """A range narrower than the dtype's (reduce_range, 4-bit grids stored as int8)."""
    low, high = _RANGES[dtype]
    if (quant_min, quant_max) == (low, high):
        return q
    return g.op("Clip", q, g.const(int(quant_min), dtype), g.const(int(quant_max), dtype))


@translates("quantized_decomposed::quantize_per_tensor",
            "quantized_decomposed::quantize_per_tensor.tensor",
            "quantized_decomposed::quantize_per_tensor.tensor2", since_opset=13)
def quantize_per_tensor(g, input, scale, zero_point, quant_min, quant_max, dtype):
    """quantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype) -> Tensor"""
    integer = _integer_dtype(g, dtype)
    dynamic = _dynamic_quantization(g, input, scale, zero_point)
    if dynamic is not None:
        return dynamic
    x = _float_input(g, input)
    q = g.op("QuantizeLinear", x, _scale(g, scale, x.dtype), _zero_point(g, zero_point, integer))
    q.dtype = integer
    return _clip(g, q, quant_min, quant_max, integer)


@translates("quantized_decomposed::dequantize_per_tensor",
            "quantized_decomposed::dequantize_per_tensor.tensor",
            "quantized_decomposed::dequantize_per_tensor.tensor2", since_opset=13)
def dequantize_per_tensor(g, input, scale, zero_point, quant_min, quant_max, dtype, *,
                          out_dtype=None):
    """dequantize_per_tensor(Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""
    integer = _integer_dtype(g, dtype)
    x = cast(g, input, integer)
    scale = _scale(g, scale, ir.DataType.FLOAT)
    y = g.op("DequantizeLinear", x, scale, _zero_point(g, zero_point, integer))
    y.dtype = ir.DataType.FLOAT
    return cast(g, y, _scalar_type(out_dtype)) if out_dtype is not None else y


@translates("quantized_decomposed::quantize_per_channel", since_opset=13)
def quantize_per_channel(g, input, scales, zero_points, axis, quant_min, quant_max, dtype):
    """quantize_per_channel(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, int quant_max, ScalarType dtype) -> Tensor"""
    integer = _integer_dtype(g, dtype)
    x = _float_input(g, input)
    q = g.op("QuantizeLinear", x, cast(g, scales, x.dtype), cast(g, zero_points, integer),
             axis_i=int(axis))
    q.dtype = integer
    return _clip(g, q, quant_min, quant_max, integer)


@translates("quantized_decomposed::dequantize_per_channel", since_opset=13)
def dequantize_per_channel(g, input, scales, zero_points, axis, quant_min, quant_max, dtype, *,
                           out_dtype=None):
    """dequantize_per_channel(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None) -> Tensor"""
    integer = _integer_dtype(g, dtype)
    x = cast(g, input, integer)
    if zero_points is None:
        zero_points = g.const(torch.zeros(_channels(scales), dtype=torch.int64))
    y = g.op("DequantizeLinear", x, cast(g, scales, ir.DataType.FLOAT),
             cast(g, zero_points, integer), axis_i=int(axis))
    y.dtype = ir.DataType.FLOAT
    return cast(g, y, _scalar_type(out_dtype)) if out_dtype is not None else y


def _channels(scales: ir.Value) -> int:
    if scales.shape is None or not isinstance(scales.shape[0], int):
        raise TranslationError("dequantize_per_channel without zero points needs the number "
                               "of channels known at export")
    return scales.shape[0]


@translates("quantized_decomposed::choose_qparams.tensor", since_opset=11)
def choose_qparams(g, input, quant_min, quant_max, eps, dtype):
    """choose_qparams.tensor(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype) -> (Tensor, Tensor)

    DynamicQuantizeLinear computes the same parameters (range widened to hold 0, scale over
    the whole uint8 range, zero point rounded half to even) and quantizes in the same node;
    the quantize_per_tensor that uses them takes that node's first output."""
    if _scalar_type(dtype) != ir.DataType.UINT8 or (quant_min, quant_max) != (0, 255):
        raise TranslationError(
            f"choose_qparams to {dtype} [{quant_min}, {quant_max}]: ONNX DynamicQuantizeLinear "
            "quantizes to all of uint8 only; quantize activations dynamically to "
            "torch.quint8 without reduce_range")
    quantized, scale, zero_point = g.op("DynamicQuantizeLinear", _float_input(g, input),
                                        outputs=3)
    quantized.dtype, scale.dtype, zero_point.dtype = (
        ir.DataType.UINT8, ir.DataType.FLOAT, ir.DataType.UINT8)
    node = quantized.producer()
    # torch's parameters are a float64 scale and an int64 zero point.
    # torch's are of shape [1]; DynamicQuantizeLinear's are scalars.
    scale, zero_point = (g.op("Unsqueeze", cast(g, value, dtype), g.const([0]))
                         for value, dtype in ((scale, ir.DataType.DOUBLE),
                                              (zero_point, ir.DataType.INT64)))
    for value in (scale, zero_point):
        value.meta["onnxport.dynamic_quantization"] = (input, node)
    return scale, zero_point


def _dynamic_quantization(g, input, scale, zero_point) -> ir.Value | None:
    """DynamicQuantizeLinear's own quantized output when ``scale`` and ``zero_point`` are the
    parameters it chose for this same input."""
    if not isinstance(scale, ir.Value):
        return None
    source = scale.meta.get("onnxport.dynamic_quantization")
    if (source is None or source[0] is not input or not isinstance(zero_point, ir.Value)
            or zero_point.meta.get("onnxport.dynamic_quantization") != source):
        return None
    return source[1].outputs[0]


# Fake quantization (quantization-aware training): the float result of quantizing and
# dequantizing at once, by torch's arithmetic: (clamp(zp + round(x * (1 / scale)), qmin, qmax)
# - zp) * scale, rounding half to even as ONNX's Round does. Any [qmin, qmax] range, which
# QuantizeLinear's integer types do not all have.
def _fake_quantize(g, x, scale, zero_point, quant_min, quant_max, axis=None):
    """(the fake-quantized x, the mask of the elements that were inside the range)"""
    dtype = x.dtype
    shape = None
    if axis is not None:  # per channel: scale and zero point along ``axis``
        r = len(x.shape)
        shape = g.const([-1 if i == axis % r else 1 for i in range(r)], ir.DataType.INT64)

    def operand(v):
        v = cast(g, v, dtype) if isinstance(v, ir.Value) else g.const(float(v), dtype)
        return g.op("Reshape", v, shape) if shape is not None else v

    scale, zero_point = operand(scale), operand(zero_point)
    inverse = g.op("Div", g.const(1.0, dtype), scale)
    level = g.op("Add", g.op("Round", g.op("Mul", x, inverse)), zero_point)
    low, high = g.const(float(quant_min), dtype), g.const(float(quant_max), dtype)
    clamped = g.op("Min", g.op("Max", level, low), high)
    output = g.op("Mul", g.op("Sub", clamped, zero_point), scale)
    inside = g.op("And", g.op("GreaterOrEqual", level, low), g.op("LessOrEqual", level, high))
    return output, inside


@translates("aten::fake_quantize_per_tensor_affine")
def fake_quantize_per_tensor_affine(g, self, scale, zero_point, quant_min, quant_max):
    """fake_quantize_per_tensor_affine(Tensor self, float scale, int zero_point, int quant_min, int quant_max) -> Tensor

    Also the .tensor_qparams overload, with scale and zero_point as tensors."""
    return _fake_quantize(g, self, scale, zero_point, quant_min, quant_max)[0]


@translates("aten::fake_quantize_per_tensor_affine_cachemask")
def fake_quantize_per_tensor_affine_cachemask(g, self, scale, zero_point, quant_min, quant_max):
    """fake_quantize_per_tensor_affine_cachemask(Tensor self, float scale, int zero_point, int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    return _fake_quantize(g, self, scale, zero_point, quant_min, quant_max)


@translates("aten::_fake_quantize_per_tensor_affine_cachemask_tensor_qparams")
def fake_quantize_cachemask_tensor_qparams(g, self, scale, zero_point, fake_quant_enabled,
                                           quant_min, quant_max):
    """_fake_quantize_per_tensor_affine_cachemask_tensor_qparams(Tensor self, Tensor scale, Tensor zero_point, Tensor fake_quant_enabled, int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    output, mask = _fake_quantize(g, self, scale, zero_point, quant_min, quant_max)
    enabled = g.op("Not", g.op("Equal", cast(g, fake_quant_enabled, ir.DataType.INT64),
                               g.const(0, ir.DataType.INT64)))
    enabled = g.op("Reshape", enabled, g.const([], ir.DataType.INT64))
    return (g.op("Where", enabled, output, self),
            g.op("Or", mask, g.op("Not", enabled)))


@translates("aten::fake_quantize_per_channel_affine")
def fake_quantize_per_channel_affine(g, self, scale, zero_point, axis, quant_min, quant_max):
    """fake_quantize_per_channel_affine(Tensor self, Tensor scale, Tensor zero_point, int axis, int quant_min, int quant_max) -> Tensor"""
    return _fake_quantize(g, self, scale, zero_point, quant_min, quant_max, axis)[0]


@translates("aten::fake_quantize_per_channel_affine_cachemask")
def fake_quantize_per_channel_affine_cachemask(g, self, scale, zero_point, axis, quant_min,
                                               quant_max):
    """fake_quantize_per_channel_affine_cachemask(Tensor self, Tensor scale, Tensor zero_point, int axis, int quant_min, int quant_max) -> (Tensor output, Tensor mask)"""
    return _fake_quantize(g, self, scale, zero_point, quant_min, quant_max, axis)


# The learnable observers (LSQ) forward as the plain ones, their float zero point rounded half
# to even and clamped into the range first, as torch's kernels do; grad_factor is backward only.
def _learned_zero_point(g, zero_point: ir.Value, quant_min: int, quant_max: int) -> ir.Value:
    zero_point = g.op("Round", cast(g, zero_point, ir.DataType.FLOAT))
    return g.op("Min", g.op("Max", zero_point, g.const(float(quant_min), ir.DataType.FLOAT)),
                g.const(float(quant_max), ir.DataType.FLOAT))


@translates("aten::_fake_quantize_learnable_per_tensor_affine")
def fake_quantize_learnable_per_tensor_affine(g, self, scale, zero_point, quant_min, quant_max,
                                              grad_factor=1.0):
    """_fake_quantize_learnable_per_tensor_affine(Tensor self, Tensor scale, Tensor zero_point, int quant_min, int quant_max, float grad_factor=1.0) -> Tensor"""
    zero_point = _learned_zero_point(g, zero_point, quant_min, quant_max)
    return _fake_quantize(g, self, g.op("Reshape", scale, g.const([], ir.DataType.INT64)),
                          g.op("Reshape", zero_point, g.const([], ir.DataType.INT64)),
                          quant_min, quant_max)[0]


@translates("aten::_fake_quantize_learnable_per_channel_affine")
def fake_quantize_learnable_per_channel_affine(g, self, scale, zero_point, axis, quant_min,
                                               quant_max, grad_factor=1.0):
    """_fake_quantize_learnable_per_channel_affine(Tensor self, Tensor scale, Tensor zero_point, int axis, int quant_min, int quant_max, float grad_factor=1.0) -> Tensor"""
    zero_point = _learned_zero_point(g, zero_point, quant_min, quant_max)
    return _fake_quantize(g, self, scale, zero_point, quant_min, quant_max, axis)[0]


_QUANTIZATION = "onnxport.quantization"  # a quantized value's (scale, zero point) values


def _quantized_as_integer(dtype):
    if isinstance(dtype, int):
        dtype = SCALAR_TYPE_DTYPES[dtype]
    if dtype not in (torch.quint8, torch.qint8):  # (the integers QuantizeLinear makes)
        raise TranslationError(f"torch.quantize_per_tensor to {dtype} has no ONNX form "
                               "(quint8 and qint8 do)")
    return QUANTIZED_AS_INTEGER[dtype]


@translates("aten::quantize_per_tensor", "aten::quantize_per_tensor.tensor_qparams",
            since_opset=13)
def aten_quantize_per_tensor(g, self, scale, zero_point, dtype):
    """quantize_per_tensor(Tensor self, float scale, int zero_point, ScalarType dtype) -> Tensor

    A quantized tensor is its integers here (QuantizeLinear's output); its scale and zero point
    travel with the value for dequantize to read."""
    integer = _integer_dtype(g, _quantized_as_integer(dtype))
    x = _float_input(g, self)
    scale, zero_point = _scale(g, scale, x.dtype), _zero_point(g, zero_point, integer)
    q = g.op("QuantizeLinear", x, scale, zero_point)
    q.dtype = integer
    q.meta[_QUANTIZATION] = (scale, zero_point)
    return q


def _quantization_of(value: ir.Value, what: str) -> tuple[ir.Value, ir.Value]:
    found = value.meta.get(_QUANTIZATION)
    if found is None:
        raise TranslationError(f"{what} of a quantized tensor that torch.quantize_per_tensor "
                               "did not make in the model (a quantized input or weight) has "
                               "no ONNX form yet; quantize inside the model")
    return found


@translates("aten::dequantize.self")
def aten_dequantize(g, self):
    """dequantize.self(Tensor self) -> Tensor

    Of a float tensor (a quantized input, which the graph holds dequantized already), the
    tensor as float, as torch's dequantize of a tensor that is not quantized."""
    if self.dtype in FLOAT_TYPES and _QUANTIZATION not in self.meta:
        return cast(g, self, ir.DataType.FLOAT)
    scale, zero_point = _quantization_of(self, "torch.dequantize")
    y = g.op("DequantizeLinear", self, scale, zero_point)
    y.dtype = scale.dtype
    return cast(g, y, ir.DataType.FLOAT)


@translates("aten::int_repr")
def int_repr(g, self):
    """int_repr(Tensor self) -> Tensor

    The integers of a quantized tensor the model made, which is what the graph holds."""
    _quantization_of(self, "Tensor.int_repr")
    return g.op("Identity", self)


# The ops that read a quantized tensor the model made (torch.quantize_per_tensor) as what the
# graph holds of it, its integers with their scale and zero point beside.
_READ_AS_INTEGERS = {"aten::dequantize.self", "aten::int_repr", "aten::dequantize"}


def refuse_quantized_operands(name: str, args: tuple, kwargs: dict) -> None:
    """Any other op given such a tensor would compute on its integers as on floats (a sigmoid
    of them, then dequantized as a float, was silently wrong): a clear error instead."""
    if name in _READ_AS_INTEGERS:
        return
    for value in (*args, *kwargs.values()):
        values = value if isinstance(value, (list, tuple)) else (value,)
        if any(isinstance(v, ir.Value) and _QUANTIZATION in v.meta for v in values):
            raise TranslationError(
                f"{name} of a quantized tensor the model makes (torch.quantize_per_tensor) "
                "has no translation: only dequantize() and int_repr() of it do. Dequantize "
                "it first and compute in float, or give the model the quantized tensor as an "
                "input (then its ops run as torch.onnx exports them)")
