"""FoldConstants: a node whose inputs are all constants is replaced by its computed output, and
Shape/Size of a value whose shape is fully known become constants. Precondition: the node is a
deterministic standard ONNX op without subgraphs, and its output stays under a size limit. A
large result whose elements are all equal is not stored: it stays (or becomes) a ConstantOfShape,
and the nodes it feeds can still be folded. A constant graph output stays an Identity of an
initializer (an output cannot be an initializer itself): that Identity is already folded."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx_ir as ir

# Outputs larger than this many elements are left to be computed at run time.
OUTPUT_LIMIT = 1 << 20
# Results up to this many elements are always stored. Above it, a fill (all elements equal) is
# made at run time by ConstantOfShape: the limit of the creation ops (zeros, full, ones...),
# which folding would otherwise undo by writing their fills into the file.
FILL_LIMIT = 1024
# A constant this large that has other users is not folded (it would be stored twice), unless
# every one of its users is folded too: then it is an intermediate of a constant-only subgraph
# (Swin's shifted-window mask: zeros, slice assignments, Sub, Where) and leaves the file. Even
# then, one above this size is not (two folded users of a weight would store it twice).
_SHARED_LIMIT = 1024
_SHARED_SUBGRAPH_LIMIT = 1 << 18
# Q/DQ pairs carry the quantization (ONNX Runtime fuses them into integer kernels): a
# DequantizeLinear of a constant int8 weight folded into a float weight would lose it. A
# sequence or an optional is no initializer.
_NOT_FOLDED = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
               "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
               "Multinomial", "Bernoulli", "Dropout", "If", "Loop", "Scan", "SequenceConstruct",
               "SequenceEmpty", "SplitToSequence", "Optional"}
# Fill values ConstantOfShape cannot hold before opset 20, or that numpy cannot compare.
_NO_FILL_DTYPES = {ir.DataType.BFLOAT16, ir.DataType.STRING}


@dataclasses.dataclass(frozen=True)
class _Fill:
    """A value known to be ``scalar`` repeated over ``shape``, made at run time (not stored)."""

    scalar: np.ndarray  # 0-d, of the value's dtype
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def array(self) -> np.ndarray:
        return np.full(self.shape, self.scalar, dtype=self.scalar.dtype)


class FoldConstants(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        opset = model.opset_imports.get("", 18)
        fills: dict[ir.Value, _Fill] = {}  # large fills left as ConstantOfShape, by output
        derived = _constant_derived(graph)
        modified = False
        for node in list(graph):
            if not _foldable_op(node):
                continue
            if _is_folded_output(node):
                continue
            if node.op_type == "ConstantOfShape":
                fill = _constant_of_shape(node)
                if fill is not None and fill.size > FILL_LIMIT:
                    fills[node.outputs[0]] = fill  # already what it should be: keep it
                    continue
            outputs = _shape_of(node) if node.op_type in ("Shape", "Size") else None
            if outputs is None:
                outputs = _evaluate(node, opset, fills, derived)
            if outputs is None:
                continue
            for value, array in zip(node.outputs, outputs):
                result = _as_fill_or_array(value, array)
                if isinstance(result, _Fill):
                    fills[_replace_with_fill(graph, node, value, result)] = result
                else:
                    _replace_with_constant(graph, value, result)
            graph.remove(node, safe=True)
            modified = True
        return ir.passes.PassResult(model, modified)


def _is_folded_output(node: ir.Node) -> bool:
    """An Identity from an initializer to a graph output: what folding such an output makes."""
    source = node.inputs[0] if node.op_type == "Identity" and node.inputs else None
    return (source is not None and source.is_initializer() and not source.is_graph_input()
            and node.outputs[0].is_graph_output())


def _foldable_op(node: ir.Node) -> bool:
    return (node.domain in ("", "ai.onnx") and node.op_type not in _NOT_FOLDED
            and not any(attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
                        for attr in node.attributes.values()))


def _constant_derived(graph: ir.Graph) -> set[ir.Value]:
    """Outputs of nodes computed from constants only, directly or through other such nodes."""
    derived: set[ir.Value] = set()
    for node in graph:
        if not _foldable_op(node) or not node.inputs:
            continue
        if all(_static_size(v) <= OUTPUT_LIMIT for v in node.outputs) and all(
               v is None or v in derived
               or (v.const_value is not None and not v.is_graph_input()) for v in node.inputs):
            derived.update(node.outputs)
    return derived


def _only_feeds_folded_nodes(value: ir.Value, derived: set[ir.Value]) -> bool:
    return not value.is_graph_output() and all(
        all(out in derived for out in use.node.outputs) for use in value.uses())


def _constant_of_shape(node: ir.Node) -> _Fill | None:
    shape_value = node.inputs[0] if node.inputs else None
    if shape_value is None or shape_value.const_value is None or shape_value.is_graph_input():
        return None
    output = node.outputs[0]
    if output.dtype is None or output.dtype in _NO_FILL_DTYPES:
        return None
    shape = tuple(int(d) for d in shape_value.const_value.numpy().reshape(-1))
    attr = node.attributes.get("value")
    scalar = attr.value.numpy().reshape(-1)[0] if attr is not None else np.float32(0)
    return _Fill(np.asarray(scalar, dtype=output.dtype.numpy()), shape)


def _as_fill_or_array(value: ir.Value, array: np.ndarray) -> _Fill | np.ndarray:
    """A large result whose elements are all equal as a fill; anything else as it is."""
    if array.size <= FILL_LIMIT or (value.dtype is not None and value.dtype in _NO_FILL_DTYPES):
        return array
    first = array.reshape(-1)[0]
    if array.dtype.kind in "biufc" and np.array_equal(
            array, np.broadcast_to(first, array.shape), equal_nan=array.dtype.kind in "fc"):
        dtype = value.dtype.numpy() if value.dtype is not None else array.dtype
        return _Fill(np.asarray(first, dtype=dtype), tuple(array.shape))
    return array


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


def _evaluate(node: ir.Node, opset: int, fills: dict[ir.Value, _Fill],
              derived: set[ir.Value]) -> list[np.ndarray] | None:
    inputs = list(node.inputs)
    if not inputs:
        return None
    for v in inputs:
        if v is None:
            continue
        if v in fills:
            if fills[v].size > OUTPUT_LIMIT:
                return None
            continue
        if v.const_value is None or v.is_graph_input() or v.const_value.size > OUTPUT_LIMIT:
            return None
        if v.dtype in (ir.DataType.BFLOAT16, ir.DataType.STRING):
            return None
        if v.const_value.size > _SHARED_LIMIT and len(v.uses()) > 1 and (
                v.const_value.size > _SHARED_SUBGRAPH_LIMIT
                or not _only_feeds_folded_nodes(v, derived)):
            return None  # folding would store a second copy of a weight that stays in use
    if any(_static_size(v) > OUTPUT_LIMIT for v in node.outputs):
        return None  # known to be too large: do not compute it only to throw it away
    feeds_in = [fills[v].array() if v in fills else v.const_value.numpy() if v is not None
                else None for v in inputs]
    if node.op_type in _NUMPY_EVALUATORS:
        try:
            return [np.asarray(_NUMPY_EVALUATORS[node.op_type](node, *feeds_in))]
        except Exception:  # malformed: leave it to ONNX Runtime, which will say so
            return None
    feeds = {f"i{k}": fills[v].array() if v in fills else v.const_value.numpy()
             for k, v in enumerate(inputs) if v is not None}
    try:
        results = _evaluator(node, opset).run(None, feeds)
    except Exception:  # an op the reference cannot run: leave it to ONNX Runtime
        return None
    if any(np.asarray(r).size > OUTPUT_LIMIT for r in results):
        return None
    return [np.asarray(r) for r in results]


# Reference evaluators by node (op, attributes, which inputs are given): making one is fifteen
# times running it, and a model folds the same few nodes again and again (BERT's Unsqueezes).
_EVALUATORS: dict[tuple[int, bytes], object] = {}
_EVALUATOR_LIMIT = 512


def _evaluator(node: ir.Node, opset: int):
    """onnx's reference evaluator of ``node`` alone, its inputs named ``i0``, ``i1``...
    (absent ones left out) and its outputs ``o0``, ``o1``..."""
    proto = ir.serde.serialize_node(node)
    proto.name = proto.doc_string = ""
    del proto.metadata_props[:]
    proto.input[:] = [f"i{k}" if v is not None else "" for k, v in enumerate(node.inputs)]
    proto.output[:] = [f"o{k}" for k in range(len(node.outputs))]
    key = (opset, proto.SerializeToString(deterministic=True))
    evaluator = _EVALUATORS.get(key)
    if evaluator is None:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(proto, opsets={"": opset})
        if len(_EVALUATORS) >= _EVALUATOR_LIMIT:
            _EVALUATORS.pop(next(iter(_EVALUATORS)))
        _EVALUATORS[key] = evaluator
    return evaluator


def _gather_elements(node: ir.Node, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    axis_attr = node.attributes.get("axis")
    axis = axis_attr.value if axis_attr is not None else 0
    axis = axis + data.ndim if axis < 0 else axis
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    # The index may be smaller than the data along every axis, not only `axis`.
    data = data[tuple(slice(0, n) if i != axis else slice(None)
                      for i, n in enumerate(indices.shape))]
    return np.take_along_axis(data, indices, axis=axis)


# Ops whose onnx.reference implementation is wrong for inputs torch exports: GatherElements
# with data wider than its index on another axis than `axis` (BERT's token-type ids) fails there.
_NUMPY_EVALUATORS = {"GatherElements": _gather_elements}


def _static_size(value: ir.Value) -> int:
    if value.shape is None or not all(isinstance(d, int) for d in value.shape):
        return 0
    return math.prod(value.shape)


def _replace_with_fill(graph: ir.Graph, node: ir.Node, value: ir.Value, fill: _Fill) -> ir.Value:
    """Replace ``value`` (an output of ``node``) by a ConstantOfShape making ``fill``."""
    name = value.name
    shape = _initializer(graph, f"{name}__shape", np.array(fill.shape, dtype=np.int64))
    constant_of_shape = ir.node(
        "ConstantOfShape", [shape], attributes={"value": ir.tensor(fill.scalar.reshape(1))},
        name=f"{node.name}/ConstantOfShape" if node.name else None)
    constant_of_shape.metadata_props.update(node.metadata_props)
    graph.insert_before(node, constant_of_shape)
    result = constant_of_shape.outputs[0]
    value.name = f"{name}__folded"
    result.name, result.shape, result.dtype = name, ir.Shape(fill.shape), value.dtype
    ir.convenience.replace_all_uses_with(value, result, replace_graph_outputs=True)
    return result


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
    # (ir.Tensor is what ir.tensor makes of an array, less its isinstance checks against
    # runtime-checkable protocols, which cost more than the rest)
    tensor = ir.Tensor(array, name=name) if type(array) is np.ndarray else \
        ir.tensor(array, name=name)
    constant = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(tensor.dtype),
                        const_value=tensor)
    graph.register_initializer(constant)
    return constant
