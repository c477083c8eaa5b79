"""CastUnsupportedTypes: a standard op whose schema at the model's opset does not accept an
input's dtype (Conv, MaxPool or Sin on bfloat16 before opset 22) computes in float32 between
Casts. Precondition: the schema accepts float32 for that type parameter. Without it the model
is invalid ONNX (the full checker and every runtime reject it)."""

from __future__ import annotations

import onnx.defs
import onnx_ir as ir

# The dtypes this pass widens to float32 (exact for both: float32 holds every value).
_WIDENED = {ir.DataType.BFLOAT16: "tensor(bfloat16)", ir.DataType.FLOAT16: "tensor(float16)"}


def _schema(op_type: str, opset: int):
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


def _formal(formals, index: int):
    """The formal parameter of input/output ``index`` (the last one when it is variadic)."""
    if index < len(formals):
        return formals[index]
    if formals and formals[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return formals[-1]
    return None


def _unsupported_params(node: ir.Node, schema) -> dict[str, ir.DataType]:
    """Type parameters bound to a dtype the schema does not allow, but float32 it does."""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    found = {}
    for index, value in enumerate(node.inputs):
        formal = _formal(schema.inputs, index)
        if value is None or formal is None or value.dtype not in _WIDENED:
            continue
        types = allowed.get(formal.type_str)
        if types is None or _WIDENED[value.dtype] in types or "tensor(float)" not in types:
            continue
        found[formal.type_str] = value.dtype
    return found


class CastUnsupportedTypes(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        opset = model.opset_imports.get("", 18)
        modified = False
        for node in list(model.graph):
            if node.domain not in ("", "ai.onnx"):
                continue
            schema = _schema(node.op_type, opset)
            if schema is None:
                continue
            params = _unsupported_params(node, schema)
            if params:
                _widen(model.graph, node, schema, params)
                modified = True
        return ir.passes.PassResult(model, modified)


def _widen(graph: ir.Graph, node: ir.Node, schema, params: dict[str, ir.DataType]) -> None:
    for index, value in enumerate(node.inputs):
        formal = _formal(schema.inputs, index)
        if value is None or formal is None or formal.type_str not in params:
            continue
        cast = ir.node("Cast", [value], attributes={"to": ir.DataType.FLOAT},
                       name=f"{node.name}/cast_input_{index}")
        cast.outputs[0].dtype = ir.DataType.FLOAT
        cast.outputs[0].shape = value.shape
        cast.outputs[0].name = f"{node.name}/input_{index}_float"
        graph.insert_before(node, cast)
        node.replace_input_with(index, cast.outputs[0])
    for index, output in enumerate(node.outputs):
        formal = _formal(schema.outputs, index)
        if formal is None or formal.type_str not in params:
            continue
        uses = list(output.uses())
        cast = ir.node("Cast", [output], attributes={"to": params[formal.type_str]},
                       name=f"{node.name}/cast_output_{index}")
        narrow = cast.outputs[0]
        narrow.dtype, narrow.shape = params[formal.type_str], output.shape
        # The narrow value takes the name (it may be a graph output); the node now makes the
        # float32 one.
        narrow.name, output.name = output.name, f"{output.name}_float"
        output.dtype = ir.DataType.FLOAT
        for user, position in uses:
            user.replace_input_with(position, narrow)
        for position, graph_output in enumerate(graph.outputs):
            if graph_output is output:
                graph.outputs[position] = narrow
        graph.insert_after(node, cast)
