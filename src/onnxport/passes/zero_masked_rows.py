"""ZeroMaskedRows: Where(rows, 0, Softmax(s + Where(mask, 0, -inf))) feeding MatMul -> Transpose
([0, 2, 1, 3]) -> Reshape to [B * S, heads * D] (or [B, S, heads * D]) becomes the Softmax itself,
its bias made from Or(mask, rows), and the Reshape's rows multiplied by keep = not rows; at
opset 23, Where(Squeeze(rows), 0, Attention(q, k, v, mask)) on [B, S, heads * D] becomes
Attention(q, k, v, Or(mask, rows)) * keep. Precondition: rows is bool [B, 1, S, 1] (one flag per
query), s is finite (attention scores), each value on the chain has no other user.

torch's attention gives a query that the mask hides entirely zeros (Softmax alone gives nan
there), which the export spells as a Where on [B, heads, S, T] after every softmax, and ONNX
Runtime's Where broadcasts slowly. With the hidden rows let through the softmax is finite
everywhere, and zeroing those queries after the heads merge is one Mul of [B * S, 1] on rows
that ONNX Runtime broadcasts fast; the other queries are multiplied by exactly 1."""

from __future__ import annotations

import math

import onnx_ir as ir

from onnxport.passes._nodes import perm, producer, scalar
from onnxport.passes.merge_reshapes import int64_initializer, same_dim

_HEADS_PERM = [0, 2, 1, 3]


def _only_user(value: ir.Value, op_type: str, index: int = 0) -> ir.Node | None:
    """The single node using ``value`` when it is an ``op_type`` taking it as input ``index``."""
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output():
        return None
    node, at = uses[0]
    if node.op_type != op_type or node.domain != "" or at != index:
        return None
    return node


def _mask_bias(value: ir.Value | None) -> ir.Node | None:
    """The Where(mask, 0, -inf) that made ``value`` (SharedMaskBias' form), else None."""
    where = producer(value, "Where")
    if where is None or len(where.inputs) != 3 or where.inputs[0] is None:
        return None
    if where.inputs[0].dtype != ir.DataType.BOOL or scalar(where.inputs[1]) != 0.0:
        return None
    fill = scalar(where.inputs[2])
    return where if fill is not None and math.isinf(fill) and fill < 0 else None


def _broadcast(a: ir.Shape | None, b: ir.Shape | None) -> list | None:
    if a is None or b is None or len(a) != len(b):
        return None
    dims = []
    for x, y in zip(a, b):
        if same_dim(x, y) or y == 1:
            dims.append(x)
        elif x == 1:
            dims.append(y)
        else:
            return None
    return dims


