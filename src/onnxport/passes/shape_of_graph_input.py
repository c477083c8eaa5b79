"""ShapeOfGraphInput: Shape(v, start, end) becomes Shape(x, start', end') of a graph input x with
the same named dimensions there, so that v need not be kept for its shape alone. Precondition:
opset >= 15 (Shape's start/end), and every dimension read is an int or a named symbolic one,
at least one named (all-int shapes are folded to constants by FoldConstants)."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.passes.merge_reshapes import same_dim


def _read_dims(node: ir.Node) -> tuple[int, int, list] | None:
    x = node.inputs[0]
    if x is None or x.shape is None:
        return None
    dims = list(x.shape)
    start_attr, end_attr = node.attributes.get("start"), node.attributes.get("end")
    start = start_attr.value if start_attr is not None else 0
    end = end_attr.value if end_attr is not None else len(dims)
    start, end = (max(0, min(len(dims), i + len(dims) if i < 0 else i)) for i in (start, end))
    read = dims[start:end]
    if not read or any(not isinstance(d, int) and d.value is None for d in read) \
            or all(isinstance(d, int) for d in read):
        return None
    return start, end, read


def _find(inputs: list[ir.Value], read: list) -> tuple[ir.Value, int] | None:
    for graph_input in inputs:
        if graph_input.shape is None:
            continue
        dims = list(graph_input.shape)
        for offset in range(len(dims) - len(read) + 1):
            if all(same_dim(a, b) for a, b in zip(dims[offset:offset + len(read)], read)):
                return graph_input, offset
    return None


class ShapeOfGraphInput(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if model.opset_imports.get("", 18) < 15:
            return ir.passes.PassResult(model, False)
        modified = False
        for node in list(model.graph):
            if node.op_type != "Shape" or node.domain != "" or node.inputs[0] is None \
                    or node.inputs[0].is_graph_input():
                continue
            known = _read_dims(node)
            if known is None:
                continue
            _, _, read = known
            found = _find(list(model.graph.inputs), read)
            if found is None:
                continue
            graph_input, offset = found
            node.replace_input_with(0, graph_input)
            node.attributes["start"] = ir.AttrInt64("start", offset)
            node.attributes["end"] = ir.AttrInt64("end", offset + len(read))
            modified = True
        return ir.passes.PassResult(model, modified)
