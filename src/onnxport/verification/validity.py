"""The validity gate: every model onnxport writes must load in every supported ONNX Runtime,
which asks more than ``onnx.checker`` does (ONNX Runtime refuses two nodes of one name).

``check_structure`` is cheap (one walk over the nodes) and runs after translation and after
each pass, so that a failure names the pass that broke the rule; ``check_model`` adds the full
``onnx.checker`` (with strict shape inference) once, before anything is written."""

from __future__ import annotations

import onnx
import onnx_ir as ir

from onnxport.errors import InvalidModelError
from onnxport.serialize import model_header

# Weights at least this large are checked by their type alone (their bytes are the checker's
# least concern and the costliest part of building a proto).
_DATA_CHECKED_BELOW = 256


def check_structure(model: ir.Model, stage: str) -> None:
    """Unique node names and unique value names over the whole model (subgraphs and functions
    included), and an opset import for every domain a node uses; raises ``InvalidModelError``
    naming ``stage`` (a pass or a stage of the export) otherwise."""
    problems = []
    graphs = [("main graph", model.graph, model.opset_imports)]
    graphs += [(f"function {key[0]}::{key[1]}", function, function.opset_imports or
                model.opset_imports) for key, function in model.functions.items()]
    for where, graph, opsets in graphs:
        domains: dict[str, str] = {}
        problems += _duplicates(where, graph, domains)
        problems += [f"{where}: no opset import for domain {domain!r} (used by {op_type})"
                     for domain, op_type in sorted(domains.items()) if domain not in opsets]
    if problems:
        raise InvalidModelError(_message(model, stage, problems))


