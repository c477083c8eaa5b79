"""SharedMaskBias: Where(m, s, -inf) becomes Add(s, bias), bias = Where(m, 0, -inf) made once
per mask m and dtype. Precondition: the third input is the constant -inf; s is finite (attention
scores), so s + 0 and s + -inf are exactly what Where picked; s is not the constant 0 (then the
Where is such a bias already: this pass's own, found again by the next round).

A boolean attention mask is applied this way in every layer; one shared bias turns each
layer's Where into an Add, which ONNX Runtime fuses into its attention kernels."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnxport.passes._nodes import is_minus_infinity


def _scalar_initializer(graph: ir.Graph, name: str, dtype: ir.DataType) -> ir.Value:
    """A scalar 0 of ``dtype`` as an initializer (a Constant node would be one more node)."""
    while name in graph.initializers:
        name += "_"
    value = ir.Value(name=name, shape=ir.Shape([]), type=ir.TensorType(dtype),
                     const_value=ir.tensor(np.zeros((), dtype.numpy()), name=name))
    graph.register_initializer(value)
    return value


def _is_zero(value: ir.Value) -> bool:
    tensor = value.const_value
    return tensor is not None and tensor.size == 1 and not tensor.numpy().any()


class SharedMaskBias(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        biases: dict[tuple[int, ir.DataType], ir.Value] = {}
        modified = False
        for node in list(graph):
            if node.op_type != "Where" or node.domain != "" or len(node.inputs) != 3:
                continue
            mask, scores, fill = node.inputs
            if mask is None or scores is None or not is_minus_infinity(fill):
                continue
            if mask.dtype != ir.DataType.BOOL or scores.dtype != fill.dtype:
                continue
            if _is_zero(scores):
                continue
            key = (id(mask), scores.dtype)
            if key not in biases:
                zero = _scalar_initializer(graph, f"{mask.name}_bias_zero", scores.dtype)
                bias_node = ir.node("Where", [mask, zero, fill],
                                    name=f"{node.name}/MaskBias")
                bias_node.outputs[0].name = f"{mask.name}_bias"
                bias_node.outputs[0].shape, bias_node.outputs[0].dtype = mask.shape, scores.dtype
                graph.insert_before(node, bias_node)
                biases[key] = bias_node.outputs[0]
            node.op_type = "Add"
            node.resize_inputs(2)
            node.replace_input_with(0, scores)
            node.replace_input_with(1, biases[key])
            modified = True
        return ir.passes.PassResult(model, modified)
