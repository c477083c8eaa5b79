"""FuseDynamicQuantizedMatMul: Gemm(DequantizeLinear(DynamicQuantizeLinear(x)),
DequantizeLinear(int8 weight), bias) with transB=1 becomes MatMulInteger on the integers, its
int32 result scaled by x_scale * w_scale (and the bias added): the form of a dynamically
quantized linear that ONNX Runtime's own quantize_dynamic writes, computed in integers.
Precondition: the weight, its scale and zero point are constants; alpha = beta = 1."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type == op_type and node.domain == "" else None


def _dynamic_input(value: ir.Value) -> ir.Node | None:
    """The DynamicQuantizeLinear whose three outputs the DequantizeLinear making ``value``
    takes as they are."""
    dequantize = _producer(value, "DequantizeLinear")
    if dequantize is None or len(dequantize.inputs) != 3:
        return None
    dynamic = _producer(dequantize.inputs[0], "DynamicQuantizeLinear")
    if dynamic is None or list(dequantize.inputs) != list(dynamic.outputs):
        return None
    return dynamic


def _constant_weight(value: ir.Value):
    """(int8 weight [N, K], scale, zero point) of a DequantizeLinear of constants, per tensor
    or per output channel (axis 0)."""
    dequantize = _producer(value, "DequantizeLinear")
    if dequantize is None or len(dequantize.inputs) != 3:
        return None
    weight, scale, zero_point = dequantize.inputs
    if any(v is None or v.const_value is None for v in (weight, scale, zero_point)):
        return None
    if weight.dtype != ir.DataType.INT8 or len(weight.shape) != 2:
        return None
    axis = dequantize.attributes.get_int("axis", 1)
    if scale.const_value.size > 1 and axis != 0:
        return None
    return weight, scale, zero_point


class FuseDynamicQuantizedMatMul(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        modified = False
        for node in list(graph):
            if node.op_type != "Gemm" or node.domain != "":
                continue
            attributes = node.attributes
            if (attributes.get_int("transA", 0) != 0 or attributes.get_int("transB", 0) != 1
                    or attributes.get_float("alpha", 1.0) != 1.0
                    or attributes.get_float("beta", 1.0) != 1.0):
                continue
            dynamic = _dynamic_input(node.inputs[0])
            weight = _constant_weight(node.inputs[1])
            if dynamic is None or weight is None:
                continue
            _rewrite(graph, node, dynamic, *weight)
            modified = True
        return ir.passes.PassResult(model, modified)


def _constant(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    value = ir.Value(name=name, shape=ir.Shape(array.shape),
                     type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                     const_value=ir.tensor(array, name=name))
    graph.register_initializer(value)
    return value


def _rewrite(graph, gemm, dynamic, weight, scale, zero_point) -> None:
    quantized, x_scale, x_zero_point = dynamic.outputs
    name = gemm.name or "gemm"
    # MatMulInteger multiplies [M, K] by [K, N]: the weight is stored transposed, once.
    transposed = _constant(graph, f"{weight.name}_transposed",
                           np.ascontiguousarray(weight.const_value.numpy().T))
    nodes = []

    def add(op_type, inputs, dtype, **attributes):
        node = ir.node(op_type, inputs, attributes=attributes,
                       name=f"{name}/{op_type}_{len(nodes)}")
        node.outputs[0].dtype = dtype
        node.outputs[0].name = f"{name}/{op_type.lower()}_{len(nodes)}"
        nodes.append(node)
        return node.outputs[0]

    product = add("MatMulInteger", [quantized, transposed, x_zero_point, zero_point],
                  ir.DataType.INT32)
    widened = add("Cast", [product], ir.DataType.FLOAT, to=ir.DataType.FLOAT)
    combined_scale = add("Mul", [x_scale, scale], ir.DataType.FLOAT)
    out = add("Mul", [widened, combined_scale], ir.DataType.FLOAT)
    if len(gemm.inputs) > 2 and gemm.inputs[2] is not None:
        out = add("Add", [out, gemm.inputs[2]], ir.DataType.FLOAT)
    graph.insert_before(gemm, nodes)
    result = gemm.outputs[0]
    out.shape = result.shape
    ir.convenience.replace_all_uses_with(result, out, replace_graph_outputs=True)
    out.name, result.name = result.name, f"{result.name}_unused"
    graph.remove(gemm, safe=True)
