"""Random and uninitialized tensors: ONNX's RandomUniform(Like)/RandomNormal(Like) draw the
numbers (their values differ from torch's generator, their shapes and dtypes do not), and from
opset 22 a training-mode Dropout's mask does; empty tensors are zeros."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from onnxport.translate.ops._helpers import (FLOAT_TYPES, as_tensor, cast, expected_dtype, filled,
                                             shape_list)
from onnxport.translate.registry import translates


# ONNX Runtime (1.2x-1.3x) has no CPU kernel for the opset-22 versions of RandomUniform(Like),
# RandomNormal(Like), Bernoulli and Multinomial, and a model's ops all take the model's opset
# (a local function importing an older one is refused too). Its Dropout-22 runs: the mask of
# a training-mode Dropout of ratio 1/2 is a tensor of fair random bits.
_OWN_RANDOM_OPS_UNTIL = 22
_MANTISSA_BITS = 24  # float32's: torch's uniform floats are k / 2**24 as well


def _uniform_like(g, like: ir.Value, low: float, high: float) -> ir.Value:
    """Uniform floats in [low, high) of ``like``'s shape and float dtype."""
    if g.opset < _OWN_RANDOM_OPS_UNTIL:
        return g.op("RandomUniformLike", like, low_f=float(low), high_f=float(high))
    # 24 random bits per element, weighted 2**-1 ... 2**-24: k / 2**24 with k uniform.
    bit_shape = g.op("Concat", g.op("Shape", like),
                     g.const([_MANTISSA_BITS], ir.DataType.INT64), axis_i=0)
    # The mask does not depend on the values dropped, but common-subexpression elimination
    # would merge two Dropouts of the same input (Dropout is not among the random ops it
    # knows), making two draws one: each draw drops a tensor filled with its own number.
    draw = getattr(g, "_random_draws", 0) + 1
    g._random_draws = draw
    numbered = g.op("ConstantOfShape", bit_shape,
                    value=ir.tensor([float(draw)], dtype=ir.DataType.FLOAT))
    _, mask = g.op("Dropout", numbered, g.const(0.5, ir.DataType.FLOAT), g.const(True),
                   outputs=2)
    weights = g.const([2.0 ** -(k + 1) for k in range(_MANTISSA_BITS)], ir.DataType.FLOAT)
    unit = g.op("MatMul", cast(g, mask, ir.DataType.FLOAT), weights)
    if (low, high) != (0.0, 1.0):
        unit = g.op("Add", g.op("Mul", unit, g.const(float(high) - float(low), ir.DataType.FLOAT)),
                    g.const(float(low), ir.DataType.FLOAT))
        # (k / 2**24 * 3 + 2 rounds to 5.0 at the largest k: kept below high, as torch's)
        below = float(np.nextafter(np.float32(high), np.float32(low)))
        unit = g.op("Min", unit, g.const(below, ir.DataType.FLOAT))
    return cast(g, unit, like.dtype)


def _normal_like(g, like: ir.Value, mean: float, std: float) -> ir.Value:
    """Normal floats of ``like``'s shape and float dtype."""
    if g.opset < _OWN_RANDOM_OPS_UNTIL:
        return g.op("RandomNormalLike", like, mean_f=float(mean), scale_f=float(std))
    # Box-Muller on two uniforms, the first in (0, 1] so that its log is finite.
    f32 = ir.DataType.FLOAT
    like32 = cast(g, like, f32)
    u1 = g.op("Sub", g.const(1.0, f32), _uniform_like(g, like32, 0.0, 1.0))
    u2 = _uniform_like(g, like32, 0.0, 1.0)
    radius = g.op("Sqrt", g.op("Mul", g.const(-2.0, f32), g.op("Log", u1)))
    z = g.op("Mul", radius, g.op("Cos", g.op("Mul", u2, g.const(2 * math.pi, f32))))
    if (mean, std) != (0.0, 1.0):
        z = g.op("Add", g.op("Mul", z, g.const(float(std), f32)), g.const(float(mean), f32))
    return cast(g, z, like.dtype)


def _float_like(g, shape: ir.Value, dtype: ir.DataType) -> ir.Value:
    """A float tensor of ``shape`` (zeros) for the *Like random ops to take the shape from."""
    compute = dtype if dtype in FLOAT_TYPES else ir.DataType.FLOAT
    return g.op("ConstantOfShape", shape, value=ir.tensor([0.0], dtype=compute))


def _uniform(g, shape: ir.Value, low: float, high: float, dtype: ir.DataType) -> ir.Value:
    return _uniform_like(g, _float_like(g, shape, dtype), low, high)


def _normal(g, shape: ir.Value, mean: float, std: float, dtype: ir.DataType) -> ir.Value:
    return _normal_like(g, _float_like(g, shape, dtype), mean, std)


