"""FoldWeightTranspose: Transpose(W) where W is an initializer used only there becomes a
transposed initializer. Precondition: W is a graph initializer with no other user."""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.tensor_adapters import TorchTensor

from onnxport.piecewise_tensor import PiecewiseTensor
from onnxport.tensor_values import torch_values


class FoldWeightTranspose(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        modified = False
        for node in list(graph):
            if node.op_type != "Transpose" or node.domain != "":
                continue
            weight = node.inputs[0]
            if weight is None or not weight.is_initializer() or len(weight.uses()) != 1:
                continue
            if weight.is_graph_input() or weight.is_graph_output():
                continue
            tensor = weight.const_value
            if tensor is None:
                continue
            perm_attr = node.attributes.get("perm")
            perm = list(perm_attr.value) if perm_attr is not None else list(
                reversed(range(len(tensor.shape))))
            folded = _transposed(tensor, perm, weight.name)
            new_value = ir.Value(name=folded.name, shape=ir.Shape(folded.shape),
                                 type=ir.TensorType(folded.dtype), const_value=folded)
            graph.register_initializer(new_value)
            ir.convenience.replace_all_uses_with(node.outputs[0], new_value)
            graph.remove(node, safe=True)
            graph.initializers.pop(weight.name)
            modified = True
        return ir.passes.PassResult(model, modified)


def _transposed(tensor: ir.TensorProtocol, perm: list[int], name: str) -> ir.TensorProtocol:
    shape = [tensor.shape[p] for p in perm]
    if isinstance(tensor, TorchTensor):
        transposed = torch_values(tensor).permute(*perm)  # a view: copied slice by slice when written
        return PiecewiseTensor(lambda rows: transposed[rows], dtype=tensor.dtype,
                               shape=ir.Shape(shape), name=f"{name}.T")
    array = tensor.numpy().transpose(perm).copy()
    return ir.tensor(array, name=f"{name}.T")
