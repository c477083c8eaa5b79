"""FoldConstants: a node whose inputs are all constants is replaced by its computed output, and
Shape/Size of a value whose shape is fully known become constants. Precondition: the node is a
deterministic standard ONNX op without subgraphs, and its output stays under a size limit (so
that folding never bloats the file)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

# Outputs larger than this many elements are left to be computed at run time.
OUTPUT_LIMIT = 1 << 20
# A constant this large that has other users is not folded (it would be stored twice).
_SHARED_LIMIT = 1024
_NOT_FOLDED = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
               "Multinomial", "Bernoulli", "Dropout", "If", "Loop", "Scan", "SequenceConstruct"}


class FoldConstants(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        opset = model.opset_imports.get("", 18)
        modified = False
        for node in list(graph):
            if node.domain not in ("", "ai.onnx") or node.op_type in _NOT_FOLDED:
                continue
            if any(attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
                   for attr in node.attributes.values()):
                continue
            outputs = _shape_of(node) if node.op_type in ("Shape", "Size") else None
            if outputs is None:
                outputs = _evaluate(node, opset)
            if outputs is None:
                continue
            for value, array in zip(node.outputs, outputs):
                _replace_with_constant(graph, value, array)
            graph.remove(node, safe=True)
            modified = True
        return ir.passes.PassResult(model, modified)


def _shape_of(node: ir.Node) -> list[np.ndarray] | None:
    x = node.inputs[0]
    if x is None or x.shape is None or not all(isinstance(d, int) for d in x.shape):
        return None
    dims = list(x.shape)
    if node.op_type == "Size":
        return [np.array(int(np.prod(dims)), dtype=np.int64)]
    start_attr, end_attr = node.attributes.get("start"), node.attributes.get("end")
    start = start_attr.value if start_attr is not None else 0
    end = end_attr.value if end_attr is not None else len(dims)
    return [np.array(dims[slice(start, end)], dtype=np.int64)]


def _evaluate(node: ir.Node, opset: int) -> list[np.ndarray] | None:
    inputs = list(node.inputs)
    if not inputs or any(v is not None and v.const_value is None for v in inputs):
        return None
    if any(v is not None and (v.is_graph_input() or v.const_value.size > OUTPUT_LIMIT)
           for v in inputs):
        return None
    if any(v is not None and v.dtype in (ir.DataType.BFLOAT16, ir.DataType.STRING) for v in inputs):
        return None
    if any(v is not None and v.const_value.size > _SHARED_LIMIT and len(v.uses()) > 1
           for v in inputs):
        return None  # folding would store a second copy of a weight that stays in use
    from onnx.reference import ReferenceEvaluator

    proto = ir.serde.serialize_node(node)
    feeds = {v.name: v.const_value.numpy() for v in inputs if v is not None}
    try:
        evaluator = ReferenceEvaluator(proto, opsets={"": opset})
        results = evaluator.run(None, feeds)
    except Exception:  # an op the reference cannot run: leave it to ONNX Runtime
        return None
    if any(np.asarray(r).size > OUTPUT_LIMIT for r in results):
        return None
    return [np.asarray(r) for r in results]


def _replace_with_constant(graph: ir.Graph, value: ir.Value, array: np.ndarray) -> None:
    name = value.name
    dtype = value.dtype
    if dtype is not None and dtype != ir.DataType.from_numpy(array.dtype):
        array = array.astype(dtype.numpy())
    if value.is_graph_output():
        # A graph output cannot be an initializer itself: keep it, fed by an Identity.
        constant = _initializer(graph, f"{name}__constant", array)
        identity = ir.node("Identity", [constant], name=f"{name}/Identity")
        graph.insert_before(value.producer(), identity)
        value.name = f"{name}__folded"
        result = identity.outputs[0]
        result.name, result.shape, result.dtype = name, value.shape, value.dtype
        ir.convenience.replace_all_uses_with(value, result, replace_graph_outputs=True)
        return
    value.name = f"{name}__folded"
    ir.convenience.replace_all_uses_with(value, _initializer(graph, name, array))


def _initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    tensor = ir.tensor(array, name=name)
    constant = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(tensor.dtype),
                        const_value=tensor)
    graph.register_initializer(constant)
    return constant
