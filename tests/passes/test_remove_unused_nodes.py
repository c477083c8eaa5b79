"""RemoveUnusedNodes: what only a removed loop's body read leaves the file with the loop."""

from typing import List

import onnx_ir as ir
import torch
from torch import Tensor, nn

import onnxport
from onnxport.passes.remove_unused_nodes import RemoveUnusedNodes


class _OnlyTheCountRead(nn.Module):
    def forward(self, x):
        rows: List[Tensor] = []
        for i in range(x.size(0)):
            rows.append(x[i] * 3.5)
        return torch.tensor(len(rows)) + x.sum()


def test_what_a_dead_loop_read_goes_with_it():
    # Only the loop's count is read: the Loop goes, and the constants its body read stayed
    # as initializers no node reads (ONNX Runtime warned on load).
    model = torch.jit.script(_OnlyTheCountRead())
    program = onnxport.export(model, (torch.randn(4, 3),), input_names=["x"],
                              dynamic_axes={"x": {0: "n"}})
    graph = program.model.graph
    assert "Loop" not in [node.op_type for node in graph]
    read = {value.name for node in ir.traversal.RecursiveGraphIterator(graph)
            for value in node.inputs if value is not None}
    assert set(graph.initializers) <= read
    for rows in (0, 4, 7):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(program(x)[0], model(x))


def _graph_with_a_dead_loop() -> ir.Model:
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    weight = ir.Value(name="w", const_value=ir.tensor([1.0, 2.0, 3.0]))
    doubled = ir.node("Add", [x, x], num_outputs=1)
    body_x = ir.Value(name="i", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))
    body_c = ir.Value(name="c", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    product = ir.node("Mul", [doubled.outputs[0], weight])
    body = ir.Graph([body_x, body_c], [body_c, *product.outputs], nodes=[product])
    count = ir.Value(name="n", const_value=ir.tensor(2, dtype=ir.DataType.INT64))
    loop = ir.node("Loop", [count, None], attributes={"body": body}, num_outputs=1)
    out = ir.node("Neg", [x])
    graph = ir.Graph([x], list(out.outputs), nodes=[doubled, loop, out],
                     initializers=[weight, count], opset_imports={"": 18})
    return ir.Model(graph, ir_version=10)


def test_a_dead_loop_s_reads_of_nodes_and_initializers_are_let_go():
    model = _graph_with_a_dead_loop()
    assert RemoveUnusedNodes()(model).modified
    assert [node.op_type for node in model.graph] == ["Neg"]
    assert not model.graph.initializers
