"""MaskedRowsByMul: Where(Equal(a, 0), 0, Softmax(s + Where(m, 0, -inf))) with
a = ReduceMax(Cast(m, float), last axis, keepdims) becomes Mul(Softmax(s + Where(m, 0, lowest)), a);
at opset 23, Where([Squeeze](Equal(a, 0)), 0, Attention(q, k, v, m)) becomes
Mul(Attention(q, k, v, Where(m, 0, lowest)), [Squeeze](a)).
Precondition: float32/float64 scores s, finite; the Softmax and the ReduceMax on m's last axis;
the Attention not causal, its other outputs unused.

Attention zeroes the rows its boolean mask hides entirely (Softmax of -inf alone is nan), with a
broadcasting Where in every layer, which ONNX Runtime runs at twice a Mul's cost. With the
lowest finite number as the mask bias such a row's Softmax is finite (uniform), so a Mul by the
0/1 row flag a zeroes it; every other row is exactly as before (exp(lowest + s - max) is 0)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

_FLOATS = (ir.DataType.FLOAT, ir.DataType.DOUBLE)


def _scalar(value: ir.Value | None) -> float | None:
    tensor = value.const_value if value is not None else None
    if tensor is None or tensor.size != 1:
        return None
    return float(tensor.numpy().reshape(-1)[0])


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type == op_type and node.domain == "" else None


def _single_use(value: ir.Value) -> bool:
    return len(value.uses()) == 1 and not value.is_graph_output()


def _last_axis(node: ir.Node, rank: int | None, input_index: int | None) -> bool:
    """The node works on the last axis only (Softmax's axis, ReduceMax's axes)."""
    if input_index is None:
        attr = node.attributes.get("axis")
        axes = [attr.value if attr is not None else -1]
    else:
        attr = node.attributes.get("axes")
        if attr is not None:
            axes = list(attr.value)
        elif len(node.inputs) > input_index and node.inputs[input_index] is not None \
                and node.inputs[input_index].const_value is not None:
            axes = [int(a) for a in node.inputs[input_index].const_value.numpy().reshape(-1)]
        else:
            return False
    return len(axes) == 1 and (axes[0] == -1 or (rank is not None and axes[0] == rank - 1))


def _rows_allowed(condition: ir.Value, mask: ir.Value) -> ir.Value | None:
    """a, when ``condition`` is Equal(a, 0), a = ReduceMax(Cast(mask, float), last, keepdims)."""
    equal = _producer(condition, "Equal")
    if equal is None or _scalar(equal.inputs[1]) != 0.0:
        return None
    allowed = equal.inputs[0]
    reduce = _producer(allowed, "ReduceMax")
    cast = _producer(reduce.inputs[0] if reduce is not None else None, "Cast")
    if cast is None or cast.inputs[0] is not mask:
        return None
    keepdims = reduce.attributes.get("keepdims")
    if (keepdims is not None and keepdims.value == 0) \
            or not _last_axis(reduce, len(mask.shape) if mask.shape is not None else None, 1):
        return None
    return allowed if allowed.dtype in _FLOATS else None


class MaskedRowsByMul(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        biases: dict[tuple[int, ir.DataType], ir.Value] = {}
        modified = False
        for node in list(graph):
            if node.op_type == "Where" and node.domain == "" and node.graph is graph \
                    and self._rewrite(graph, node, biases):
                modified = True
        return ir.passes.PassResult(model, modified)

    def _rewrite(self, graph: ir.Graph, where: ir.Node, biases: dict) -> bool:
        if len(where.inputs) != 3 or _scalar(where.inputs[1]) != 0.0:
            return False
        out = where.inputs[2]
        source = out.producer() if out is not None else None
        if source is None or source.domain != "" or source.graph is not graph \
                or out.dtype not in _FLOATS or not _single_use(out):
            return False
        if source.op_type == "Softmax":
            allowed = self._softmax(graph, source, where.inputs[0], biases)
        elif source.op_type == "Attention":
            allowed = self._attention(graph, source, where.inputs[0], biases)
        else:
            return False
        if allowed is None:
            return False
        if allowed.dtype != out.dtype:
            cast = ir.node("Cast", [allowed], attributes={"to": out.dtype},
                           name=f"{where.name}/Cast")
            graph.insert_before(where, cast)
            cast.outputs[0].dtype, cast.outputs[0].shape = out.dtype, allowed.shape
            allowed = cast.outputs[0]
        where.op_type = "Mul"
        where.resize_inputs(2)
        where.replace_input_with(0, out)
        where.replace_input_with(1, allowed)
        return True

    def _softmax(self, graph, softmax: ir.Node, condition, biases) -> ir.Value | None:
        """The row flag a, once the scores' -inf bias is made finite."""
        scores = softmax.outputs[0]
        add = _producer(softmax.inputs[0], "Add")
        rank = len(scores.shape) if scores.shape is not None else None
        if add is None or not _single_use(add.outputs[0]) \
                or not _last_axis(softmax, rank, input_index=None):
            return None
        for index in (0, 1):
            bias_node = _producer(add.inputs[index], "Where")
            if bias_node is None or len(bias_node.inputs) != 3:
                continue
            mask, zero, fill = bias_node.inputs
            if _scalar(zero) != 0.0 or _scalar(fill) != float("-inf") \
                    or fill.dtype != scores.dtype or mask is None:
                continue
            allowed = _rows_allowed(condition, mask)
            if allowed is not None:
                add.replace_input_with(index, self._finite_bias(graph, mask, scores.dtype,
                                                                bias_node, biases))
                return allowed
        return None

    def _attention(self, graph, attention: ir.Node, condition, biases) -> ir.Value | None:
        """The row flag a (squeezed as the condition is), once Attention's boolean mask is the
        finite bias. Its rows are those of the mask: a causal Attention would hide more."""
        causal = attention.attributes.get("is_causal")
        if len(attention.inputs) < 4 or (causal is not None and causal.value != 0) \
                or any(o.uses() or o.is_graph_output() for o in attention.outputs[1:]):
            return None
        mask = attention.inputs[3]
        if mask is None or mask.dtype != ir.DataType.BOOL:
            return None
        squeeze = _producer(condition, "Squeeze")
        allowed = _rows_allowed(squeeze.inputs[0] if squeeze is not None else condition, mask)
        if allowed is None:
            return None
        if squeeze is not None:
            key = ("squeezed", id(squeeze))
            if key not in biases:
                made = ir.node("Squeeze", [allowed, *squeeze.inputs[1:]],
                               name=f"{squeeze.name}/Allowed",
                               metadata_props=dict(squeeze.metadata_props))
                graph.insert_after(squeeze, made)
                made.outputs[0].name = f"{allowed.name}_squeezed"
                made.outputs[0].dtype, made.outputs[0].shape = allowed.dtype, condition.shape
                biases[key] = made.outputs[0]
            allowed = biases[key]
        dtype = attention.outputs[0].dtype
        attention.replace_input_with(3, self._finite_bias(graph, mask, dtype, None, biases,
                                                          before=attention))
        return allowed

    def _finite_bias(self, graph: ir.Graph, mask: ir.Value, dtype: ir.DataType,
                     after: ir.Node | None, biases: dict, before: ir.Node | None = None):
        """Where(m, 0, lowest): m's -inf bias with the lowest finite number, made once per m."""
        key = (id(mask), dtype)
        if key not in biases:
            zero = self._scalar_initializer(graph, f"{mask.name}_bias_zero", 0, dtype)
            lowest = self._scalar_initializer(graph, f"{mask.name}_bias_lowest",
                                              np.finfo(dtype.numpy()).min, dtype)
            node = ir.node("Where", [mask, zero, lowest], name=f"{mask.name}/FiniteBias")
            if after is not None:
                node.metadata_props.update(after.metadata_props)
                graph.insert_after(after, node)
            else:
                graph.insert_before(before, node)
            node.outputs[0].name = f"{mask.name}_bias_finite"
            node.outputs[0].shape, node.outputs[0].dtype = mask.shape, dtype
            biases[key] = node.outputs[0]
        return biases[key]

    @staticmethod
    def _scalar_initializer(graph: ir.Graph, name: str, number, dtype: ir.DataType) -> ir.Value:
        while name in graph.initializers:
            existing = graph.initializers[name].const_value
            if existing is not None and existing.dtype == dtype and existing.size == 1 \
                    and float(existing.numpy().reshape(-1)[0]) == float(number):
                return graph.initializers[name]
            name += "_"
        value = ir.Value(name=name, shape=ir.Shape([]), type=ir.TensorType(dtype),
                         const_value=ir.tensor(np.array(number, dtype.numpy()), name=name))
        graph.register_initializer(value)
        return value
