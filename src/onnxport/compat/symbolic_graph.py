"""The ``g`` and the values a torch.onnx symbolic function sees: thin adapters over our builder
and ``onnx_ir`` values that speak torch's ``Graph`` / ``Value`` API, so that symbolic functions
written for torch.onnx run unchanged."""

from __future__ import annotations

from typing import Any
import warnings

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from onnxport.errors import TranslationError
from onnxport.tensor_values import on_cpu
from onnxport.translate.builder import GraphBuilder
from onnxport.verification.validity import UNREGISTERED_OP


# -- the adapters ----------------------------------------------------------------------------
def wrap(value: Any) -> Any:
    if isinstance(value, ir.Value):
        return SymbolicValue(value)
    if isinstance(value, list):
        return [wrap(v) for v in value]
    if isinstance(value, tuple):
        return tuple(wrap(v) for v in value)
    return value


def unwrap(value: Any) -> Any:
    if isinstance(value, SymbolicValue):
        return value.ir_value
    if isinstance(value, (list, tuple)):
        return type(value)(unwrap(v) for v in value)
    return value


class SymbolicGraph:
    """The ``g`` a torch.onnx symbolic function receives: ``g.op`` builds nodes with our
    builder and answers with values that speak torch's ``Value`` API."""

    def __init__(self, builder: GraphBuilder):
        self.builder = builder

    @property
    def opset(self) -> int:
        return self.builder.opset

    def op(self, opname: str, *raw_args: Any, outputs: int = 1, **kwargs: Any):
        unregistered = _check_standard_op(opname)
        inputs = [_input(self.builder, a, _scalar_dtype(opname, raw_args)) for a in raw_args]
        result = self.builder.op(opname, *inputs, outputs=outputs, **kwargs)
        if unregistered:
            producer = (result if outputs == 1 else result[0]).producer()
            producer.meta[UNREGISTERED_OP] = True  # the validity gate knows it was asked for
        if opname in ("Constant", "onnx::Constant"):
            _type_constant(result, kwargs)
        if outputs == 1:
            return SymbolicValue(result)
        return tuple(SymbolicValue(v) for v in result)

    def at(self, operator: str, *args: Any, **kwargs: Any):
        raise TranslationError(
            f"g.at('{operator}', ...) emits an ATen fallback node, which onnxport does not "
            f"export (ONNX Runtime cannot run it); build the computation with g.op(...).")

    def onnxscript_op(self, onnx_fn: Any, *raw_args: Any, outputs: int = 1, **kwargs: Any):
        """Call an ``onnxscript.script`` function; its definition is added to the model."""
        proto = onnx_fn.to_function_proto()
        function = ir.serde.deserialize_function(proto)
        self.builder.functions[function.identifier()] = function
        version = int(getattr(onnx_fn.opset, "version", 1))
        self.builder.custom_opsets.setdefault(function.domain, version)
        return self.op(f"{function.domain}::{function.name}", *raw_args, outputs=outputs, **kwargs)

    def __repr__(self) -> str:
        return f"SymbolicGraph(opset={self.opset})"


def _check_standard_op(opname: str) -> bool:
    """True for an op without a domain that ONNX does not define (torch 1.x's documents show
    ``g.op("Foo", ...)``): it is written as asked, as torch.onnx does, with a warning that no
    standard runtime runs it."""
    import onnx.defs

    domain, _, op_type = opname.rpartition("::")
    if domain not in ("", "onnx") or onnx.defs.has(op_type):
        return False
    warnings.warn(
        f"g.op({opname!r}): {op_type!r} is not an ONNX operator; it is written in the default "
        "ONNX domain as asked (as torch.onnx does), but no standard runtime, ONNX Runtime "
        "included, can load the model. Name a custom op with its domain, e.g. "
        f"g.op('custom_domain::{op_type}', ...) with export(custom_opsets="
        "{'custom_domain': 1}), and register its kernel with the runtime.", UserWarning)
    return True


def _input(builder: GraphBuilder, value: Any, scalar_dtype: ir.DataType | None) -> Any:
    if isinstance(value, SymbolicValue):
        return value.ir_value
    if isinstance(value, torch.Tensor):
        return builder.const(value)
    if scalar_dtype is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        return builder.const(value, scalar_dtype)
    return value


# Ops whose inputs must share one type: a Python number among them takes the type of the
# tensors (torch.onnx's scalar type analysis does the same for symbolics' scalar inputs).
_SAME_TYPE_OPS = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum", "Mod",
                  "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Clip", "Where"}


def _scalar_dtype(opname: str, raw_args: tuple) -> ir.DataType | None:
    if opname.removeprefix("onnx::") not in _SAME_TYPE_OPS:
        return None
    values = [a.ir_value for a in raw_args if isinstance(a, SymbolicValue)]
    if opname.endswith("Where"):
        values = [a.ir_value for a in raw_args[1:] if isinstance(a, SymbolicValue)]
    return next((v.dtype for v in values if v.dtype is not None), None)


def _type_constant(value: ir.Value, attributes: dict) -> None:
    tensor = attributes.get("value_t", attributes.get("value"))
    if isinstance(tensor, torch.Tensor):
        value.dtype = _onnx_dtype(tensor.dtype)
        value.shape = ir.Shape(list(tensor.shape))
        # Known content lets parse_args and _maybe_get_const read it back as a Python value.
        value.const_value = TorchTensor(on_cpu(tensor).contiguous())
    elif isinstance(attributes.get("value_f"), float) or "value_float" in attributes:
        value.dtype = ir.DataType.FLOAT
        value.shape = ir.Shape([])
    elif isinstance(attributes.get("value_i"), int) or "value_int" in attributes:
        value.dtype = ir.DataType.INT64
        value.shape = ir.Shape([])


