"""GroupedQueryMatMul: MatMul(a, r) where r is kv's heads each repeated n times (repeat_kv,
possibly transposed over its last two axes) becomes Reshape(MatMul(Reshape(a, [B, Hkv, n * S,
X]), kv), [B, Hkv * n, S, Y]): the n query heads of a group read their key/value head as one
taller matrix. Precondition: a and r 4-D, heads and repeats static (AttentionGroupedHeads'
reading of the repeat chain); a scalar Mul right after the MatMul (the attention scale) stays
next to it.

Below opset 23 grouped-query attention (Llama's 2 key/value heads for 4 query heads) spells each
key and value head n times with Unsqueeze, Expand (a copy) and Reshape; grouping the queries
instead costs two Reshapes, which ONNX Runtime runs in place, and no copy. Query head h is
row block h % n of group h // n, which is the head repeat_kv pairs it with."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.passes._nodes import perm
from onnxport.passes.attention_grouped_heads import _repeated_source
from onnxport.passes.merge_reshapes import int64_initializer

_LAST_TWO_SWAPPED = [0, 1, 3, 2]


def _repeat(value: ir.Value | None) -> tuple[ir.Value, bool, int] | None:
    """(kv, transposed, heads) when ``value`` is repeat_kv(kv), or its Transpose over the last
    two axes, else None."""
    source = _repeated_source(value)
    if source is not None:
        return source, False, value.shape[1]
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Transpose" or node.domain != "" \
            or perm(node) != _LAST_TWO_SWAPPED:
        return None
    source = _repeated_source(node.inputs[0])
    return (source, True, node.inputs[0].shape[1]) if source is not None else None


_SAME_SHAPE = {"Softmax", "Cast", "Identity", "Neg", "Exp", "Relu", "Sigmoid", "Tanh"}
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Where"}


def _heads_of(value: ir.Value | None, depth: int = 8) -> int | None:
    """The size of axis 1 of ``value`` when it is known 4-D, read through the elementwise ops
    between scores and weights (the translation leaves their shapes unrecorded)."""
    if value is None:
        return None
    if value.shape is not None:
        dims = list(value.shape)
        return dims[1] if len(dims) == 4 and isinstance(dims[1], int) else None
    node = value.producer()
    if node is None or node.domain != "" or depth == 0:
        return None
    if node.op_type in _SAME_SHAPE:
        if node.op_type == "Softmax" and node.attributes.get_int("axis", -1) not in (-1, 3):
            return None
        return _heads_of(node.inputs[0], depth - 1)
    if node.op_type == "Reshape":
        target = node.inputs[1].const_value if len(node.inputs) > 1 else None
        entries = target.numpy().reshape(-1).tolist() if target is not None else []
        return int(entries[1]) if len(entries) == 4 and entries[1] > 0 else None
    if node.op_type not in _BROADCAST:
        return None
    heads = set()
    for operand in node.inputs:
        if operand is None:
            return None
        if operand.shape is not None and len(operand.shape) != 4:
            return None  # a lower rank broadcasts too, but not along axis 1 known here
        found = _heads_of(operand, depth - 1)
        if found is None:
            return None
        heads.add(found)
    heads.discard(1)
    return heads.pop() if len(heads) == 1 else (1 if not heads else None)


def _scalar_constant(value: ir.Value | None) -> bool:
    tensor = value.const_value if value is not None else None
    return tensor is not None and tensor.size == 1


class GroupedQueryMatMul(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        modified = False
        for node in list(graph):
            if node.op_type == "MatMul" and node.domain == "" and self._rewrite(graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    @staticmethod
    def _rewrite(graph: ir.Graph, matmul: ir.Node) -> bool:
        left, right = matmul.inputs
        repeat = _repeat(right)
        if repeat is None:
            return False
        kv, transposed, heads = repeat
        groups = kv.shape[1]
        if _heads_of(left) != heads or heads % groups:
            return False
        name = matmul.name
        new_nodes = []
        if transposed:
            swap = ir.node("Transpose", [kv], {"perm": ir.AttrInt64s("perm", _LAST_TWO_SWAPPED)},
                           name=f"{name}/GroupedTranspose")
            dims = list(kv.shape)
            swap.outputs[0].shape = ir.Shape([dims[0], dims[1], dims[3], dims[2]])
            swap.outputs[0].dtype = kv.dtype
            swap.outputs[0].name = f"{matmul.outputs[0].name}__{kv.name}_transposed"
            new_nodes.append(swap)
            kv = swap.outputs[0]
        # 0 keeps the batch and the last axis as they are: dynamic sizes need no Shape.
        grouped_shape = int64_initializer(graph, f"grouped_{groups}_heads", [0, groups, -1, 0])
        heads_shape = int64_initializer(graph, f"grouped_{heads}_heads", [0, heads, -1, 0])
        group = ir.node("Reshape", [left, grouped_shape], name=f"{name}/GroupQueries")
        product = ir.node("MatMul", [group.outputs[0], kv], name=f"{name}/Grouped",
                          metadata_props=dict(matmul.metadata_props))
        new_nodes += [group, product]
        for value, label in ((group.outputs[0], "queries"), (product.outputs[0], "product")):
            value.dtype, value.name = left.dtype, f"{matmul.outputs[0].name}__grouped_{label}"
        last = product
        old = matmul.outputs[0]
        uses = list(old.uses())
        scale = uses[0][0] if len(uses) == 1 else None
        # ONNX Runtime folds a scalar Mul into the MatMul before it (FusedMatMul's alpha).
        keep_scale = (scale is not None and scale.op_type == "Mul" and scale.domain == ""
                      and not old.is_graph_output()
                      and _scalar_constant(scale.inputs[1 - uses[0][1]]))
        if keep_scale:
            scaled = ir.node("Mul", [product.outputs[0], scale.inputs[1 - uses[0][1]]],
                             name=f"{scale.name}/Grouped",
                             metadata_props=dict(scale.metadata_props))
            scaled.outputs[0].dtype = left.dtype
            scaled.outputs[0].name = f"{scale.outputs[0].name}__grouped"
            new_nodes.append(scaled)
            last, old = scaled, scale.outputs[0]
        ungroup = ir.node("Reshape", [last.outputs[0], heads_shape], name=f"{name}/UngroupHeads")
        new_nodes.append(ungroup)
        new = ungroup.outputs[0]
        new.shape, new.dtype = old.shape, old.dtype
        replaced = [matmul, scale] if keep_scale else [matmul]
        ir.convenience.replace_nodes_and_values(graph, replaced[-1], replaced, new_nodes,
                                                [old], [new])
        return True
