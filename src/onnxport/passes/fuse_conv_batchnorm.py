"""FuseConvBatchNorm: Conv followed by an inference BatchNormalization becomes one Conv with
scaled weights and a shifted bias. Precondition: the Conv output feeds only the
BatchNormalization, and the Conv weight (used nowhere else), its bias and all BatchNormalization
parameters are initializers."""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from onnxport.piecewise_tensor import PiecewiseTensor
from onnxport.tensor_values import torch_values


_torch = torch_values  # on the CPU, whatever device the model's weights are on


def _constant(value: ir.Value | None) -> ir.TensorProtocol | None:
    if value is None or not value.is_initializer() or value.is_graph_input():
        return None
    return value.const_value


class FuseConvBatchNorm(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        modified = False
        for norm in list(graph):
            if norm.op_type != "BatchNormalization" or norm.domain != "" or len(norm.outputs) != 1:
                continue
            if norm.attributes.get("training_mode") is not None and norm.attributes["training_mode"].value:
                continue
            conv_output = norm.inputs[0]
            conv = conv_output.producer() if conv_output is not None else None
            if conv is None or conv.op_type != "Conv" or conv.domain != "":
                continue
            if len(conv_output.uses()) != 1 or conv_output.is_graph_output():
                continue
            weight = conv.inputs[1]
            if weight is None or len(weight.uses()) != 1:
                continue
            bias = conv.inputs[2] if len(conv.inputs) > 2 else None
            tensors = [_constant(v) for v in (weight, *norm.inputs[1:5])]
            if any(t is None for t in tensors) or (bias is not None and (
                    _constant(bias) is None or len(bias.uses()) != 1)):
                continue
            epsilon_attr = norm.attributes.get("epsilon")
            epsilon = epsilon_attr.value if epsilon_attr is not None else 1e-5
            self._fuse(graph, conv, norm, weight, bias, tensors, _constant(bias), epsilon)
            modified = True
        return ir.passes.PassResult(model, modified)

    @staticmethod
    def _fuse(graph, conv, norm, weight, bias, tensors, bias_tensor, epsilon):
        weight_tensor, scale, shift, mean, var = tensors
        dtype = weight_tensor.dtype
        channels = weight_tensor.shape[0]

        def factor() -> torch.Tensor:
            return _torch(scale).double() / torch.sqrt(_torch(var).double() + epsilon)

        def fused_weight(channels: slice) -> torch.Tensor:
            # The per-channel factor in double, the product in the weight's dtype.
            w = _torch(weight_tensor)[channels]
            shape = [-1] + [1] * (w.dim() - 1)
            return w * factor()[channels].to(w.dtype).reshape(shape)

        def fused_bias() -> ir.TensorProtocol:
            b = _torch(bias_tensor).double() if bias_tensor is not None else torch.zeros(channels, dtype=torch.double)
            result = (b - _torch(mean).double()) * factor() + _torch(shift).double()
            return TorchTensor(result.to(_torch(weight_tensor).dtype))

        weight_name = weight.name
        bias_name = bias.name if bias is not None else _bias_name(graph, weight_name)
        new_weight = _initializer(PiecewiseTensor(fused_weight, dtype=dtype,
                                                  shape=ir.Shape(weight_tensor.shape),
                                                  name=weight_name))
        new_bias = _initializer(ir.LazyTensor(fused_bias, dtype=dtype, shape=ir.Shape([channels]),
                                              name=bias_name))
        conv.replace_input_with(1, None)
        graph.initializers.pop(weight_name)
        if bias is not None:
            conv.replace_input_with(2, None)
            graph.initializers.pop(bias.name)
        graph.register_initializer(new_weight)
        graph.register_initializer(new_bias)
        conv.replace_input_with(1, new_weight)
        if len(conv.inputs) > 2:
            conv.replace_input_with(2, new_bias)
        else:
            conv.resize_inputs(3)
            conv.replace_input_with(2, new_bias)
        norm_output = norm.outputs[0]
        conv_output = conv.outputs[0]
        conv_output.shape = norm_output.shape
        if norm_output.is_graph_output():
            name = norm_output.name
            norm_output.name = f"{name}_replaced"
            conv_output.name = name
        ir.convenience.replace_all_uses_with(norm_output, conv_output, replace_graph_outputs=True)
        graph.remove(norm, safe=True)


def _bias_name(graph: ir.Graph, weight_name: str) -> str:
    base = weight_name[: -len("weight")] + "bias" if weight_name.endswith("weight") else f"{weight_name}_bias"
    name = base
    while name in graph.initializers:
        name += "_"
    return name


def _initializer(tensor: ir.TensorProtocol) -> ir.Value:
    """An initializer holding a lazy tensor: computed when the model is written, not kept."""
    return ir.Value(name=tensor.name, shape=ir.Shape(tensor.shape),
                    type=ir.TensorType(tensor.dtype), const_value=tensor)
