"""The graph builder ``g`` that translation functions (and users' symbolic functions) call.

``g.op("Elu", x, alpha_f=1.0)`` appends an ONNX node to the graph being built and returns its
output value(s). Attribute names may carry the documented type suffixes ``_f _i _s _t`` (and
lists of them); ``"domain::Op"`` names a custom domain.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from typing import Any, Sequence

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor, from_torch_dtype
from onnxport.translate import missing_kernel_casts
from onnxport.tensor_values import as_numpy

_SUFFIX_TYPES = {
    "f": (ir.AttributeType.FLOAT, ir.AttributeType.FLOATS),
    "i": (ir.AttributeType.INT, ir.AttributeType.INTS),
    "s": (ir.AttributeType.STRING, ir.AttributeType.STRINGS),
    "t": (ir.AttributeType.TENSOR, ir.AttributeType.TENSORS),
    "g": (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS),
}

# Ops whose output dtype is not the dtype of their first input.
_BOOL_OUTPUT = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And",
                "Or", "Xor", "IsNaN", "IsInf"}
_INT64_OUTPUT = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero"}

# The meta key of a value whose translation declared its shape itself (a squeeze whose rank
# only the run decides, declared as at the example; the one piece of a split whose recorded
# shape is its input's): the recorded shape does not replace it.
SHAPE_AT_THE_EXAMPLE = "onnxport.shape_at_the_example"
# The meta key of a value whose op was given some of its sizes as numbers (a reshape to
# [1, -1, n]): a list with those sizes, None elsewhere. They replace the recorded ones there,
# which torch may have rewritten under a guard of the example (1 recorded as (a//2) where
# a//2 == 1): a reshape copying that size from it would keep 1 where the model has a//2.
GIVEN_SIZES = "onnxport.given_sizes"
# The meta key of a value whose recorded sizes are doubtful: a given size disagreed with the
# recorded one (above), or it is computed from such a value. A reshape does not copy its
# sizes (Reshape's 0) by their recorded names; it takes the sizes' own values.
RECORDED_SIZES_DOUBTFUL = "onnxport.recorded_sizes_doubtful"
_PLAIN = (int, float, bool)  # Python numbers, by exact type (not numpy scalars, not tensors)
_NUMPY_DTYPES = {
    ir.DataType.FLOAT: np.float32, ir.DataType.DOUBLE: np.float64,
    ir.DataType.FLOAT16: np.float16, ir.DataType.INT64: np.int64,
    ir.DataType.INT32: np.int32, ir.DataType.INT16: np.int16, ir.DataType.INT8: np.int8,
    ir.DataType.UINT8: np.uint8, ir.DataType.BOOL: np.bool_,
}


class Provenance:
    """Where the nodes being emitted come from; stamped on every node as metadata."""

    __slots__ = ("scope", "aten", "source", "value_prefix", "decomposed_from", "made_by")

    def __init__(self, scope: str = "", aten: str = "", source: str = "", value_prefix: str = "v",
                 decomposed_from: str = "", made_by: str = ""):
        self.scope = scope
        self.aten = aten
        self.source = source
        self.value_prefix = value_prefix
        self.decomposed_from = decomposed_from
        self.made_by = made_by  # a user's function translating the op; "" for the library


class GraphBuilder:
    """Appends nodes to an ``onnx_ir.Graph``; the ``g`` of every translation function."""

    def __init__(self, graph: ir.Graph, opset: int, custom_opsets: dict[str, int] | None = None,
                 *, fused_ops: bool = True):
        self.graph = graph
        # The outermost graph: constants and weights live there, and subgraphs (If branches,
        # Loop bodies) read them by name from the enclosing scope.
        self.root_graph = graph
        self.opset = opset
        # False: opset 23's Attention, RMSNormalization... are not used (export(fused_ops=)).
        self.fused_ops = fused_ops
        self.custom_opsets = dict(custom_opsets or {})
        # ONNX functions the graph calls (from symbolic functions' g.onnxscript_op).
        self.functions: dict[tuple, ir.Function] = {}
        self.provenance = Provenance()
        self.node: Any = None  # the FX node being translated (None outside the translator)
        # What torch computed for the call being translated (a FakeTensor, SymInt, tuple...):
        # translations read output dtypes and symbolic sizes from it.
        self.expected: Any = None
        # What torch computed for the call's arguments (the node's args with FakeTensors in
        # place of nodes), for the few translations that need more than a value's dtype and
        # shape (as_strided reads its input's strides).
        self.arguments: Any = ()
        # The captured call's metadata beyond ``expected`` (an autograd Function's call, which
        # capture records on the node).
        self.node_meta: dict = {}
        # Maps a torch size (int or SymInt) to an ONNX dim (int or named SymbolicDim).
        self.dim: Any = lambda size: size if isinstance(size, int) else ir.SymbolicDim(str(size))
        self._node_names: dict[str, int] = {}
        self._value_counts: dict[str, int] = {}
        self._constants: dict[tuple, ir.Value] = {}
        self._constant_numbers = itertools.count()  # shared with subgraph builders

    # -- nodes ---------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: Any, outputs: int = 1, **attributes: Any):
        """Append ``op_type`` applied to ``inputs``; return its output (a tuple if outputs > 1)."""
        domain = ""
        if "::" in op_type:
            domain, op_type = op_type.split("::", 1)
            if domain == "onnx":
                domain = ""
            elif domain not in self.custom_opsets:
                self.custom_opsets[domain] = 1
        input_values = [self._as_value(v) for v in inputs]
        while input_values and input_values[-1] is None:
            input_values.pop()
        compute = missing_kernel_casts.compute_dtype(domain, op_type, input_values, attributes)
        if compute is not None:
            return missing_kernel_casts.cast_around(self, op_type, input_values, compute,
                                                    outputs, attributes)
        attrs = [_make_attribute(k, v) for k, v in attributes.items() if v is not None]
        node = ir.Node(
            domain,
            op_type,
            input_values,
            attributes=attrs,
            num_outputs=outputs,
            name=self._node_name(op_type),
            metadata_props=self._metadata(),
        )
        for value in node.outputs:
            value.name = self._value_name()
        self._infer_dtype(node, input_values)
        if op_type == "Identity" and domain == "" and input_values[0].shape is not None:
            # The Identity that makes a constant or an input a graph output: an output of
            # the main graph must state its shape.
            node.outputs[0].shape = ir.Shape(list(input_values[0].shape))
        self.graph.append(node)
        if outputs == 1:
            return node.outputs[0]
        return tuple(node.outputs)

    def _node_name(self, op_type: str) -> str:
        scope = self.provenance.scope
        base = f"{scope}/{op_type}" if scope else op_type
        count = self._node_names.get(base, 0)
        self._node_names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def _value_name(self) -> str:
        prefix = self.provenance.value_prefix
        count = self._value_counts.get(prefix, 0)
        self._value_counts[prefix] = count + 1
        return f"{prefix}__{count}"

    def _metadata(self) -> dict[str, str]:
        p = self.provenance
        metadata = {}
        if p.scope:
            metadata["onnxport.module"] = p.scope
        if p.aten:
            metadata["onnxport.aten"] = p.aten
        if p.source:
            metadata["onnxport.source"] = p.source
        if p.decomposed_from:
            metadata["onnxport.decomposed_from"] = p.decomposed_from
        if p.made_by:
            metadata["onnxport.made_by"] = p.made_by
        return metadata

    @contextlib.contextmanager
    def made_by(self, label: str):
        """Nodes emitted inside the block name ``label`` (a user's function translating the
        op: a symbolic, an OnnxRegistry translation) as their maker, so that a model they make
        invalid says whose they are."""
        outer = self.provenance
        self.provenance = copy.copy(outer)
        self.provenance.made_by = label
        try:
            yield
        finally:
            self.provenance = outer

    @staticmethod
    def _infer_dtype(node: ir.Node, inputs: Sequence[ir.Value | None]) -> None:
        op_type = node.op_type
        if node.domain not in ("", "ai.onnx"):
            return
        if op_type == "Cast":
            dtype = ir.DataType(node.attributes["to"].value)
        elif op_type == "CastLike":
            dtype = inputs[1].dtype if inputs[1] is not None else None
        elif op_type in _BOOL_OUTPUT:
            dtype = ir.DataType.BOOL
        elif op_type in _INT64_OUTPUT:
            dtype = ir.DataType.INT64
        elif op_type in ("Where",):
            dtype = inputs[1].dtype if len(inputs) > 1 and inputs[1] is not None else None
        elif op_type in ("ConstantOfShape",):
            attr = node.attributes.get("value")
            dtype = attr.value.dtype if attr is not None else ir.DataType.FLOAT
        elif op_type in ("Range",) or inputs:
            first = inputs[0] if inputs else None
            dtype = first.dtype if first is not None else None
        else:
            dtype = None
        if dtype is not None:
            node.outputs[0].dtype = dtype

    # -- constants -----------------------------------------------------------------------
    def const(self, value: Any, dtype: ir.DataType | torch.dtype | None = None) -> ir.Value:
        """A constant (an initializer, shared between equal small constants)."""
        if isinstance(dtype, torch.dtype):
            dtype = from_torch_dtype(dtype)
        if isinstance(value, torch.Tensor):
            tensor = value.detach()
            if dtype is not None and from_torch_dtype(tensor.dtype) != dtype:
                tensor = tensor.to(to_torch_dtype(dtype))
            if tensor.numel() > 16:
                return self._add_initializer(TorchTensor(tensor.contiguous()))
            array = as_numpy(tensor) if tensor.dtype != torch.bfloat16 else None
            if array is None:
                return self._add_initializer(TorchTensor(tensor.contiguous()))
        else:
            if dtype is None:
                dtype = _python_dtype(value)
            # Most constants are a few Python numbers (axes, shapes, scalars), asked for again
            # and again: found by their text, without making an array. (repr, not the value:
            # 0.0 == -0.0.)
            plain = type(value) in _PLAIN or (type(value) in (list, tuple) and all(
                type(v) in _PLAIN for v in value))
            quick = (dtype, repr(value)) if plain else None
            if quick is not None and (cached := self._constants.get(quick)) is not None:
                return cached
            array = np.asarray(value, dtype=_NUMPY_DTYPES.get(dtype))
            if dtype not in _NUMPY_DTYPES:
                array = torch.tensor(value, dtype=to_torch_dtype(dtype))
                return self._add_initializer(TorchTensor(array))
            shared = self._shared(array)
            if quick is not None:
                self._constants[quick] = shared
            return shared
        return self._shared(array)

    def _shared(self, array: np.ndarray) -> ir.Value:
        """The initializer holding ``array``, one per distinct small constant."""
        key = (str(array.dtype), array.shape, array.tobytes())
        cached = self._constants.get(key)
        if cached is None:
            # (ir.Tensor is what ir.tensor makes of an array, after isinstance checks against
            # runtime protocols that cost more than the rest of a constant)
            cached = self._constants[key] = self._add_initializer(ir.Tensor(array))
        return cached

    def _add_initializer(self, tensor: ir.TensorProtocol) -> ir.Value:
        name = f"const_{next(self._constant_numbers)}"
        tensor.name = name
        value = ir.Value(name=name, shape=ir.Shape(tensor.shape), type=ir.TensorType(tensor.dtype),
                         const_value=tensor)
        self.root_graph.register_initializer(value)
        return value

    def initializer(self, name: str, tensor: torch.Tensor) -> ir.Value:
        """A named initializer wrapping ``tensor`` without copying it."""
        onnx_tensor = TorchTensor(tensor.detach(), name=name)
        value = ir.Value(name=name, shape=ir.Shape(onnx_tensor.shape),
                         type=ir.TensorType(onnx_tensor.dtype), const_value=onnx_tensor)
        self.root_graph.register_initializer(value)
        return value

    # -- subgraphs -----------------------------------------------------------------------
    def subgraph(self, name: str) -> "GraphBuilder":
        """A builder of a new graph (an If branch, a Loop body) that shares this one's node
        and value names, constants and functions, so that names stay unique in the model."""
        child = copy.copy(self)
        child.graph = ir.Graph([], [], nodes=[], name=name)
        return child

    def add_input(self, name: str, dtype: ir.DataType | None, shape: Sequence[Any] | None
                  ) -> ir.Value:
        """A new input of this builder's graph."""
        value = ir.Value(name=name, type=ir.TensorType(dtype) if dtype is not None else None,
                         shape=ir.Shape(shape) if shape is not None else None)
        self.graph.inputs.append(value)
        return value

    def add_output(self, value: Any) -> ir.Value:
        """Make ``value`` the next output of this builder's graph. A value this graph does not
        compute (an input, a constant, a value of the enclosing scope) or already returns
        goes through an Identity: a graph output must be produced by one of its nodes."""
        value = self._as_value(value)
        producer = value.producer()
        if producer is None or producer.graph is not self.graph or value.is_graph_output():
            value = self.op("Identity", value)
        self.graph.outputs.append(value)
        return value

    def _as_value(self, value: Any) -> ir.Value | None:
        if value is None or isinstance(value, ir.Value):
            return value
        return self.const(value)

    # -- helpers for translations --------------------------------------------------------
    def rank(self, value: ir.Value) -> int | None:
        return None if value.shape is None else len(value.shape)

    def static_shape(self, value: ir.Value) -> list[int] | None:
        """The shape when every dimension is a known integer, else None."""
        if value.shape is None:
            return None
        dims = list(value.shape)
        if all(isinstance(d, int) for d in dims):
            return dims
        return None


