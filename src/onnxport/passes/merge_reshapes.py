"""MergeReshapes: Reshape(Reshape(x, a), b) becomes Reshape(x, b), and a Reshape that gives x
its own shape becomes x. Precondition: b is a constant whose 0 entries (copies of the middle
value's dimensions) are known ints, written out; for the second, x's shape is known to be the
one the Reshape makes."""

from __future__ import annotations

import numpy as np
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


def _zeros_made_explicit(node: ir.Node, graph: ir.Graph) -> list[int] | None:
    """The Reshape's entries with each 0 (a copy of its input's dimension) replaced by that
    dimension where it is a known int, so that the input may change; None if one is not."""
    entries = _shape_entries(node)
    if entries is None or 0 not in entries:
        return entries
    dims = node.inputs[0].shape
    if _allows_zero(node) or dims is None or any(
            e == 0 and (i >= len(dims) or not isinstance(dims[i], int))
            for i, e in enumerate(entries)):
        return None
    explicit = [dims[i] if e == 0 else e for i, e in enumerate(entries)]
    node.replace_input_with(1, int64_initializer(graph, f"{node.inputs[1].name}_explicit",
                                                 explicit))
    return explicit


class MergeReshapes(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if node.op_type != "Reshape" or node.domain != "" or node.graph is None:
                continue
            source = node.inputs[0].producer() if node.inputs[0] is not None else None
            if source is not None and source.op_type == "Reshape" and source.domain == "":
                entries = _zeros_made_explicit(node, model.graph)
                if entries is not None and not _allows_zero(source):
                    node.replace_input_with(0, source.inputs[0])
                    modified = True
                    if not source.outputs[0].uses() and not source.outputs[0].is_graph_output():
                        source.graph.remove(source, safe=True)
            if is_identity_reshape(node) and not node.outputs[0].is_graph_output():
                ir.convenience.replace_all_uses_with(node.outputs[0], node.inputs[0])
                node.graph.remove(node, safe=True)
                modified = True
        return ir.passes.PassResult(model, modified)


def int64_initializer(graph: ir.Graph, name: str, entries: list[int]) -> ir.Value:
    """A 1-D int64 initializer holding ``entries`` (a shape or axes a pass writes), named
    ``name`` or, where that name is taken by other values, ``name_``...; one with the same
    name and values is reused."""
    while name in graph.initializers:
        existing = graph.initializers[name]
        if existing.const_value.numpy().reshape(-1).tolist() == entries:
            return existing
        name += "_"
    value = ir.Value(name=name, shape=ir.Shape([len(entries)]),
                     type=ir.TensorType(ir.DataType.INT64),
                     const_value=ir.Tensor(np.array(entries, dtype=np.int64), name=name))
    graph.register_initializer(value)
    return value
