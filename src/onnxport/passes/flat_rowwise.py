"""FlatRowwise: a Reshape that only unflattens rows ([M, N] -> [..., N]) moves below the row-wise
op it feeds (elementwise, LayerNormalization or Softmax on the last axis), so the op runs on the
[M, N] rows. Precondition: the op's other inputs are constants broadcast along the last axis
only, or values of the Reshape's own output shape (flattened to rows too).

Linear layers are exported as Reshape/Gemm/Reshape; with this pass and MergeReshapes the rows
stay flat from one Gemm to the next (bias, activation, residual Add, LayerNorm) and the
Reshapes between them go, which ONNX Runtime's own Gemm fusion leaves two of per Linear."""

from __future__ import annotations

import math

import onnx_ir as ir

from onnxport.passes._nodes import reshape_after
from onnxport.passes.merge_reshapes import int64_initializer, same_dim, same_shape

_UNARY = {"Relu", "Erf", "Tanh", "Sigmoid", "Gelu", "Neg", "Exp", "Log", "Sqrt", "Abs", "Cast",
          "Identity", "Softplus", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu",
          "Reciprocal", "Sin", "Cos", "Mish", "Not", "Sign", "Floor", "Ceil", "Round"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater",
           "And", "Or"}
# Normalizations over the last axis only (their other inputs are per-feature weights).
_LAST_AXIS = {"LayerNormalization", "Softmax", "LogSoftmax", "RMSNormalization"}
_REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare",
           "ReduceLogSumExp", "ReduceProd", "ReduceL1"}


