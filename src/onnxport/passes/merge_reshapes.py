"""MergeReshapes: Reshape(Reshape(x, a), b) becomes Reshape(x, b), and a Reshape that gives x
its own shape becomes x. Precondition: b is a constant without 0 entries (a 0 would copy a
dimension of the middle value), or x's shape is known to be the one a Reshape would make."""

from __future__ import annotations

import onnx_ir as ir


def _shape_entries(node: ir.Node) -> list[int] | None:
    if len(node.inputs) < 2 or node.inputs[1] is None or node.inputs[1].const_value is None:
        return None
    return [int(d) for d in node.inputs[1].const_value.numpy().reshape(-1)]


def _allows_zero(node: ir.Node) -> bool:
    attr = node.attributes.get("allowzero")
    return attr is not None and attr.value == 1


def same_dim(a, b) -> bool:
    """Known to be equal: two equal ints, or two symbolic dimensions of the same name."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is not None and b is not None and a.value is not None and a.value == b.value


def same_shape(a: ir.Shape | None, b: ir.Shape | None) -> bool:
    return (a is not None and b is not None and len(a) == len(b)
            and all(same_dim(x, y) for x, y in zip(a, b)))


def is_identity_reshape(node: ir.Node) -> bool:
    """The Reshape gives its input the shape it already has."""
    x, out = node.inputs[0], node.outputs[0]
    if x is None or x.shape is None:
        return False
    if same_shape(x.shape, out.shape):
        return True
    entries = _shape_entries(node)
    if entries is None or len(entries) != len(x.shape) or _allows_zero(node):
        return False
    # Each entry keeps its dimension (equal, or 0 = copy); one -1 is then the one left over.
    unknown = [i for i, (e, d) in enumerate(zip(entries, x.shape))
               if not (e == 0 or (isinstance(d, int) and e == d))]
    return not unknown or (len(unknown) == 1 and entries[unknown[0]] == -1)


class MergeReshapes(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if node.op_type != "Reshape" or node.domain != "" or node.graph is None:
                continue
            source = node.inputs[0].producer() if node.inputs[0] is not None else None
            if source is not None and source.op_type == "Reshape" and source.domain == "":
                entries = _shape_entries(node)
                if entries is not None and 0 not in entries and not _allows_zero(source):
                    node.replace_input_with(0, source.inputs[0])
                    modified = True
                    if not source.outputs[0].uses() and not source.outputs[0].is_graph_output():
                        source.graph.remove(source, safe=True)
            if is_identity_reshape(node) and not node.outputs[0].is_graph_output():
                ir.convenience.replace_all_uses_with(node.outputs[0], node.inputs[0])
                node.graph.remove(node, safe=True)
                modified = True
        return ir.passes.PassResult(model, modified)