def check_model(model: ir.Model, stage: str) -> bytes:
    """``check_structure``, then the full ``onnx.checker`` on the model without its large
    weights' bytes. Returns the bytes of ``serialize.model_header(model)``, which the checked
    proto is made from: saving the model unchanged writes them again."""
    check_structure(model, stage)
    header = model_header(model)
    header_bytes = header.SerializeToString()
    try:
        onnx.checker.check_model(_with_unregistered_ops_apart(
            model, _proto_without_weights(model, header)), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        problem = f"onnx.checker: {str(error).strip()}"
        raise InvalidModelError(_message(model, stage, [problem])) from None
    return header_bytes


# The checker refuses an op the default domain does not define; one a symbolic function asked
# for there (g.op("Foo"), torch.onnx writes it so) carries this mark in its node's meta and is
# checked as an op of the domain below instead.
UNREGISTERED_OP = "onnxport.unregistered_default_domain_op"
_UNREGISTERED_DOMAIN = "onnxport.unregistered"


def _with_unregistered_ops_apart(model: ir.Model, proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` (a copy, only checked) with the nodes marked by compat/symbolic_graph.py moved
    to their own domain, so that the checker checks everything else. The model keeps them where
    the user asked."""
    names = {node.name for node in ir.traversal.RecursiveGraphIterator(model.graph)
             if node.meta.get(UNREGISTERED_OP) and node.domain in ("", "ai.onnx")}
    if not names:
        return proto
    for node in _proto_nodes(proto.graph):
        if node.name in names:
            node.domain = _UNREGISTERED_DOMAIN
    proto.opset_import.append(onnx.helper.make_opsetid(_UNREGISTERED_DOMAIN, 1))
    return proto


def _proto_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                yield from _proto_nodes(subgraph)


def _message(model: ir.Model, stage: str, problems: list[str]) -> str:
    """The problems, and whose they are: the nodes a user's function made (a symbolic, an
    OnnxRegistry translation) are named with it; the others are onnxport's."""
    shown = problems[:10] + ([f"... and {len(problems) - 10} more"] if len(problems) > 10
                             else [])
    text = "\n".join(problems)
    users = sorted({f"node {node.name!r}: made by {node.metadata_props['onnxport.made_by']}"
                    for node in ir.traversal.RecursiveGraphIterator(model.graph)
                    if "onnxport.made_by" in node.metadata_props and node.name
                    and (f"node name: {node.name})" in text or f"named {node.name!r}" in text)})
    if users:
        whose = ("\nThe nodes named are not onnxport's own: " + "; ".join(users) +
                 ". Check the ONNX that function emits (op types, input dtypes, attributes).")
    else:
        whose = "\nThis is an onnxport bug; please report it with the model."
        if stage.startswith("the pass"):
            whose += (" export(..., optimize=False) skips the optimization passes, which may "
                      "avoid it.")
    return f"The exported ONNX model is invalid. After {stage}:\n  " + "\n  ".join(shown) + whose


def _duplicates(where: str, graph: ir.Graph | ir.Function, domains: dict[str, str]) -> list[str]:
    """Duplicate node and value names; ``domains`` gets each domain a node uses (with an op
    of it), in the same walk: ONNX Runtime refuses a domain without an opset import."""
    node_names: set[str] = set()
    value_names: set[str] = set()
    problems: list[str] = []

    def values(found) -> None:
        for v in found:
            if v is None or not v.name:
                continue
            if v.name in value_names:
                problems.append(f"{where}: two values named {v.name!r}")
            value_names.add(v.name)

    values(graph.inputs)
    if isinstance(graph, ir.Graph):
        values(v for v in graph.initializers.values() if not v.is_graph_input())
    _walk_names(graph, node_names, values, domains, where, problems)
    return problems


def _walk_names(graph, node_names: set, values, domains: dict, where: str,
                problems: list) -> None:
    """:func:`_duplicates`' walk over ``graph``'s nodes, each node's subgraphs' nodes right
    after it (as ``ir.traversal.RecursiveGraphIterator`` visits them, which took most of the
    time of a check that runs after every pass that changes the model)."""
    graph_kinds = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
    for node in graph:
        domains.setdefault(node.domain, node.op_type)
        name = node.name
        if name:
            if name in node_names:
                problems.append(f"{where}: two nodes named {name!r} ({node.op_type})")
            node_names.add(name)
        values(node.outputs)
        attributes = node.attributes
        if not attributes:
            continue
        subgraphs = []
        for attribute in attributes.values():
            if attribute.type not in graph_kinds:
                continue
            subgraphs += [attribute.value] if attribute.type == ir.AttributeType.GRAPH \
                else list(attribute.value)
        for subgraph in subgraphs:
            values(subgraph.inputs)
            values(subgraph.initializers.values())
        for subgraph in subgraphs:
            _walk_names(subgraph, node_names, values, domains, where, problems)


def _small_and_readable(tensor) -> bool:
    """A weight worth giving the checker with its values (a shape, axes): small, and real (a
    model exported in fake mode has weights with no data)."""
    if tensor.nbytes >= _DATA_CHECKED_BELOW:
        return False
    try:
        tensor.tobytes()
    except Exception:  # a fake or missing weight
        return False
    return True


def _proto_without_weights(model: ir.Model, header: onnx.ModelProto) -> onnx.ModelProto:
    """The model as a proto whose large initializers (and those without data: fake mode's) are
    graph inputs of the same type, so the checker sees every name and shape without a copy of
    the weights: ``header`` (the model without the initializers ``write_model`` streams) with
    the small ones added back, each with its value info, as ``ir.to_proto`` writes them."""
    graph = model.graph
    inputs = {i.name for i in header.graph.input}
    for v in graph.initializers.values():
        tensor = v.const_value
        if tensor is None or tensor.dtype == ir.DataType.STRING:
            continue  # (in the header already, or skipped by ir.to_proto)
        if _small_and_readable(tensor):
            tensor.name = v.name  # (as ir.to_proto names it)
            header.graph.initializer.append(ir.serde.serialize_tensor(tensor))
            if v.name not in inputs and v.name and (
                    v.shape is not None or v.type is not None or v.metadata_props
                    or v.doc_string):
                header.graph.value_info.append(ir.serde.serialize_value(v))
        elif v.name not in inputs:
            header.graph.input.append(onnx.helper.make_tensor_value_info(
                v.name, int(tensor.dtype), list(tensor.shape.numpy())))
    return header
