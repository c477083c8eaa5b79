"""AttentionPresentOutputs: Transpose(k as [B, S, H, D], [0, 2, 1, 3]) beside a 3-D
Attention(q, k, v) with kv_num_heads H (k's 4-D source, or a Reshape of it or of k) becomes that
Attention's present_key output, and likewise for v and present_value. Precondition: opset >= 23,
the Attention has no past_key/past_value (its present is then its own key and value in heads)
and its optional outputs unused; [B, S] are the same dimensions as k's, H * D its width.

A decoder returns its keys and values as [B, H, S, D] caches. After Attention3D they were made
again by a Reshape and a Transpose each, per layer; ONNX Runtime's Attention writes them while
it reads them into heads anyway."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.passes._nodes import perm as _perm
from onnxport.passes.merge_reshapes import same_dim


def _int_attribute(node: ir.Node, name: str) -> int | None:
    attr = node.attributes.get(name)
    return attr.value if attr is not None else None


def _reshaped_dims(reshape: ir.Node) -> list | None:
    """The Reshape's output dimensions: its recorded shape, else read from constant entries
    (0 copies the input's dimension, one -1 is left unknown)."""
    if reshape.outputs[0].shape is not None:
        return list(reshape.outputs[0].shape)
    entries = reshape.inputs[1].const_value if reshape.inputs[1] is not None else None
    dims = reshape.inputs[0].shape
    allowzero = reshape.attributes.get("allowzero")
    if entries is None or dims is None or (allowzero is not None and allowzero.value):
        return None
    entries = [int(e) for e in entries.numpy().reshape(-1)]
    if any(e == 0 and i >= len(dims) for i, e in enumerate(entries)):
        return None
    return [dims[i] if e == 0 else (None if e == -1 else e) for i, e in enumerate(entries)]


def _heads_copies(x: ir.Value, heads: int, graph: ir.Graph) -> list[ir.Node]:
    """The Transposes (x as [B, S, heads, D], [0, 2, 1, 3]) used in the graph: of the 4-D value
    ``x`` was reshaped from, or of a Reshape of ``x`` or of that value, whose [B, S] are ``x``'s
    and heads * D its width."""
    if x.shape is None or len(x.shape) != 3 or not isinstance(x.shape[2], int):
        return []

    def in_heads(four) -> bool:
        return four is not None and len(four) == 4 and four[2] == heads \
            and isinstance(four[3], int) and heads * four[3] == x.shape[2] \
            and same_dim(four[0], x.shape[0]) and same_dim(four[1], x.shape[1])

    sources = [x]
    made_by = x.producer()
    if made_by is not None and made_by.op_type == "Reshape" and made_by.domain == "":
        sources.append(made_by.inputs[0])
    candidates = [v for v in sources if in_heads(list(v.shape) if v.shape else None)]
    for source in sources:
        for use in source.uses():
            if use.node.op_type == "Reshape" and use.node.domain == "" and use.idx == 0 \
                    and use.node.graph is graph and in_heads(_reshaped_dims(use.node)):
                candidates.append(use.node.outputs[0])
    return [use.node for value in candidates for use in value.uses()
            if use.node.op_type == "Transpose" and use.node.domain == ""
            and _perm(use.node) == [0, 2, 1, 3] and use.node.graph is graph
            and (use.node.outputs[0].uses() or use.node.outputs[0].is_graph_output())]


class AttentionPresentOutputs(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        if graph.opset_imports.get("", 0) < 23:
            return ir.passes.PassResult(model, False)
        modified = False
        for node in list(graph):
            if node.op_type == "Attention" and node.domain == "" and node.graph is graph \
                    and self._rewrite(graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _rewrite(self, graph: ir.Graph, attention: ir.Node) -> bool:
        heads = _int_attribute(attention, "kv_num_heads")
        inputs = list(attention.inputs)
        if heads is None or len(inputs) < 3 or any(v is not None for v in inputs[4:]) \
                or any(o.uses() or o.is_graph_output() for o in attention.outputs[1:]):
            return False
        copies = [_heads_copies(inputs[i], heads, graph) if inputs[i] is not None else []
                  for i in (1, 2)]
        if not any(copies):
            return False
        made = ir.node("Attention", inputs, attributes=dict(attention.attributes),
                       num_outputs=3, name=attention.name,
                       metadata_props=dict(attention.metadata_props))
        graph.insert_before(attention, made)
        old = attention.outputs[0]
        made.outputs[0].dtype, made.outputs[0].shape = old.dtype, old.shape
        ir.convenience.replace_all_uses_with(old, made.outputs[0], replace_graph_outputs=True)
        made.outputs[0].name, old.name = old.name, f"{old.name}__replaced"
        attention.name = f"{attention.name}__replaced"
        graph.remove(attention, safe=True)
        for present, found, role in zip(made.outputs[1:], copies, ("key", "value")):
            present.name = f"{made.outputs[0].name}__present_{role}"
            for copy in found:
                result = copy.outputs[0]
                returned = result.is_graph_output()
                if returned and present.is_graph_output():
                    continue  # one value cannot be two graph outputs of different names
                present.dtype, present.shape = result.dtype, result.shape
                ir.convenience.replace_all_uses_with(result, present, replace_graph_outputs=True)
                if returned or present.name.endswith(f"__present_{role}"):
                    present.name, result.name = result.name, f"{result.name}__replaced"
                graph.remove(copy, safe=True)
        return True
