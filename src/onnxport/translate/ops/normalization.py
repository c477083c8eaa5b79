"""Normalization: batch, layer, group, instance and RMS norms."""

from __future__ import annotations

import onnx_ir as ir
import torch

from onnxport.translate.ops._helpers import cast, expected_dtype, rank, reduce, unsqueeze
from onnxport.translate.registry import translates


def _ones_or(g, value, size, dtype, fill=1.0, like=None, axis=1):
    """``value``, else a tensor of ``size`` filled with ``fill``; a symbolic size is read at
    run time: ``like``'s sizes from ``axis`` on."""
    if value is not None:
        return value
    if all(isinstance(d, int) for d in size):
        return g.const(torch.full(tuple(size), fill, dtype=_torch_dtype(dtype)))
    end = axis + len(size)
    if g.opset >= 15:
        shape = g.op("Shape", like, start_i=axis, end_i=end)
    else:
        shape = g.op("Slice", g.op("Shape", like), g.const([axis]), g.const([end]))
    return g.op("Expand", g.const([fill], dtype), shape)


def _torch_dtype(dtype: ir.DataType) -> torch.dtype:
    from onnx_ir.tensor_adapters import to_torch_dtype

    return to_torch_dtype(dtype)


@translates("aten::batch_norm", "aten::_native_batch_norm_legit_no_training",
            "aten::native_batch_norm", "aten::_native_batch_norm_legit", "aten::instance_norm",
            "aten::_native_batch_norm_legit_functional")
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
            scale = _ones_or(g, weight, channels, input.dtype, like=input)
            shift = _ones_or(g, bias, channels, input.dtype, 0.0, like=input)
            return g.op("InstanceNormalization", input, scale, shift, epsilon_f=eps)
    if name.startswith("aten::_native_batch_norm_legit_no_training"):
        training, eps = False, rest[1]
    elif isinstance(running_mean, bool):
        # _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps)
        training, eps = running_mean, rest[0]
        running_mean = running_var = None
    else:
        training, eps = rest[0], rest[2]
    channel_axis = 1 if rank(input) > 1 else 0
    channels = [input.shape[channel_axis]]
    scale = _ones_or(g, weight, channels, input.dtype, like=input, axis=channel_axis)
    shift = _ones_or(g, bias, channels, input.dtype, 0.0, like=input, axis=channel_axis)
    native = isinstance(g.expected, (tuple, list))
    if training or running_mean is None:
        # Batch statistics (a functional batch_norm with training=True, or no running stats):
        # normalize over every axis but the channels. The running-stat update is a buffer
        # write that inference does not need.
        out, mean, inv_std = _batch_statistics_norm(g, input, scale, shift, eps)
        if native:
            return (out, mean, inv_std) + (None,) * (len(g.expected) - 3)
        return out
    out = g.op("BatchNormalization", input, scale, shift, running_mean, running_var, epsilon_f=eps)
    if native:
        return (out, *_evaluation_statistics(g, running_mean, running_var, eps, input.dtype)) \
            + (None,) * (len(g.expected) - 3)
    return out


def _evaluation_statistics(g, running_mean, running_var, eps, dtype):
    """The saved statistics of a batch norm in evaluation: empty tensors on the CPU; CUDA's
    kernels return the running mean and 1/sqrt(running var + eps), of shape [C], which is
    what capture recorded when the model was on a GPU."""
    recorded = g.expected[1] if len(g.expected) > 1 else None
    if not (isinstance(recorded, torch.Tensor) and recorded.dim() == 1
            and not (isinstance(recorded.shape[0], int) and recorded.shape[0] == 0)):
        empty = g.const(torch.zeros(0, dtype=_torch_dtype(dtype)))
        return empty, empty
    inv_std = g.op("Reciprocal", g.op("Sqrt", g.op("Add", running_var,
                                                   g.const(eps, running_var.dtype))))
    return (cast(g, running_mean, expected_dtype(g, 1) or running_mean.dtype),
            cast(g, inv_std, expected_dtype(g, 2) or running_var.dtype))


@translates("aten::cudnn_batch_norm", "aten::miopen_batch_norm")
def cudnn_batch_norm(g, input, weight, bias, running_mean, running_var, training,
                     exponential_average_factor, epsilon):
    """cudnn_batch_norm(Tensor input, Tensor weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float exponential_average_factor, float epsilon) -> (Tensor, Tensor, Tensor, Tensor)

    The kernels batch_norm chooses on a GPU (cuDNN on cuda; miopen_batch_norm, the same
    arguments and three outputs, on ROCm): translated as batch_norm, as on the CPU."""
    return batch_norm(g, input, weight, bias, running_mean, running_var, training,
                      exponential_average_factor, epsilon)