def _unflattened_rows(value: ir.Value | None) -> ir.Node | None:
    """The Reshape making ``value`` from [M, n] rows, keeping n as its last axis."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Reshape" or node.domain != "":
        return None
    rows, out = node.inputs[0], node.outputs[0]
    if rows is None or rows.shape is None or len(rows.shape) != 2 or out.shape is None \
            or len(out.shape) < 2 or not isinstance(rows.shape[1], int):
        return None
    return node if same_dim(out.shape[-1], rows.shape[1]) else None


def _feature_constant(value: ir.Value | None) -> bool:
    """A constant that broadcasts along the last axis only, so [M, N] rows broadcast alike."""
    if value is None or value.const_value is None or value.shape is None:
        return False
    dims = list(value.shape)
    return (len(dims) <= 1 or (len(dims) == 2 and dims[0] == 1)) \
        and all(isinstance(d, int) for d in dims)


def _last_axis_only(node: ir.Node, rank: int) -> bool:
    attr = node.attributes.get("axis")
    default = -1
    axis = attr.value if attr is not None else default
    if node.op_type in ("Softmax", "LogSoftmax") and node.graph is not None:
        opset = node.graph.opset_imports.get("", 18)
        if attr is None and opset < 13:
            axis = 1  # Softmax before 13 flattens from axis 1: the rows only when rank is 2
    return axis in (-1, rank - 1)


class FlatRowwise(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified, changed = False, True
        while changed:
            changed = False
            for node in list(model.graph):
                if node.domain == "" and self._sink(model.graph, node):
                    changed = modified = True
        return ir.passes.PassResult(model, modified)

    def _sink(self, graph: ir.Graph, node: ir.Node) -> bool:
        if any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
            return False
        op = node.op_type
        if not (op in _UNARY or op in _BINARY or op in _LAST_AXIS or op in _REDUCE
                or op == "Where"):
            return False
        data = [0] if op in _LAST_AXIS or op in _REDUCE else range(len(node.inputs))
        reshapes = {i: r for i in data if (r := _unflattened_rows(node.inputs[i])) is not None}
        if not reshapes:
            return False
        first = next(iter(reshapes.values())).outputs[0].shape
        leading, rank = first[:-1], len(first)
        if op in _LAST_AXIS and not _last_axis_only(node, rank):
            return False
        axes = _reduced_last_axis(node, rank) if op in _REDUCE else None
        if op in _REDUCE and axes is None:
            return False
        # What each input becomes in rows; the row count M is the same for all of them, as
        # their leading dimensions are known to be equal.
        flat_inputs, widths = [], []
        for i, value in enumerate(node.inputs):
            if i in reshapes:
                other = reshapes[i]
                if not same_shape(ir.Shape(other.outputs[0].shape[:-1]), ir.Shape(leading)):
                    return False
                flat_inputs.append(other.inputs[0])
                widths.append(other.inputs[0].shape[1])
            elif i not in data or value is None:
                flat_inputs.append(value)  # scale and bias of a norm, reduce axes: per feature
            elif _feature_constant(value):
                flat_inputs.append(value)
                widths.append(value.shape[-1] if len(value.shape) else 1)
            elif value.shape is not None and len(value.shape) == rank \
                    and same_shape(ir.Shape(value.shape[:-1]), ir.Shape(leading)) \
                    and isinstance(value.shape[-1], int):
                flat_inputs.append(_rows_of(graph, node, value, value.shape[-1]))
                widths.append(value.shape[-1])
            else:
                return False
        width = max(widths)
        if any(w not in (1, width) for w in widths):
            return False
        out_width = 1 if op in _REDUCE else width
        shape = _unflatten_shape(graph, list(reshapes.values()), out_width)
        if shape is None:
            return False
        replaced = {v.producer() for v in node.inputs if v is not None}
        for i, value in enumerate(flat_inputs):
            node.replace_input_with(i, value)
        if op in _LAST_AXIS and node.attributes.get("axis") is not None:
            node.attributes["axis"] = ir.AttrInt64("axis", -1)
        if axes is not None:
            axes()
        output = node.outputs[0]
        result = reshape_after(
            graph, node, output, shape, f"{node.name}/Reshape",
            ir.Shape([flat_inputs[next(iter(reshapes))].shape[0], out_width]))
        result.shape = ir.Shape([*leading, out_width])
        for extra in node.outputs[1:]:
            extra.shape = None
        for dead in replaced:
            if dead is not None and dead.op_type == "Reshape" and dead.graph is graph \
                    and not any(o.uses() or o.is_graph_output() for o in dead.outputs):
                graph.remove(dead, safe=True)
        return True


def _unflatten_shape(graph: ir.Graph, reshapes: list[ir.Node], width: int) -> ir.Value | None:
    """A shape input making [M, width] rows into [*leading, width]."""
    for reshape in reshapes:
        if reshape.inputs[0].shape[1] == width:
            return reshape.inputs[1]  # same input shape [M, width], same result
    for reshape in reshapes:
        entries = reshape.inputs[1].const_value
        if entries is None:
            made = _concat_with_width(graph, reshape.inputs[1], width)
            if made is not None:
                return made
            continue
        entries = [int(e) for e in entries.numpy().reshape(-1)]
        if 0 in entries[:-1] or entries[:-1].count(-1) > 0 and entries[-1] == -1:
            continue
        return int64_initializer(graph, f"{reshape.inputs[1].name}_{width}",
                                 entries[:-1] + [width])
    return None


def _concat_with_width(graph: ir.Graph, shape: ir.Value, width: int) -> ir.Value | None:
    """Concat(leading..., [n]) made again as Concat(leading..., [width]), with dynamic shapes;
    the one made earlier for the same shape and width is reused."""
    concat = shape.producer()
    if concat is None or concat.op_type != "Concat" or concat.graph is not graph:
        return None
    last = concat.inputs[-1]
    if last is None or last.const_value is None or last.const_value.size != 1:
        return None
    width_value = int64_initializer(graph, "width", [width])
    leading = list(concat.inputs[:-1])
    for user, index in width_value.uses():
        if user.op_type == "Concat" and user.domain == "" and user.graph is graph \
                and index == len(leading) == len(user.inputs) - 1 \
                and all(a is b for a, b in zip(user.inputs, leading)):
            return user.outputs[0]  # placed right after ``concat`` too
    made = ir.node("Concat", [*leading, width_value],
                   attributes={"axis": 0}, name=f"{concat.name}_{width}",
                   metadata_props=dict(concat.metadata_props))
    graph.insert_after(concat, made)
    made.outputs[0].name = f"{shape.name}_{width}"
    made.outputs[0].dtype, made.outputs[0].shape = ir.DataType.INT64, shape.shape
    return made.outputs[0]


def _reduced_last_axis(node: ir.Node, rank: int):
    """For a Reduce* over the last axis only, keeping it: a function making its axes [-1]."""
    keepdims = node.attributes.get("keepdims")
    if keepdims is not None and keepdims.value == 0:
        return None
    attr = node.attributes.get("axes")
    if attr is not None:
        if list(attr.value) not in ([-1], [rank - 1]):
            return None
        return lambda: node.attributes.__setitem__("axes", ir.AttrInt64s("axes", [-1]))
    if len(node.inputs) < 2 or node.inputs[1] is None or node.inputs[1].const_value is None:
        return None
    if node.inputs[1].const_value.numpy().reshape(-1).tolist() not in ([-1], [rank - 1]):
        return None
    graph = node.graph
    return lambda: node.replace_input_with(1, int64_initializer(graph, "last_axis", [-1]))


def _rows_of(graph: ir.Graph, user: ir.Node, value: ir.Value, width: int) -> ir.Value:
    """``value`` [..., N] as [M, N] rows, reusing a Reshape that already makes them."""
    for other, _ in value.uses():
        if other.op_type == "Reshape" and other.domain == "" and other.graph is graph \
                and other.inputs[1] is not None and other.inputs[1].const_value is not None \
                and other.inputs[1].const_value.numpy().tolist() == [-1, width] \
                and _before(graph, other, user):
            return other.outputs[0]
    return _new_rows(graph, user, value, width)


def _new_rows(graph: ir.Graph, user: ir.Node, value: ir.Value, width: int) -> ir.Value:
    shape = int64_initializer(graph, "rows_shape", [-1, width])
    # Named after the value too: a Where may flatten both of its branches.
    flatten = ir.node("Reshape", [value, shape], name=f"{user.name}/Rows_{value.name}",
                      metadata_props=dict(user.metadata_props))
    graph.insert_before(user, flatten)
    result = flatten.outputs[0]
    result.name, result.dtype = f"{value.name}__rows", value.dtype
    count = math.prod(value.shape) // width if all(isinstance(d, int) for d in value.shape) \
        else ir.SymbolicDim(None)
    result.shape = ir.Shape([count, width])
    return result


def _before(graph: ir.Graph, first: ir.Node, second: ir.Node) -> bool:
    for node in graph:
        if node is first:
            return True
        if node is second:
            return False
    return False