def _integers(g, shape: ir.Value, low, high, dtype: ir.DataType) -> ir.Value:
    """Integers uniform in [low, high): the floor of a uniform float in that range. A bound
    may be a run's value (a dynamic size)."""
    f32 = ir.DataType.FLOAT
    if isinstance(low, ir.Value) or isinstance(high, ir.Value):
        low, high = (as_tensor(g, b, dtype=f32) if isinstance(b, ir.Value) else
                     g.const(float(b), f32) for b in (low, high))
        unit = _uniform(g, shape, 0.0, 1.0, f32)
        drawn = g.op("Floor", g.op("Add", g.op("Mul", unit, g.op("Sub", high, low)), low))
        top = g.op("Sub", high, g.const(1.0, f32))
    else:
        drawn = g.op("Floor", _uniform(g, shape, low, high, f32))
        top = g.const(float(high) - 1.0, f32)
    # A draw of exactly ``high`` (float rounding) goes back into the range.
    return cast(g, g.op("Min", drawn, top), dtype)


@translates("aten::rand_like")
def rand_like(g, self, **_):
    """rand_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    dtype = expected_dtype(g)
    return cast(g, _uniform(g, g.op("Shape", self), 0.0, 1.0, dtype), dtype)


@translates("aten::randn_like")
def randn_like(g, self, **_):
    """randn_like(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    dtype = expected_dtype(g)
    return cast(g, _normal(g, g.op("Shape", self), 0.0, 1.0, dtype), dtype)


@translates("aten::rand")
def rand(g, size, *_, **__):
    """rand(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    dtype = expected_dtype(g)
    return cast(g, _uniform(g, shape_list(g, list(size)), 0.0, 1.0, dtype), dtype)


@translates("aten::randn")
def randn(g, size, *_, **__):
    """randn(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    dtype = expected_dtype(g)
    return cast(g, _normal(g, shape_list(g, list(size)), 0.0, 1.0, dtype), dtype)


@translates("prims::uniform")
def prims_uniform(g, shape, *, low, high, dtype=None, device=None, generator=None, **_):
    """uniform(SymInt[] shape, *, Scalar low, Scalar high, ScalarType dtype, Device device, Generator? generator=None) -> Tensor"""
    out = expected_dtype(g)
    return cast(g, _uniform(g, shape_list(g, list(shape)), low, high, out), out)


@translates("prims::normal")
def prims_normal(g, shape, *, mean, std, dtype=None, device=None, requires_grad=False,
                 generator=None, **_):
    """normal(SymInt[] shape, *, Scalar mean, Scalar std, ScalarType dtype, Device device, bool requires_grad, Generator? generator=None) -> Tensor"""
    out = expected_dtype(g)
    return cast(g, _normal(g, shape_list(g, list(shape)), mean, std, out), out)


@translates("aten::uniform", "aten::uniform_")
def uniform(g, self, low=0.0, high=1.0, **_):
    """uniform(Tensor self, float from=0, float to=1, *, Generator? generator=None) -> Tensor"""
    dtype = expected_dtype(g)
    return cast(g, _uniform(g, g.op("Shape", self), low, high, dtype), dtype)


@translates("aten::normal_", "aten::normal_functional")
def normal_(g, self, mean=0.0, std=1.0, **_):
    """normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor(a!)"""
    dtype = expected_dtype(g)
    return cast(g, _normal(g, g.op("Shape", self), mean, std, dtype), dtype)


@translates("aten::randint")
def randint(g, high, size, *_, **__):
    """randint(SymInt high, SymInt[] size, *, ScalarType? dtype=long, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _integers(g, shape_list(g, list(size)), 0, high, expected_dtype(g))


@translates("aten::randint.low")
def randint_low(g, low, high, size, *_, **__):
    """randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=long, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _integers(g, shape_list(g, list(size)), low, high, expected_dtype(g))


@translates("aten::randint_like")
def randint_like(g, self, high, *_, **__):
    """randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    return _integers(g, g.op("Shape", self), 0, high, expected_dtype(g))


@translates("aten::randint_like.low_dtype")
def randint_like_low(g, self, low, high, *_, **__):
    """randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    return _integers(g, g.op("Shape", self), low, high, expected_dtype(g))


@translates("prims::empty_strided", "aten::empty_strided", "aten::empty_permuted",
            "aten::new_empty_strided")
def empty_strided(g, *args, **_):
    """empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    # Uninitialized memory in torch: any values will do, zeros are the cheapest. (The size is
    # the first list argument: new_empty_strided's first argument is a tensor.)
    size = next(a for a in args if isinstance(a, (list, tuple)))
    return filled(g, list(size), 0, expected_dtype(g))


def _gumbel(g, like: ir.Value) -> ir.Value:
    """Standard Gumbel noise of ``like``'s shape: -log(-log u), u in (0, 1)."""
    uniform = g.op("Max", _uniform_like(g, like, 0.0, 1.0), g.const(1e-20, like.dtype))
    return g.op("Neg", g.op("Log", g.op("Neg", g.op("Log", uniform))))


@translates("aten::multinomial")
def multinomial(g, self, num_samples, replacement=False, *, generator=None):
    """multinomial(Tensor self, SymInt num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor"""
    probs = self if self.dtype in FLOAT_TYPES else cast(g, self, ir.DataType.FLOAT)
    one_row = self.shape is not None and len(self.shape) == 1
    if one_row:
        probs = g.op("Unsqueeze", probs, g.const([0], ir.DataType.INT64))
    log_probs = g.op("Log", probs)
    if replacement and g.opset < _OWN_RANDOM_OPS_UNTIL:
        # ONNX Multinomial takes unnormalized log-probabilities.
        drawn = g.op("Multinomial", log_probs, sample_size_i=int(num_samples),
                     dtype_i=int(ir.DataType.INT64))
        drawn.dtype = ir.DataType.INT64
    elif replacement:
        # Each sample on its own: the argmax of log p + Gumbel noise is a draw from p.
        rows = g.op("Unsqueeze", log_probs, g.const([-2], ir.DataType.INT64))
        noisy_shape = g.op("Concat", g.op("Shape", log_probs, end_i=-1),
                           g.const([int(num_samples)], ir.DataType.INT64),
                           g.op("Shape", log_probs, start_i=-1), axis_i=0)
        noisy = g.op("Add", rows, _gumbel(g, g.op("Expand", rows, noisy_shape)))
        drawn = g.op("ArgMax", noisy, axis_i=-1, keepdims_i=0)
    else:
        # Without replacement: the k largest of log p + Gumbel noise (the Gumbel-top-k trick)
        # are a draw of k distinct categories with torch's distribution.
        _, drawn = g.op("TopK", g.op("Add", log_probs, _gumbel(g, log_probs)),
                        g.const([int(num_samples)], ir.DataType.INT64), axis_i=-1, outputs=2)
        drawn.dtype = ir.DataType.INT64
    if one_row:
        drawn = g.op("Squeeze", drawn, g.const([0], ir.DataType.INT64))
    return drawn


@translates("aten::rrelu_with_noise", "aten::rrelu")
def rrelu_with_noise(g, self, *args, lower=0.125, upper=1.0 / 3, training=False, **_):
    """rrelu_with_noise(Tensor self, Tensor noise, Scalar lower=0.125, Scalar upper=0.3333333333333333, bool training=False, Generator? generator=None) -> Tensor"""
    rest = [a for a in args if not isinstance(a, ir.Value)]  # (noise is a tensor)
    if rest:
        lower = rest[0]
    if len(rest) > 1:
        upper = rest[1]
    if len(rest) > 2:
        training = rest[2]
    if training:
        # A slope per element, uniform in [lower, upper].
        slope = _uniform_like(g, self, lower, upper)
    else:
        slope = g.const((float(lower) + float(upper)) / 2, self.dtype)
    negative = g.op("Less", self, g.const(0.0, self.dtype))
    return g.op("Where", negative, g.op("Mul", self, slope), self)


def _drawn_below(g, like: ir.Value, p: ir.Value | float) -> ir.Value:
    """1 where a uniform draw of ``like``'s shape falls below ``p``, else 0, in like's dtype:
    a Bernoulli(p) draw per element."""
    dtype = like.dtype if like.dtype in FLOAT_TYPES else ir.DataType.FLOAT
    uniform = _uniform_like(g, cast(g, like, dtype), 0.0, 1.0)
    p = g.const(float(p), dtype) if isinstance(p, (int, float)) else cast(g, p, dtype)
    return cast(g, g.op("Less", uniform, p), like.dtype)


@translates("aten::bernoulli.p", "aten::bernoulli_.float")
def bernoulli_p(g, self, p=0.5, *, generator=None):
    """bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor

    Each element is 1 with probability ``p``: self gives only the shape and dtype."""
    return _drawn_below(g, self, p)


@translates("aten::bernoulli.Tensor", "aten::bernoulli_.Tensor")
def bernoulli_tensor(g, self, p, *, generator=None):
    """bernoulli.Tensor(Tensor self, Tensor p, *, Generator? generator=None) -> Tensor

    Element i is 1 with probability p[i], p broadcast to self's shape (torch's rule: the
    result has self's shape)."""
    return _drawn_below(g, self, p)
