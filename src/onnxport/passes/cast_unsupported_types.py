"""CastUnsupportedTypes: a standard op whose schema at the model's opset does not accept an
input's dtype (Conv, MaxPool or Sin on bfloat16 before opset 22) computes in float32 between
Casts, and one that ONNX Runtime's CPU has no kernel for (Where, Max, Min on int16, which
torch's promotion of uint8 with int8 makes) in int32. Precondition: the wide dtype is allowed
for that type parameter, and holds every value of the narrow one (so the result is exact).
Without it the model is invalid ONNX, or valid but refused by ONNX Runtime."""

from __future__ import annotations

import onnx.defs
import onnx_ir as ir

# The dtypes this pass widens to float32 (exact for both: float32 holds every value).
_WIDENED = {ir.DataType.BFLOAT16: "tensor(bfloat16)", ir.DataType.FLOAT16: "tensor(float16)"}
_SMALL_INTEGERS = {ir.DataType.INT8, ir.DataType.UINT8, ir.DataType.INT16, ir.DataType.UINT16}
# Valid ONNX that ONNX Runtime 1.2x's CPU has no kernel for (checked by building each op):
# op -> the integer dtypes it lacks; they run in int32 (wrap-around results are the same).
_RUNTIME_GAPS = {
    "Where": {ir.DataType.INT16, ir.DataType.UINT16},
    "Max": {ir.DataType.INT16, ir.DataType.UINT16},
    "Min": {ir.DataType.INT16, ir.DataType.UINT16},
    "ReduceMax": {ir.DataType.INT16, ir.DataType.UINT16},
    "ReduceMin": {ir.DataType.INT16, ir.DataType.UINT16},
    "ArgMax": {ir.DataType.INT16, ir.DataType.UINT16},
    "ArgMin": {ir.DataType.INT16, ir.DataType.UINT16},
    "Relu": {ir.DataType.INT16, ir.DataType.UINT16, ir.DataType.UINT8},
    "Neg": {ir.DataType.UINT16, ir.DataType.UINT8},
    "ReduceSum": _SMALL_INTEGERS,
    "ReduceProd": _SMALL_INTEGERS,
    "CumSum": _SMALL_INTEGERS,
}


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


def _unsupported_params(node: ir.Node, schema) -> dict[str, tuple[ir.DataType, ir.DataType]]:
    """Type parameters bound to a dtype the schema (or ONNX Runtime) lacks, with the dtype
    they are widened to."""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    found = {}
    for index, value in enumerate(node.inputs):
        formal = _formal(schema.inputs, index)
        if value is None or formal is None or formal.type_str not in allowed:
            continue
        types = allowed[formal.type_str]
        if value.dtype in _WIDENED and _WIDENED[value.dtype] not in types \
                and "tensor(float)" in types:
            found[formal.type_str] = (value.dtype, ir.DataType.FLOAT)
        elif value.dtype in _RUNTIME_GAPS.get(node.op_type, ()) and "tensor(int32)" in types:
            found[formal.type_str] = (value.dtype, ir.DataType.INT32)
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


def _widen(graph: ir.Graph, node: ir.Node, schema,
           params: dict[str, tuple[ir.DataType, ir.DataType]]) -> None:
    for index, value in enumerate(node.inputs):
        formal = _formal(schema.inputs, index)
        if value is None or formal is None or formal.type_str not in params:
            continue
        wide = params[formal.type_str][1]
        cast = ir.node("Cast", [value], attributes={"to": wide},
                       name=f"{node.name}/cast_input_{index}")
        cast.outputs[0].dtype = wide
        cast.outputs[0].shape = value.shape
        cast.outputs[0].name = f"{node.name}/input_{index}_wide"
        graph.insert_before(node, cast)
        node.replace_input_with(index, cast.outputs[0])
    for index, output in enumerate(node.outputs):
        formal = _formal(schema.outputs, index)
        if formal is None or formal.type_str not in params:
            continue
        uses = list(output.uses())
        original, wide = params[formal.type_str]
        cast = ir.node("Cast", [output], attributes={"to": original},
                       name=f"{node.name}/cast_output_{index}")
        narrow = cast.outputs[0]
        narrow.dtype, narrow.shape = original, output.shape
        # The narrow value takes the name (it may be a graph output); the node now makes the
        # wide one.
        narrow.name, output.name = output.name, f"{output.name}_wide"
        output.dtype = wide
        for user, position in uses:
            user.replace_input_with(position, narrow)
        for position, graph_output in enumerate(graph.outputs):
            if graph_output is output:
                graph.outputs[position] = narrow
        graph.insert_after(node, cast)
