"""FoldScaleIntoGemm: Mul(s, y), y = Gemm(a, B, C) seen through Reshapes that unflatten its
rows and Transposes, becomes y with B's and C's output columns scaled by s. Precondition: s is a
constant, scalar or varying along the one axis that is the Gemm's output column axis; B (used
nowhere else) and C are initializers; the Gemm's result and the values between feed only this.

ConvNeXt's layer scale (gamma * block(x), after the block's last Linear and its permute back to
channels first) is one such Mul per block: folded, it costs nothing at run time."""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from onnxport.piecewise_tensor import PiecewiseTensor
from onnxport.passes.flat_rowwise import _unflattened_rows
from onnxport.passes.merge_reshapes import same_shape
from onnxport.passes.fuse_conv_batchnorm import _constant, _initializer, _torch


def _scale_axis(scale: ir.TensorProtocol, rank: int) -> int | None:
    """The axis (of a rank-``rank`` value) along which ``scale`` varies; -1 for a scalar."""
    dims = list(scale.shape)
    if len(dims) > rank:
        return None
    varying = [rank - len(dims) + i for i, d in enumerate(dims) if d != 1]
    if not varying:
        return -1
    return varying[0] if len(varying) == 1 else None


def _gemm_column(value: ir.Value, axis: int) -> tuple[ir.Node, list[ir.Value]] | None:
    """The Gemm whose output columns are ``axis`` of ``value`` (-1: any axis, a scalar scale),
    and the values between them, each used once."""
    between = []
    while True:
        node = value.producer()
        if node is None or node.domain != "" or value.is_graph_output() \
                or len(value.uses()) != 1:
            return None
        if node.op_type == "Gemm":
            return (node, between) if axis in (-1, 1) else None
        if node.op_type == "Transpose":
            perm = node.attributes.get("perm")
            if perm is None:
                return None
            axis = axis if axis == -1 else list(perm.value)[axis]
        elif node.op_type == "Reshape":
            if _unflattened_rows(value) is None:
                return None
            rank = len(value.shape)
            if axis != -1:
                if axis != rank - 1:
                    return None
                axis = 1
        else:
            return None
        between.append(value)
        value = node.inputs[0]


class FoldScaleIntoGemm(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if node.op_type == "Mul" and node.domain == "" and self._fold(model.graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _fold(self, graph: ir.Graph, mul: ir.Node) -> bool:
        if mul.outputs[0].is_graph_output():
            return False
        for scale_value, y in (mul.inputs, reversed(mul.inputs)):
            scale = scale_value.const_value if scale_value is not None else None
            if scale is None or y is None or y.dtype != scale_value.dtype \
                    or not y.dtype.is_floating_point() \
                    or not same_shape(mul.outputs[0].shape, y.shape):
                continue  # the Mul must not broadcast y to a larger shape
            axis = _scale_axis(scale, len(y.shape))
            found = _gemm_column(y, axis) if axis is not None else None
            if found is None:
                continue
            gemm = found[0]
            weight = gemm.inputs[1]
            bias = gemm.inputs[2] if len(gemm.inputs) > 2 else None
            weight_tensor = _constant(weight)
            if weight_tensor is None or len(weight.uses()) != 1 or (
                    bias is not None and (_constant(bias) is None or len(bias.uses()) != 1)):
                continue
            transposed = gemm.attributes.get("transB")
            self._scale(graph, gemm, weight, bias, scale,
                        transposed is not None and transposed.value == 1)
            ir.convenience.replace_all_uses_with(mul.outputs[0], y)
            graph.remove(mul, safe=True)
            return True
        return False

    @staticmethod
    def _scale(graph, gemm, weight, bias, scale, transposed):
        factor = _torch(scale).detach().reshape(-1)
        weight_tensor = weight.const_value

        def scaled_weight(rows: slice) -> torch.Tensor:
            # Written a slice of rows at a time (ConvNeXt's 3072 x 768 weights: the whole
            # product at once doubled an export's extra memory).
            w = _torch(weight_tensor).detach()[rows]
            column = factor.to(w.dtype)
            if transposed and column.numel() > 1:  # one factor per row of the weight
                column = column[rows].reshape(-1, 1)
            return w * column

        new_weight = _initializer(PiecewiseTensor(scaled_weight, dtype=weight_tensor.dtype,
                                                  shape=ir.Shape(weight_tensor.shape),
                                                  name=weight.name))
        gemm.replace_input_with(1, None)
        graph.initializers.pop(weight.name)
        graph.register_initializer(new_weight)
        gemm.replace_input_with(1, new_weight)
        if bias is None:
            return
        bias_tensor = bias.const_value
        columns = weight_tensor.shape[0] if transposed else weight_tensor.shape[1]
        shape = list(bias_tensor.shape) if factor.numel() == 1 else (
            [1, columns] if len(bias_tensor.shape) == 2 else [columns])

        def scaled_bias() -> ir.TensorProtocol:
            b = _torch(bias_tensor).detach()
            return TorchTensor((b * factor.to(b.dtype)).reshape(shape).contiguous(),
                               name=bias.name)

        new_bias = _initializer(ir.LazyTensor(scaled_bias, dtype=bias_tensor.dtype,
                                              shape=ir.Shape(shape), name=bias.name))
        gemm.replace_input_with(2, None)
        graph.initializers.pop(bias.name)
        graph.register_initializer(new_bias)
        gemm.replace_input_with(2, new_bias)
