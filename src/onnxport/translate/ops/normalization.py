"""Normalization: batch, layer, group, instance and RMS norms."""

from __future__ import annotations

import onnx_ir as ir
import torch

from onnxport.translate.ops._helpers import cast, rank, reduce, unsqueeze
from onnxport.translate.registry import translates


def _ones_or(g, value, size, dtype, fill=1.0):
    if value is not None:
        return value
    return g.const(torch.full(tuple(size), fill, dtype=_torch_dtype(dtype)))


def _torch_dtype(dtype: ir.DataType) -> torch.dtype:
    from onnx_ir.tensor_adapters import to_torch_dtype

    return to_torch_dtype(dtype)


@translates("aten::batch_norm", "aten::_native_batch_norm_legit_no_training",
            "aten::native_batch_norm", "aten::_native_batch_norm_legit", "aten::instance_norm")
def batch_norm(g, input, weight, bias, running_mean, running_var, *rest):
    """batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor"""
    name = g.provenance.aten
    if "instance_norm" in name:
        use_input_stats, _momentum, eps = rest[0], rest[1], rest[2]
        if not use_input_stats:
            name = "aten::batch_norm"
            rest = (False, 0.0, eps)
        else:
            channels = [input.shape[1]]
            scale = _ones_or(g, weight, channels, input.dtype)
            shift = _ones_or(g, bias, channels, input.dtype, 0.0)
            return g.op("InstanceNormalization", input, scale, shift, epsilon_f=eps)
    if name.startswith("aten::_native_batch_norm_legit_no_training"):
        training, eps = False, rest[1]
    else:
        training, eps = rest[0], rest[2]
    if training:
        raise NotImplementedError("batch_norm in training mode: export the model in eval() mode")
    channels = [input.shape[1]]
    scale = _ones_or(g, weight, channels, input.dtype)
    shift = _ones_or(g, bias, channels, input.dtype, 0.0)
    out = g.op("BatchNormalization", input, scale, shift, running_mean, running_var, epsilon_f=eps)
    if isinstance(g.expected, (tuple, list)):
        return (out, None, None) if len(g.expected) == 3 else (out, None, None, None, None)
    return out


def _layer_norm_decomposed(g, x, axes, weight, bias, eps):
    mean = reduce(g, "ReduceMean", x, axes, True)
    centered = g.op("Sub", x, mean)
    variance = reduce(g, "ReduceMean", g.op("Mul", centered, centered), axes, True)
    denominator = g.op("Sqrt", g.op("Add", variance, g.const(eps, x.dtype)))
    out = g.op("Div", centered, denominator)
    if weight is not None:
        out = g.op("Mul", out, weight)
    if bias is not None:
        out = g.op("Add", out, bias)
    return out


@translates("aten::layer_norm", "aten::native_layer_norm")
def layer_norm(g, input, normalized_shape, weight=None, bias=None, eps=1e-5, *_):
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor"""
    r = rank(input)
    axis = r - len(normalized_shape)
    native = isinstance(g.expected, (tuple, list))
    if g.opset < 17:
        out = _layer_norm_decomposed(g, input, list(range(axis, r)), weight, bias, eps)
        return (out, None, None) if native else out
    scale = _ones_or(g, weight, normalized_shape, input.dtype)
    if native:
        out, mean, inv_std = g.op("LayerNormalization", input, scale, bias, axis_i=axis,
                                  epsilon_f=eps, outputs=3)
        return out, mean, inv_std
    return g.op("LayerNormalization", input, scale, bias, axis_i=axis, epsilon_f=eps)


@translates("aten::rms_norm")
def rms_norm(g, input, normalized_shape, weight=None, eps=None):
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor"""
    if eps is None:
        eps = torch.finfo(_torch_dtype(input.dtype)).eps
    r = rank(input)
    axis = r - len(normalized_shape)
    if g.opset >= 23:
        scale = _ones_or(g, weight, normalized_shape, input.dtype)
        return g.op("RMSNormalization", input, scale, axis_i=axis, epsilon_f=eps)
    squared = g.op("Mul", input, input)
    mean = reduce(g, "ReduceMean", squared, list(range(axis, r)), True)
    out = g.op("Mul", input, g.op("Reciprocal", g.op("Sqrt", g.op("Add", mean, g.const(eps, input.dtype)))))
    return g.op("Mul", out, weight) if weight is not None else out


@translates("aten::group_norm", "aten::native_group_norm")
def group_norm(g, input, *args):
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enabled=True) -> Tensor"""
    if "native" in g.provenance.aten:
        weight, bias, _n, channels, _hw, num_groups, eps = args
    else:
        num_groups, weight, bias, eps = (list(args) + [None, None, 1e-5])[:4]
        eps = 1e-5 if eps is None else eps
    channels = input.shape[1]
    r = rank(input)
    # Normalize each group with InstanceNormalization on a [N, G, -1] view, then scale.
    grouped = g.op("Reshape", input, g.const([0, num_groups, -1]))
    ones = g.const(torch.ones(num_groups, dtype=_torch_dtype(input.dtype)))
    zeros = g.const(torch.zeros(num_groups, dtype=_torch_dtype(input.dtype)))
    normalized = g.op("InstanceNormalization", grouped, ones, zeros, epsilon_f=eps)
    out = g.op("Reshape", normalized, g.op("Shape", input))
    trailing = list(range(1, r - 1))
    if weight is not None:
        out = g.op("Mul", out, unsqueeze(g, weight, trailing) if trailing else weight)
    if bias is not None:
        out = g.op("Add", out, unsqueeze(g, bias, trailing) if trailing else bias)
    if "native" in g.provenance.aten:
        return out, None, None
    return out