def to_torch_dtype(dtype: ir.DataType) -> torch.dtype:
    from onnx_ir.tensor_adapters import to_torch_dtype as convert

    return convert(dtype)


def _python_dtype(value: Any) -> ir.DataType:
    sample = value
    while isinstance(sample, (list, tuple)):
        if not sample:
            return ir.DataType.INT64
        sample = sample[0]
    if isinstance(sample, (bool, np.bool_)):
        return ir.DataType.BOOL
    if isinstance(sample, (int, np.integer)):
        return ir.DataType.INT64
    if isinstance(sample, np.ndarray):
        return ir.DataType.from_numpy(sample.dtype)
    return ir.DataType.FLOAT


def _make_attribute(key: str, value: Any) -> ir.Attr:
    name, _, suffix = key.rpartition("_")
    if name and suffix in _SUFFIX_TYPES:
        single, multiple = _SUFFIX_TYPES[suffix]
        if isinstance(value, (list, tuple)):
            if suffix == "f":
                value = [float(v) for v in value]
            elif suffix == "i":
                value = [int(v) for v in value]
            elif suffix == "t":
                value = [_as_tensor(v) for v in value]
            return ir.Attr(name, multiple, list(value))
        if suffix == "f":
            value = float(value)
        elif suffix == "i":
            value = int(value)
        elif suffix == "t":
            value = _as_tensor(value)
        return ir.Attr(name, single, value)
    if isinstance(value, torch.Tensor):
        return ir.Attr(key, ir.AttributeType.TENSOR, _as_tensor(value))
    if isinstance(value, ir.TypeAndShape):
        return ir.AttrTypeProto(key, value)
    return ir.convenience.convert_attribute(key, value)


def _as_tensor(value: Any) -> ir.TensorProtocol:
    if isinstance(value, torch.Tensor):
        return TorchTensor(value.detach().contiguous())
    if isinstance(value, ir.TensorProtocol):
        return value
    return ir.tensor(value)