class ZeroMaskedRows(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        self._biases: dict[tuple[int, int], ir.Value] = {}
        self._keeps: dict[tuple[int, int, ir.DataType], ir.Value] = {}
        modified = False
        for node in list(graph):
            if node.op_type == "Where" and node.domain == "" and self._rewrite(graph, node):
                modified = True
        if modified:
            graph.sort()  # the row flags come after the first attention that now reads them
        return ir.passes.PassResult(model, modified)

    def _rewrite(self, graph: ir.Graph, where: ir.Node) -> bool:
        if len(where.inputs) != 3 or scalar(where.inputs[1]) != 0.0:
            return False
        if producer(where.inputs[2], "Attention") is not None:
            return self._rewrite_attention(graph, where)
        rows, probs = where.inputs[0], where.inputs[2]
        softmax = producer(probs, "Softmax")
        if softmax is None or softmax.graph is not graph or len(probs.uses()) != 1:
            return False
        if softmax.attributes.get_int("axis", -1) not in (-1, 3):
            return False
        if not self._query_flags(rows):
            return False
        add = producer(softmax.inputs[0], "Add")
        if add is None or len(softmax.inputs[0].uses()) != 1:
            return False
        bias_at = next((i for i in (1, 0) if _mask_bias(add.inputs[i]) is not None), None)
        if bias_at is None:
            return False
        bias = _mask_bias(add.inputs[bias_at])
        merged = self._merged_rows(where.outputs[0])
        if merged is None:
            return False
        heads = merged.producer().inputs[0].shape  # [B, S, heads, D]: one row flag per (b, s)
        if not same_dim(rows.shape[0], heads[0]) or not same_dim(rows.shape[2], heads[1]):
            return False
        unflattened_shape = _broadcast(bias.inputs[0].shape, rows.shape)
        if unflattened_shape is None:
            return False
        add.replace_input_with(bias_at, self._bias(graph, bias, rows, unflattened_shape))
        ir.convenience.replace_all_uses_with(where.outputs[0], probs)
        graph.remove(where, safe=True)
        keep = self._keep(graph, rows, len(merged.shape), probs.dtype, where.name)
        multiply = ir.node("Mul", [None, keep], name=f"{where.name}/ZeroMaskedRows",
                           metadata_props=dict(where.metadata_props))
        graph.insert_after(merged.producer(), multiply)
        product = multiply.outputs[0]
        ir.convenience.replace_all_uses_with(merged, product, replace_graph_outputs=True)
        multiply.replace_input_with(0, merged)
        product.name, merged.name = merged.name, f"{merged.name}__unmasked"
        product.shape, product.dtype = merged.shape, merged.dtype
        return True

    def _rewrite_attention(self, graph: ir.Graph, where: ir.Node) -> bool:
        """The opset-23 form: Where(Squeeze(rows, [1]), 0, Attention(q, k, v, mask)) on 3-D
        [B, S, heads * D] becomes Attention(q, k, v, Or(mask, rows)) * keep [B, S, 1]."""
        output = where.inputs[2]
        attention = output.producer()
        squeeze = producer(where.inputs[0], "Squeeze")
        if squeeze is None or len(squeeze.inputs) < 2 or attention.graph is not graph:
            return False
        axes = squeeze.inputs[1].const_value
        rows = squeeze.inputs[0]
        if axes is None or axes.numpy().reshape(-1).tolist() != [1] or not self._query_flags(rows):
            return False
        if output is not attention.outputs[0] or len(output.uses()) != 1 \
                or output.is_graph_output() or any(o.uses() for o in attention.outputs[1:]):
            return False
        if len(attention.inputs) != 4 or attention.attributes.get_int("is_causal", 0) \
                or output.shape is None or len(output.shape) != 3:
            return False
        mask = attention.inputs[3]
        if mask is None or mask.dtype != ir.DataType.BOOL:
            return False
        if not same_dim(rows.shape[0], output.shape[0]) \
                or not same_dim(rows.shape[2], output.shape[1]):
            return False
        shape = _broadcast(mask.shape, rows.shape)
        if shape is None:
            return False
        attention.replace_input_with(3, self._let_through(graph, mask, rows, shape, attention))
        keep = self._keep(graph, rows, 3, output.dtype, where.name)
        where.op_type = "Mul"
        where.resize_inputs(2)
        where.replace_input_with(0, output)
        where.replace_input_with(1, keep)
        return True

    def _query_flags(self, rows: ir.Value | None) -> bool:
        """Whether ``rows`` is a bool [B, 1, S, 1], one flag per query."""
        if rows is None or rows.dtype != ir.DataType.BOOL:
            return False
        if rows.shape is None and self._allowed(rows) is not None:
            # The translation records no shape there: the mask's, reduced over the keys.
            mask = self._allowed(rows).producer().inputs[0].producer().inputs[0]
            if mask.shape is not None and len(mask.shape) == 4:
                rows.shape = ir.Shape([*list(mask.shape)[:3], 1])
        return (rows.shape is not None and len(rows.shape) == 4 and rows.shape[1] == 1
                and rows.shape[3] == 1)

    def _let_through(self, graph: ir.Graph, mask: ir.Value, rows: ir.Value, shape: list,
                     user: ir.Node) -> ir.Value:
        """Or(mask, rows): the bool mask letting the hidden queries through, once per pair."""
        key = ("mask", id(mask), self._rows_key(rows))
        if key not in self._biases:
            let_through = ir.node("Or", [mask, rows],
                                  name=f"{user.name}/LetHiddenRowsThrough/{rows.name}")
            let_through.outputs[0].name = f"{mask.name}_or_{rows.name}"
            let_through.outputs[0].shape = ir.Shape(shape)
            let_through.outputs[0].dtype = ir.DataType.BOOL
            graph.insert_before(user, let_through)  # call() sorts the graph afterwards
            self._biases[key] = let_through.outputs[0]
        return self._biases[key]

    @staticmethod
    def _merged_rows(weights: ir.Value) -> ir.Value | None:
        """The heads-merged [B * S, heads * D] or [B, S, heads * D] output of the attention
        whose weights are ``weights``, when the chain is MatMul, Transpose, Reshape."""
        matmul = _only_user(weights, "MatMul", 0)
        transpose = _only_user(matmul.outputs[0], "Transpose") if matmul else None
        if transpose is None or perm(transpose) != _HEADS_PERM:
            return None
        reshape = _only_user(transpose.outputs[0], "Reshape")
        heads = transpose.outputs[0].shape
        merged = reshape.outputs[0] if reshape is not None else None
        if merged is None or heads is None or merged.shape is None or len(heads) != 4:
            return None
        if not isinstance(heads[2], int) or not isinstance(heads[3], int) \
                or merged.shape[-1] != heads[2] * heads[3]:
            return None
        if len(merged.shape) == 2:
            return merged  # rows of [B, S] in order, whatever B * S is
        if len(merged.shape) == 3 and same_dim(merged.shape[0], heads[0]) \
                and same_dim(merged.shape[1], heads[1]):
            return merged
        return None

    def _bias(self, graph: ir.Graph, bias: ir.Node, rows: ir.Value, shape: list) -> ir.Value:
        """Where(Or(mask, rows), 0, -inf): the bias letting the hidden queries through."""
        key = (id(bias), self._rows_key(rows))
        if key not in self._biases:
            mask, zero, fill = bias.inputs
            # Named after both: one bias may pair with the row flags of several masks.
            let_through = ir.node("Or", [mask, rows],
                                  name=f"{bias.name}/LetHiddenRowsThrough/{rows.name}")
            let_through.outputs[0].name = f"{mask.name}_or_{rows.name}"
            let_through.outputs[0].shape = ir.Shape(shape)
            let_through.outputs[0].dtype = ir.DataType.BOOL
            new_bias = ir.node("Where", [let_through.outputs[0], zero, fill],
                               name=f"{bias.name}/WithHiddenRows/{rows.name}")
            new_bias.outputs[0].name = f"{bias.outputs[0].name}_or_{rows.name}"
            new_bias.outputs[0].shape = ir.Shape(shape)
            new_bias.outputs[0].dtype = bias.outputs[0].dtype
            graph.insert_after(bias, [let_through, new_bias])
            self._biases[key] = new_bias.outputs[0]
        return self._biases[key]

    def _keep(self, graph: ir.Graph, rows: ir.Value, rank: int, dtype: ir.DataType,
              name: str) -> ir.Value:
        """1 for the queries that see a key, 0 for the hidden ones: [B * S, 1] or [B, S, 1]."""
        key = (self._rows_key(rows), rank, dtype)
        if key in self._keeps:
            return self._keeps[key]
        nodes = []
        allowed = self._allowed(rows)  # the translation's ReduceMax of the mask as 0/1 floats
        if allowed is None or allowed.dtype != dtype:
            visible = ir.node("Not", [rows], name=f"{name}/VisibleRows")
            nodes += [visible, ir.node("Cast", [visible.outputs[0]], {"to": dtype},
                                       name=f"{name}/VisibleRowsAsNumbers")]
            allowed = nodes[-1].outputs[0]
        shape = [-1, 1] if rank == 2 else [0, -1, 1]
        reshape = ir.node("Reshape", [allowed, int64_initializer(graph, "keep_rows_shape", shape)],
                          name=f"{name}/KeepRows")
        reshape.outputs[0].name = f"{rows.name}_keep_rows"
        reshape.outputs[0].dtype = dtype
        batch, queries = rows.shape[0], rows.shape[2]
        if rank == 3:
            reshape.outputs[0].shape = ir.Shape([batch, queries, 1])
        elif isinstance(batch, int) and isinstance(queries, int):
            reshape.outputs[0].shape = ir.Shape([batch * queries, 1])
        nodes.append(reshape)
        if rows.producer() is not None:
            graph.insert_after(rows.producer(), nodes)
        else:  # a graph input
            graph.insert_before(next(iter(graph)), nodes)
        self._keeps[key] = reshape.outputs[0]
        return reshape.outputs[0]

    def _rows_key(self, rows: ir.Value) -> tuple:
        """Each layer's attention computes its row flags from the shared mask again (until CSE
        merges them): flags of one mask are one key."""
        allowed = self._allowed(rows)
        if allowed is None:
            return ("rows", id(rows))
        return ("mask", id(allowed.producer().inputs[0].producer().inputs[0]))

    @staticmethod
    def _allowed(rows: ir.Value) -> ir.Value | None:
        """a when rows = Equal(a, 0), a = ReduceMax(Cast(bool mask)) (only 0 and 1), else None."""
        equal = producer(rows, "Equal")
        if equal is None or scalar(equal.inputs[1]) != 0.0:
            return None
        largest = producer(equal.inputs[0], "ReduceMax")
        cast = producer(largest.inputs[0], "Cast") if largest is not None else None
        if cast is None or cast.inputs[0] is None or cast.inputs[0].dtype != ir.DataType.BOOL:
            return None
        return equal.inputs[0]

