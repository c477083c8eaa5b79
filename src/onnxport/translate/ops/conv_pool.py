"""Convolution and pooling."""

from __future__ import annotations

import re

from onnxport.translate.ops._helpers import rank, squeeze, unsqueeze
from onnxport.translate.registry import translates


def _tuple(value, n):
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    return value * n if len(value) == 1 else value


def _conv(g, x, weight, bias, stride, padding, dilation, groups, transposed=False,
          output_padding=0):
    spatial = rank(weight) - 2
    attrs = dict(
        strides_i=_tuple(stride, spatial),
        dilations_i=_tuple(dilation, spatial),
        group_i=groups,
    )
    if isinstance(padding, str):
        attrs["auto_pad_s"] = {"same": "SAME_UPPER", "valid": "VALID"}[padding]
    else:
        pads = _tuple(padding, spatial)
        attrs["pads_i"] = pads + pads
    if transposed:
        output_padding = _tuple(output_padding, spatial)
        if any(output_padding):
            attrs["output_padding_i"] = output_padding
        return g.op("ConvTranspose", x, weight, bias, **attrs)
    return g.op("Conv", x, weight, bias, **attrs)


def _batched(g, x, spatial, function):
    """Run ``function`` on ``x`` with a batch axis added when torch was given an unbatched input."""
    if rank(x) == spatial + 1:
        return squeeze(g, function(unsqueeze(g, x, [0])), [0])
    return function(x)


@translates("aten::conv1d", "aten::conv2d", "aten::conv3d")
def conv(g, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor"""
    return _batched(g, input, rank(weight) - 2,
                    lambda x: _conv(g, x, weight, bias, stride, padding, dilation, groups))


@translates("aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d")
def conv_transpose(g, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                   dilation=1):
    """conv_transpose2d.input(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] output_padding=0, SymInt groups=1, SymInt[2] dilation=1) -> Tensor"""
    return _batched(g, input, rank(weight) - 2, lambda x: _conv(
        g, x, weight, bias, stride, padding, dilation, groups, True, output_padding))


@translates("aten::convolution", "aten::_convolution")
def convolution(g, input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups, *_):
    """convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"""
    return _conv(g, input, weight, bias, stride, padding, dilation, groups, transposed,
                 output_padding)


def _spatial_rank(g) -> int:
    """1, 2 or 3, read from the op name (``max_pool2d`` -> 2)."""
    return int(re.search(r"(\d)d", g.provenance.aten).group(1))


def _pool_attrs(kernel_size, stride, padding, spatial, ceil_mode, dilation=None):
    kernel = _tuple(kernel_size, spatial)
    strides = _tuple(stride, spatial) if stride else kernel
    pads = _tuple(padding, spatial)
    attrs = dict(kernel_shape_i=kernel, strides_i=strides, pads_i=pads + pads,
                 ceil_mode_i=int(ceil_mode))
    if dilation is not None and any(d != 1 for d in _tuple(dilation, spatial)):
        attrs["dilations_i"] = _tuple(dilation, spatial)
    return attrs


@translates("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d")
def max_pool(g, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> Tensor"""
    spatial = _spatial_rank(g)
    attrs = _pool_attrs(kernel_size, stride, padding, spatial, ceil_mode, dilation)
    return _batched(g, self, spatial, lambda x: g.op("MaxPool", x, **attrs))


@translates("aten::max_pool2d_with_indices", "aten::max_pool1d_with_indices",
            "aten::max_pool3d_with_indices")
def max_pool_with_indices(g, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)"""
    spatial = _spatial_rank(g)
    attrs = _pool_attrs(kernel_size, stride, padding, spatial, ceil_mode, dilation)
    return g.op("MaxPool", self, outputs=2, **attrs)


@translates("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d")
def avg_pool(g, self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    """avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor"""
    if divisor_override is not None:
        raise NotImplementedError("avg_pool with divisor_override has no ONNX form")
    spatial = _spatial_rank(g)
    attrs = _pool_attrs(kernel_size, stride, padding, spatial, ceil_mode)
    if any(_tuple(padding, spatial)):
        attrs["count_include_pad_i"] = int(count_include_pad)
    return _batched(g, self, spatial, lambda x: g.op("AveragePool", x, **attrs))


def _adaptive(g, self, output_size, onnx_op, global_op):
    spatial = _spatial_rank(g)
    out = _tuple(output_size, spatial)
    in_spatial = list(self.shape)[-spatial:]
    if all(o == 1 for o in out):
        return _batched(g, self, spatial, lambda x: g.op(global_op, x))
    if all(isinstance(i, int) for i in in_spatial) and all(
        i % o == 0 for i, o in zip(in_spatial, out)
    ):
        kernel = [i // o for i, o in zip(in_spatial, out)]
        return _batched(g, self, spatial, lambda x: g.op(
            onnx_op, x, kernel_shape_i=kernel, strides_i=kernel))
    raise NotImplementedError(
        f"adaptive pooling from {in_spatial} to {out} is not a whole-window pooling")


@translates("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
            "aten::_adaptive_avg_pool2d")
def adaptive_avg_pool(g, self, output_size):
    """adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor"""
    return _adaptive(g, self, output_size, "AveragePool", "GlobalAveragePool")


@translates("aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d")
def adaptive_max_pool(g, self, output_size):
    """adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)"""
    result = _adaptive(g, self, output_size, "MaxPool", "GlobalMaxPool")
    if isinstance(g.expected, (tuple, list)):
        raise NotImplementedError("adaptive_max_pool indices are not supported")
    return result
