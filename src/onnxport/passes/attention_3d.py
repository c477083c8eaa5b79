"""Attention3D: an Attention whose q, k, v are Transpose(x, [0, 2, 1, 3]) of [B, S, heads, D]
values (q and k possibly through a RotaryEmbedding) and whose output is transposed back the same
way takes the 3-D form instead: [B, S, heads * D] inputs with q_num_heads/kv_num_heads, no head
Transposes. Precondition: opset >= 23, 4-D shapes known with static heads and head sizes, a mask
(if any) with one head; a transposed value used elsewhere too (a returned key cache) is made
again from the 3-D one for those users.

The heads' Reshapes then merge with the projections' rows (MergeReshapes), and ONNX Runtime's
Attention kernel reads [B, S, heads * D] directly."""

from __future__ import annotations

import onnx_ir as ir

from onnxport.passes._nodes import perm as _perm, producer

from onnxport.passes.merge_reshapes import int64_initializer

_HEADS_PERM = [0, 2, 1, 3]


def _static_4d(value: ir.Value | None) -> list | None:
    if value is None or value.shape is None or len(value.shape) != 4:
        return None
    dims = list(value.shape)
    return dims if isinstance(dims[1], int) and isinstance(dims[3], int) else None


def _heads_input(value: ir.Value, allow_rotary: bool):
    """(transpose, rotary or None) when ``value`` is [RotaryEmbedding](Transpose(x, perm))."""
    rotary = producer(value, "RotaryEmbedding") if allow_rotary else None
    if rotary is not None:
        if len(rotary.inputs) != 3 or any(a in rotary.attributes for a in
                                          ("interleaved", "rotary_embedding_dim", "num_heads")):
            return None
        value = rotary.inputs[0]
    transpose = producer(value, "Transpose")
    if transpose is None or _perm(transpose) != _HEADS_PERM or _static_4d(value) is None:
        return None
    x = transpose.inputs[0]  # [B, S, heads, D]
    if x is None or x.shape is None or len(x.shape) != 4 \
            or not all(isinstance(d, int) for d in x.shape[2:]):
        return None
    return transpose, rotary


def _only_user(value: ir.Value) -> ir.Node | None:
    uses = value.uses()
    if len(uses) != 1 or value.is_graph_output():
        return None
    return uses[0][0]


def _mask_rows_condition(where: ir.Node, mask: ir.Value | None) -> int | None:
    """The axis to squeeze from Where's condition (-1: none) so that it broadcasts over the 3-D
    output: the condition is the mask reduced over its last axis, so it has the mask's dims."""
    if mask is None or mask.shape is None:
        return None
    dims = list(mask.shape)
    if len(dims) == 4:
        return 1 if dims[1] == 1 else None
    if len(dims) == 3:
        return 0 if dims[0] == 1 else None
    return -1


