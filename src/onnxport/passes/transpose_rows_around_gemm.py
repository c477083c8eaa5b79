"""TransposeRowsAroundGemm: Transpose_q(Reshape(Gemm(Reshape(Transpose_p(a))))) becomes
Reshape(Gemm(Reshape(Transpose_p∘q(a)))), with no Transpose where p∘q is the identity.
Precondition: the Reshapes flatten the leading axes of Transpose_p's result to the Gemm's rows
and unflatten them again; q only permutes those row axes; the Gemm is row-wise (A not transposed,
C per column); every value between is used once.

A Linear is row-wise, so a permutation of the row axes may run before it as well as after it:
torch's MultiheadAttention (ViT) puts the heads back to [S, B, E] for the out-projection and
transposes the result to [B, S, E]; composed, one Transpose per layer goes."""

from __future__ import annotations

import math

import onnx_ir as ir

from onnxport.passes._nodes import perm as _perm, producer

from onnxport.passes.merge_reshapes import int64_initializer, same_shape


def _single_use(value: ir.Value | None) -> bool:
    return value is not None and len(value.uses()) == 1 and not value.is_graph_output()


def _constant_entries(node: ir.Node) -> list[int] | None:
    """The Reshape's shape entries where they are a constant with no 0 (copy) entry."""
    shape = node.inputs[1] if len(node.inputs) > 1 else None
    if shape is None or shape.const_value is None:
        return None
    entries = [int(e) for e in shape.const_value.numpy().reshape(-1)]
    return None if 0 in entries else entries


class TransposeRowsAroundGemm(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for node in list(model.graph):
            if node.op_type == "Transpose" and node.domain == "" and node.graph is model.graph \
                    and self._compose(model.graph, node):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _compose(self, graph: ir.Graph, last: ir.Node) -> bool:
        unflatten = producer(last.inputs[0], "Reshape")
        gemm = unflatten and producer(unflatten.inputs[0], "Gemm")
        flatten = gemm and producer(gemm.inputs[0], "Reshape")
        first = flatten and producer(flatten.inputs[0], "Transpose")
        if first is None or not all(_single_use(v) for v in (
                first.outputs[0], flatten.outputs[0], gemm.outputs[0], unflatten.outputs[0])):
            return False
        trans_a = gemm.attributes.get("transA")
        if trans_a is not None and trans_a.value:
            return False
        bias = gemm.inputs[2] if len(gemm.inputs) > 2 else None
        if bias is not None and (bias.shape is None or len(bias.shape) > 2
                                 or len(bias.shape) == 2 and bias.shape[0] != 1):
            return False
        p, q = _perm(first), _perm(last)
        transposed, rows = first.outputs[0].shape, flatten.outputs[0].shape
        if p is None or q is None or transposed is None or rows is None or len(rows) != 2 \
                or not isinstance(rows[1], int):
            return False
        # k: how many leading axes of the transposed value make the Gemm's rows.
        k = next((k for k in range(1, len(transposed))
                  if all(isinstance(d, int) for d in transposed[k:])
                  and math.prod(transposed[k:]) == rows[1]), None)
        unflat = unflatten.outputs[0].shape
        if k is None or unflat is None or len(unflat) != k + 1 or len(q) != k + 1 \
                or q[-1] != k or not same_shape(ir.Shape(unflat[:k]), ir.Shape(transposed[:k])):
            return False
        unflat_entries = _constant_entries(unflatten)
        if unflat_entries is None or _constant_entries(flatten) is None:
            return False
        composed = [p[q[i]] for i in range(k)] + p[k:]
        source = first.inputs[0]
        if composed == list(range(len(composed))):
            flatten.replace_input_with(0, source)
            graph.remove(first, safe=True)
        else:
            first.attributes["perm"] = ir.AttrInt64s("perm", composed)
            if source.shape is not None:
                first.outputs[0].shape = ir.Shape([source.shape[i] for i in composed])
        entries = [unflat_entries[q[i]] for i in range(k)] + [unflat_entries[-1]]
        unflatten.replace_input_with(
            1, int64_initializer(graph, f"{unflatten.inputs[1].name}_permuted", entries))
        result, old = unflatten.outputs[0], last.outputs[0]
        result.shape = old.shape
        ir.convenience.replace_all_uses_with(old, result, replace_graph_outputs=True)
        result.name, old.name = old.name, f"{old.name}__replaced"
        graph.remove(last, safe=True)
        return True
