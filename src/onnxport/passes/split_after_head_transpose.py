"""SplitAfterHeadTranspose: Split(x, last axis) whose every part goes Reshape(s) -> [B, S, h_i, D]
-> Transpose [0, 2, 1, 3] becomes Split(Transpose(Reshape(x, [B, S, -1, D])), axis 1, [h_i]).
Precondition: the parts, their Reshapes and Transposes have no other users, each part's width is
h_i * D with one static D, and [B, S] is known (static ints, or one Concat shared by the parts).

GPT-2's fused Q/K/V projection is cut into heads by three Reshape/Transpose pairs; one pair for
all three is four nodes fewer per layer, and the key then comes out of the Split untransposed,
so ONNX Runtime folds q @ k^T's Transpose into FusedMatMul (transB) instead of merging it with
the present key's Transpose into a second one."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.passes._nodes import perm as _perm
from onnxport.passes.merge_reshapes import int64_initializer, same_dim


def _only_use(value: ir.Value) -> ir.Node | None:
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output():
        return None
    return uses[0].node


def _heads_chain(part: ir.Value, graph: ir.Graph) -> tuple[list[ir.Node], ir.Node] | None:
    """(the Reshapes, the Transpose [0, 2, 1, 3]) taking ``part`` to its heads."""
    reshapes, value = [], part
    while True:
        node = _only_use(value)
        if node is None or node.graph is not graph or node.domain != "":
            return None
        if node.op_type == "Transpose":
            break
        if node.op_type != "Reshape" or node.inputs[0] is not value:
            return None
        reshapes.append(node)
        value = node.outputs[0]
    if not reshapes or _perm(node) != [0, 2, 1, 3] or value.shape is None or len(value.shape) != 4:
        return None
    return reshapes, node


def _leading_concat(reshape: ir.Node) -> list[ir.Value] | None:
    """The inputs of the Concat making this Reshape's shape, but its last (a 1-entry constant):
    the leading dimensions of a dynamic unflatten [B, S, width]."""
    concat = reshape.inputs[1].producer() if reshape.inputs[1] is not None else None
    if concat is None or concat.op_type != "Concat" or concat.domain != "":
        return None
    last, leading = concat.inputs[-1], list(concat.inputs[:-1])
    if last is None or last.const_value is None or last.const_value.size != 1 \
            or reshape.outputs[0].shape is None or len(reshape.outputs[0].shape) != 3:
        return None
    # A constant -1 or 0 among them would mean something else once -1 follows.
    if any(v is None or (v.const_value is not None and (v.const_value.numpy() <= 0).any())
           for v in leading):
        return None
    return leading


def _copies_leading_dims(reshape: ir.Node) -> bool:
    """A constant shape [0, 0, h, D]: the two leading dimensions copied from a rank-3 input."""
    entries = reshape.inputs[1].const_value if reshape.inputs[1] is not None else None
    attr = reshape.attributes.get("allowzero")
    return entries is not None and (attr is None or attr.value == 0) \
        and [int(e) for e in entries.numpy().reshape(-1)][:2] == [0, 0]


class SplitAfterHeadTranspose(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if node.op_type == "Split" and node.domain == "" and self._rewrite(model.graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _rewrite(self, graph: ir.Graph, split: ir.Node) -> bool:
        x = split.inputs[0]
        if x is None or x.shape is None or len(split.outputs) < 2:
            return False
        axis = split.attributes.get("axis")
        if (axis.value if axis is not None else 0) not in (-1, len(x.shape) - 1):
            return False
        chains = [_heads_chain(part, graph) for part in split.outputs]
        if any(c is None for c in chains):
            return False
        heads = [transpose.inputs[0].shape for _, transpose in chains]
        depth = heads[0][3]
        if not isinstance(depth, int) or any(
                not (same_dim(h[0], heads[0][0]) and same_dim(h[1], heads[0][1])
                     and isinstance(h[2], int) and h[3] == depth) for h in heads):
            return False
        widths = [part.shape[-1] if part.shape is not None else None for part in split.outputs]
        if any(w != h[2] * depth for w, h in zip(widths, heads)):
            return False
        shape = self._heads_shape(graph, split, chains, heads[0], depth)
        if shape is None:
            return False
        self._replace(graph, split, chains, shape, [h[2] for h in heads])
        return True

    def _heads_shape(self, graph, split, chains, head_shape, depth) -> ir.Value | None:
        """[B, S, -1, D] for x: a constant, or a Concat of the dynamic B and S."""
        batch, sequence = head_shape[0], head_shape[1]
        if isinstance(batch, int) and isinstance(sequence, int):
            return int64_initializer(graph, "heads_shape", [batch, sequence, -1, depth])
        # Dynamic: each part unflattened to [B, S, width] by a Concat(B..., S..., [width]),
        # then cut into heads by a constant [0, 0, h, D].
        leading = []
        for reshapes, _ in chains:
            if len(reshapes) != 2 or not _copies_leading_dims(reshapes[1]):
                return None
            made = _leading_concat(reshapes[0])
            if made is None or (leading and made != leading):
                return None
            leading = made
        tail = int64_initializer(graph, "heads_shape_tail", [-1, depth])
        concat = ir.node("Concat", [*leading, tail], attributes={"axis": 0},
                         name=f"{split.name}/HeadsShape", metadata_props=dict(split.metadata_props))
        graph.insert_before(split, concat)
        concat.outputs[0].name = f"{split.name}_heads_shape"
        concat.outputs[0].dtype, concat.outputs[0].shape = ir.DataType.INT64, ir.Shape([4])
        return concat.outputs[0]

    def _replace(self, graph, split, chains, shape, head_counts) -> None:
        x = split.inputs[0]
        name, meta = split.name, dict(split.metadata_props)
        split.name = f"{name}__replaced"
        reshape = ir.node("Reshape", [x, shape], name=f"{name}/HeadsReshape", metadata_props=meta)
        transpose = ir.node("Transpose", reshape.outputs, attributes={"perm": [0, 2, 1, 3]},
                            name=f"{name}/HeadsTranspose", metadata_props=meta)
        opset = graph.opset_imports.get("", 18)
        if opset >= 13:
            sizes = int64_initializer(graph, "head_counts", head_counts)
            new_split = ir.node("Split", [transpose.outputs[0], sizes], attributes={"axis": 1},
                                num_outputs=len(head_counts), name=name, metadata_props=meta)
        else:
            new_split = ir.node("Split", transpose.outputs,
                                attributes={"axis": 1, "split": head_counts},
                                num_outputs=len(head_counts), name=name, metadata_props=meta)
        graph.insert_before(split, [reshape, transpose, new_split])
        first = chains[0][1].inputs[0].shape
        reshape.outputs[0].name = f"{x.name}__heads"
        reshape.outputs[0].dtype = x.dtype
        reshape.outputs[0].shape = ir.Shape([first[0], first[1], sum(head_counts), first[3]])
        transpose.outputs[0].name = f"{x.name}__heads_t"
        transpose.outputs[0].dtype = x.dtype
        transpose.outputs[0].shape = ir.Shape([first[0], sum(head_counts), first[1], first[3]])
        for (reshapes, old), part in zip(chains, new_split.outputs):
            result = old.outputs[0]
            part.dtype, part.shape = result.dtype, result.shape
            ir.convenience.replace_all_uses_with(result, part, replace_graph_outputs=True)
            part.name, result.name = result.name, f"{result.name}__replaced"
            graph.remove([old, *reversed(reshapes)], safe=True)
        graph.remove(split, safe=True)