class Attention3D(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if model.opset_imports.get("", 0) < 23:
            return ir.passes.PassResult(model, False)
        modified = False
        for node in list(model.graph):
            if node.op_type == "Attention" and node.domain == "" and self._rewrite(model.graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _rewrite(self, graph: ir.Graph, attention: ir.Node) -> bool:
        if len(attention.inputs) < 3 or len(attention.inputs) > 4 \
                or any(o.uses() or o.is_graph_output() for o in attention.outputs[1:]):
            return False
        found = [_heads_input(v, allow_rotary=i < 2) for i, v in enumerate(attention.inputs[:3])]
        if None in found:
            return False
        mask = attention.inputs[3] if len(attention.inputs) == 4 else None
        # The way back: [Where(fully masked rows, 0, out)], then Transpose(.., [0, 2, 1, 3]).
        chain = []
        user = _only_user(attention.outputs[0])
        if user is not None and user.op_type == "Where" and user.inputs[2] is attention.outputs[0]:
            squeeze = _mask_rows_condition(user, mask)
            if squeeze is None or user.inputs[1] is None or user.inputs[1].const_value is None \
                    or user.inputs[1].const_value.size != 1:
                return False
            chain.append((user, squeeze))
            user = _only_user(user.outputs[0])
        if user is None or user.op_type != "Transpose" or _perm(user) != _HEADS_PERM:
            return False
        back = user
        heads = [t.inputs[0].shape[2] for t, _ in found]
        sizes = [t.inputs[0].shape[3] for t, _ in found]

        flat, made = [], {}
        for (transpose, rotary), count, size in zip(found, heads, sizes):
            if (transpose, rotary) in made:  # one value as key and value: made 3-D once
                flat.append(made[transpose, rotary])
                continue
            x = transpose.inputs[0]
            rows = self._reshape(graph, attention, x, [0, 0, count * size],
                                 [x.shape[0], x.shape[1], count * size])
            unturned = rows
            if rotary is not None:
                turned = ir.node("RotaryEmbedding", [rows, *rotary.inputs[1:]],
                                 attributes={"num_heads": count}, name=f"{rotary.name}/3d",
                                 metadata_props=dict(rotary.metadata_props))
                graph.insert_before(attention, turned)
                turned.outputs[0].name = f"{rotary.outputs[0].name}__3d"
                turned.outputs[0].dtype, turned.outputs[0].shape = rows.dtype, rows.shape
                self._keep_4d(graph, attention, rotary.outputs[0], turned.outputs[0], count, size)
                rows = turned.outputs[0]
            self._keep_4d(graph, attention, transpose.outputs[0], unturned, count, size,
                          source=rotary)
            flat.append(rows)
            made[transpose, rotary] = rows
        fused = ir.node("Attention", [*flat, mask] if mask is not None else flat,
                        attributes={**{k: v for k, v in attention.attributes.items()},
                                    "q_num_heads": ir.AttrInt64("q_num_heads", heads[0]),
                                    "kv_num_heads": ir.AttrInt64("kv_num_heads", heads[1])},
                        name=attention.name, metadata_props=dict(attention.metadata_props))
        graph.insert_before(attention, fused)
        out = fused.outputs[0]
        q_shape = flat[0].shape
        out.name, out.dtype = f"{attention.outputs[0].name}__3d", attention.outputs[0].dtype
        out.shape = ir.Shape([q_shape[0], q_shape[1], heads[0] * sizes[2]])
        for where, squeeze in chain:
            condition = where.inputs[0]
            if squeeze >= 0:
                axes = int64_initializer(graph, f"axes_{squeeze}", [squeeze])
                squeezed = ir.node("Squeeze", [condition, axes], name=f"{where.name}/Squeeze")
                graph.insert_before(attention, squeezed)
                squeezed.outputs[0].name = f"{condition.name}__3d"
                squeezed.outputs[0].dtype = condition.dtype
                condition = squeezed.outputs[0]
            masked = ir.node("Where", [condition, where.inputs[1], out], name=f"{where.name}/3d",
                             metadata_props=dict(where.metadata_props))
            graph.insert_before(attention, masked)
            masked.outputs[0].name = f"{where.outputs[0].name}__3d"
            masked.outputs[0].dtype, masked.outputs[0].shape = out.dtype, out.shape
            out = masked.outputs[0]
        # The old Transpose back gave [B, S, heads, Dv]: the same as the 3-D output split.
        split = self._reshape(graph, back, out, [0, 0, heads[0], sizes[2]],
                              list(back.outputs[0].shape) if back.outputs[0].shape else None)
        ir.convenience.replace_all_uses_with(back.outputs[0], split, replace_graph_outputs=True)
        # The fused node took the old one's name: the old chain goes now, not at the next
        # dead-code pass, so that no two nodes share a name in between.
        graph.remove([attention, *(where for where, _ in chain), back], safe=True)
        graph.sort()
        return True

    @staticmethod
    def _reshape(graph, before: ir.Node, x: ir.Value, entries: list[int], dims) -> ir.Value:
        shape = int64_initializer(graph, "heads_shape_" + "_".join(map(str, entries)), entries)
        node = ir.node("Reshape", [x, shape], name=f"{before.name}/Reshape_{x.name}")
        graph.insert_before(before, node)
        node.outputs[0].name, node.outputs[0].dtype = f"{x.name}__3d", x.dtype
        node.outputs[0].shape = ir.Shape(dims) if dims is not None else None
        return node.outputs[0]

    @staticmethod
    def _keep_4d(graph, attention, old: ir.Value, rows: ir.Value, heads: int, size: int,
                 source: ir.Node | None = None) -> None:
        """Users of the 4-D [B, heads, S, D] value other than the attention (and the rotary
        fed by it) read it made again from the 3-D one."""
        others = [(n, i) for n, i in old.uses() if n is not attention and n is not source]
        if not others and not old.is_graph_output():
            return
        split = Attention3D._reshape(graph, attention, rows, [0, 0, heads, size], None)
        turned = ir.node("Transpose", [split], attributes={"perm": _HEADS_PERM},
                         name=f"{attention.name}/Transpose_{old.name}")
        graph.insert_before(attention, turned)
        result = turned.outputs[0]
        result.dtype, result.shape = old.dtype, old.shape
        if old.is_graph_output():
            # The returned value keeps its name: the old producer's copy is dropped.
            name = old.name
            old.name = f"{name}__4d"
            result.name = name
        else:
            result.name = f"{old.name}__from3d"
        for node, index in others:
            node.replace_input_with(index, result)
        if old.is_graph_output():
            outputs = graph.outputs
            outputs[outputs.index(old)] = result