def _onnx_dtype(dtype: torch.dtype) -> ir.DataType:
    from onnx_ir.tensor_adapters import from_torch_dtype

    return from_torch_dtype(dtype)


class SymbolicType:
    """What ``value.type()`` answers: torch's ``TensorType`` questions on an ONNX value."""

    def __init__(self, dtype: ir.DataType | None, shape: ir.Shape | None):
        self._dtype = dtype
        self._shape = shape

    def scalarType(self) -> str | None:  # noqa: N802 (torch's name)
        from onnxport.compat.jit_scalar_type import JitScalarType

        if self._dtype is None:
            return None
        return JitScalarType.from_value(self._dtype).scalar_name()

    def dtype(self) -> torch.dtype | None:
        from onnxport.compat.jit_scalar_type import JitScalarType

        if self._dtype is None:
            return None
        return JitScalarType.from_value(self._dtype).dtype()

    def dim(self) -> int | None:
        return None if self._shape is None else len(self._shape)

    def varyingSizes(self) -> list[int | None] | None:  # noqa: N802
        if self._shape is None:
            return None
        return [d if isinstance(d, int) else None for d in self._shape]

    def sizes(self) -> list[int]:
        sizes = self.varyingSizes()
        if sizes is None or any(d is None for d in sizes):
            raise TranslationError(
                f"value.type().sizes() needs a static shape, but the shape is {self._shape}; "
                f"use value.type().varyingSizes() (None for dynamic dims) or "
                f"symbolic_helper._get_tensor_sizes.")
        return sizes

    def isCompleteTensor(self) -> bool:  # noqa: N802
        sizes = self.varyingSizes()
        return self._dtype is not None and sizes is not None and None not in sizes

    def kind(self) -> str:
        return "TensorType"

    def with_dtype(self, dtype: torch.dtype) -> "SymbolicType":
        return SymbolicType(_onnx_dtype(dtype), self._shape)

    def with_sizes(self, sizes: list[int | None]) -> "SymbolicType":
        dims = [d if d is not None else ir.SymbolicDim(None) for d in sizes]
        return SymbolicType(self._dtype, ir.Shape(dims))

    def __repr__(self) -> str:
        return f"{self.scalarType()}({self._shape})"


class SymbolicNode:
    """What ``value.node()`` answers: the producing node's kind, inputs, outputs, attributes."""

    def __init__(self, node: ir.Node | None, value: ir.Value):
        self._node = node
        self._value = value

    def kind(self) -> str:
        if self._node is None:
            return "prim::Param"
        return f"{self._node.domain or 'onnx'}::{self._node.op_type}"

    def inputs(self) -> list["SymbolicValue"]:
        return [] if self._node is None else [SymbolicValue(v) for v in self._node.inputs
                                               if v is not None]

    def outputs(self) -> list["SymbolicValue"]:
        if self._node is None:
            return [SymbolicValue(self._value)]
        return [SymbolicValue(v) for v in self._node.outputs]

    def output(self) -> "SymbolicValue":
        outputs = self.outputs()
        if len(outputs) != 1:
            raise TranslationError(f"node {self.kind()} has {len(outputs)} outputs, not one")
        return outputs[0]

    def mustBeNone(self) -> bool:  # noqa: N802
        return False

    def hasAttribute(self, name: str) -> bool:  # noqa: N802
        return self._node is not None and name in self._node.attributes

    def __getitem__(self, name: str) -> Any:
        attribute = self._node.attributes[name] if self._node is not None else None
        if attribute is None:
            raise KeyError(name)
        value = attribute.value
        if isinstance(value, ir.TensorProtocol):
            return as_torch(value)
        return value


class SymbolicValue:
    """A value as torch.onnx symbolic functions see it (``.type()``, ``.node()``,
    ``.setType()``, ``.debugName()``), over the ``onnx_ir.Value`` our builder made."""

    __slots__ = ("ir_value",)

    def __init__(self, value: ir.Value):
        self.ir_value = value

    def type(self) -> SymbolicType:
        return SymbolicType(self.ir_value.dtype, self.ir_value.shape)

    def setType(self, value_type: Any) -> "SymbolicValue":  # noqa: N802
        if isinstance(value_type, SymbolicType):
            if value_type._dtype is not None:
                self.ir_value.dtype = value_type._dtype
            if value_type._shape is not None:
                self.ir_value.shape = value_type._shape
        elif isinstance(value_type, torch.Tensor):
            self.ir_value.dtype = _onnx_dtype(value_type.dtype)
            self.ir_value.shape = ir.Shape(list(value_type.shape))
        else:
            raise TranslationError(
                f"setType expects the type of another value (other.type()), got "
                f"{type(value_type).__name__}")
        return self

    def node(self) -> SymbolicNode:
        return SymbolicNode(self.ir_value.producer(), self.ir_value)

    def debugName(self) -> str:  # noqa: N802
        return self.ir_value.name or ""

    def unique(self) -> int:
        return id(self.ir_value)

    def requiresGrad(self) -> bool:  # noqa: N802
        return False

    def isCompleteTensor(self) -> bool:  # noqa: N802
        return self.type().isCompleteTensor()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SymbolicValue) and other.ir_value is self.ir_value

    def __hash__(self) -> int:
        return id(self.ir_value)

    def __repr__(self) -> str:
        return f"%{self.debugName()} : {self.type()!r}"


def as_torch(tensor: ir.TensorProtocol) -> torch.Tensor:
    """An ONNX tensor's content as a torch tensor (without a copy when it wraps one)."""
    if isinstance(tensor, TorchTensor):
        return tensor.raw
    return torch.from_numpy(tensor.numpy().copy())
