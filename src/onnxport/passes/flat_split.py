"""FlatSplit: Split(Reshape(rows [M, N] -> [..., N]), last axis) becomes Split(rows, axis -1),
each part unflattened by its own Reshape (merged with the Reshape that follows by MergeReshapes).
Precondition: the Reshape keeps the last axis (N) and the Split cuts that axis only.

GPT-2's fused Q/K/V Linear makes [M, 3E] rows, unflattens them to [B, S, 3E] and splits that;
split on the rows, each part goes from [M, E] to its [B, S, H, D] head shape in one Reshape."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.passes._nodes import reshape_after
from onnxport.passes.flat_rowwise import _unflatten_shape, _unflattened_rows


class FlatSplit(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if node.op_type == "Split" and node.domain == "" and self._flatten(model.graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _flatten(self, graph: ir.Graph, node: ir.Node) -> bool:
        reshape = _unflattened_rows(node.inputs[0])
        if reshape is None or reshape.graph is not graph:
            return False
        unflat = reshape.outputs[0].shape
        rank = len(unflat)
        axis = node.attributes.get("axis")
        if (axis.value if axis is not None else 0) not in (-1, rank - 1):
            return False
        parts = node.outputs
        if any(p.shape is None or len(p.shape) != rank or not isinstance(p.shape[-1], int)
               for p in parts):
            return False
        shapes = [_unflatten_shape(graph, [reshape], p.shape[-1]) for p in parts]
        if any(s is None for s in shapes):
            return False
        rows = reshape.inputs[0]
        node.replace_input_with(0, rows)
        node.attributes["axis"] = ir.AttrInt64("axis", -1)
        for part, shape in zip(parts, shapes):
            reshape_after(graph, node, part, shape, f"{node.name}/Reshape_{part.name}",
                          ir.Shape([rows.shape[0], part.shape[-1]]))
        if not any(o.uses() or o.is_graph_output() for o in reshape.outputs):
            graph.remove(reshape, safe=True)
        return True