def _batch_statistics_norm(g, x, scale, shift, eps):
    """(normalized x, mean [C], 1/sqrt(biased var + eps) [C]) over the batch and spatial axes."""
    r = rank(x)
    axes = [0] + list(range(2, r))
    mean = reduce(g, "ReduceMean", x, axes, True)
    centered = g.op("Sub", x, mean)
    variance = reduce(g, "ReduceMean", g.op("Mul", centered, centered), axes, True)
    inv_std = g.op("Reciprocal", g.op("Sqrt", g.op("Add", variance, g.const(eps, x.dtype))))
    trailing = list(range(1, r - 1))
    out = g.op("Mul", centered, inv_std)
    out = g.op("Mul", out, unsqueeze(g, scale, trailing) if trailing else scale)
    out = g.op("Add", out, unsqueeze(g, shift, trailing) if trailing else shift)
    flat = g.const([-1])
    return out, g.op("Reshape", mean, flat), g.op("Reshape", inv_std, flat)


def _layer_norm_decomposed(g, x, axes, weight, bias, eps):
    """(normalized x, mean, 1/std), the statistics kept over ``axes`` as native_layer_norm's."""
    mean = reduce(g, "ReduceMean", x, axes, True)
    centered = g.op("Sub", x, mean)
    variance = reduce(g, "ReduceMean", g.op("Mul", centered, centered), axes, True)
    inv_std = g.op("Reciprocal", g.op("Sqrt", g.op("Add", variance, g.const(eps, x.dtype))))
    out = g.op("Mul", centered, inv_std)
    if weight is not None:
        out = g.op("Mul", out, weight)
    if bias is not None:
        out = g.op("Add", out, bias)
    return out, mean, inv_std


@translates("aten::layer_norm", "aten::native_layer_norm")
def layer_norm(g, input, normalized_shape, weight=None, bias=None, eps=1e-5, *_):
    """layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor"""
    r = rank(input)
    axis = r - len(normalized_shape)
    native = isinstance(g.expected, (tuple, list))
    if g.opset < 17:
        out, mean, inv_std = _layer_norm_decomposed(g, input, list(range(axis, r)), weight,
                                                    bias, eps)
        return (out, mean, inv_std) if native else out
    scale = _ones_or(g, weight, normalized_shape, input.dtype, like=input, axis=axis)
    if native:
        out, mean, inv_std = g.op("LayerNormalization", input, scale, bias, axis_i=axis,
                                  epsilon_f=eps, outputs=3)
        # The statistics come out in the stash type (float32); torch's have the input's on the
        # CPU and float32 on CUDA: the dtype capture recorded.
        stats = expected_dtype(g, 1) or input.dtype
        if stats != ir.DataType.FLOAT:
            mean, inv_std = (g.op("Cast", v, to_i=int(stats)) for v in (mean, inv_std))
        return out, mean, inv_std
    return g.op("LayerNormalization", input, scale, bias, axis_i=axis, epsilon_f=eps)


@translates("aten::rms_norm")
def rms_norm(g, input, normalized_shape, weight=None, eps=None):
    """rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor"""
    # As torch: half and bfloat16 inputs are normalized in float32 (the weight applied there
    # too), and the default eps is that of the computation dtype, not of the input's.
    compute = ir.DataType.DOUBLE if input.dtype == ir.DataType.DOUBLE else ir.DataType.FLOAT
    if eps is None:
        eps = torch.finfo(_torch_dtype(compute)).eps
    r = rank(input)
    axis = r - len(normalized_shape)
    if g.opset >= 23 and g.fused_ops:
        # stash_type: the statistics in float32, as torch's.
        scale = _ones_or(g, weight, normalized_shape, input.dtype, like=input, axis=axis)
        return g.op("RMSNormalization", input, scale, axis_i=axis, epsilon_f=eps)
    x = cast(g, input, compute)
    squared = g.op("Mul", x, x)
    mean = reduce(g, "ReduceMean", squared, list(range(axis, r)), True)
    out = g.op("Mul", x, g.op("Reciprocal", g.op("Sqrt", g.op("Add", mean, g.const(eps, compute)))))
    if weight is not None:
        out = g.op("Mul", out, cast(g, weight, compute))
    return cast(g, out, input.dtype)


@translates("aten::group_norm", "aten::native_group_norm")
def group_norm(g, input, *args):
    """group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enabled=True) -> Tensor"""
    if "native" in g.provenance.aten:
        weight, bias, _n, channels, _hw, num_groups, eps = args
    else:
        num_groups, weight, bias, eps = (list(args) + [None, None, 1e-5])[:4]
        eps = 1e-5 if eps is None else eps
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
        # native_group_norm also returns the [N, G] mean and 1/std of each group.
        mean = reduce(g, "ReduceMean", grouped, [2], True)
        centered = g.op("Sub", grouped, mean)
        variance = reduce(g, "ReduceMean", g.op("Mul", centered, centered), [2], False)
        inv_std = g.op("Reciprocal", g.op("Sqrt", g.op("Add", variance, g.const(eps, input.dtype))))
        return out, g.op("Squeeze", mean, g.const([2])), inv_std
    return out
