"""RemoveUnusedNodes: onnx_ir's dead-code elimination, and what the nodes of a removed If's or
Loop's subgraphs still read let go. Precondition: none.

onnx_ir removes a node whose outputs nothing reads, but the nodes inside its subgraphs keep
reading values of the enclosing graph: an initializer only a dead loop's body read stayed in
the file (ONNX Runtime warns "Removing initializer ... not used by any node" on load), and so
did a node only such a body read. Those reads are dropped, and the elimination runs again."""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common


class RemoveUnusedNodes(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = common.RemoveUnusedNodesPass()(model).modified
        live = set(ir.traversal.RecursiveGraphIterator(model.graph))
        released = False
        read = [*model.graph.inputs, *model.graph.initializers.values(),
                *(output for node in live for output in node.outputs)]
        for value in read:
            for user, index in list(value.uses()):
                if user not in live:
                    user.replace_input_with(index, None)
                    released = True
        if released:
            common.RemoveUnusedNodesPass()(model)
        return ir.passes.PassResult(model, modified=modified or released)
