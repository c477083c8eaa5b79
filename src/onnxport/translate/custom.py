"""Users' symbolic functions written for torch.onnx (``register_custom_op_symbolic``): their
registration, and the thin ``g`` and value adapters that let them run on our builder unchanged.

A symbolic function is called as torch.onnx calls it: ``fn(g, *inputs)`` with every argument of
the op's schema in order (defaults filled in), tensors as values, other arguments as Python
values (``symbolic_helper.parse_args`` accepts both).
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any, Callable
import warnings

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import TorchTensor

from onnxport.errors import OnnxExporterError, TranslationError
from onnxport.translate.builder import GraphBuilder
from onnxport.verification.validity import UNREGISTERED_OP
from onnxport.translate.registry import default_registry, normalize_name, translates
from onnxport.tensor_values import on_cpu

MIN_CUSTOM_OPSET = 7
MAX_CUSTOM_OPSET = 23

_NAME = re.compile(r"^[a-zA-Z0-9-_]+::[a-zA-Z-_]+[a-zA-Z0-9-_]*$")


# -- registration ------------------------------------------------------------------------------
def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Callable,
                                opset_version: int) -> None:
    """Translate ``symbolic_name`` ("aten::relu", "custom_ops::foo") with ``symbolic_fn`` at
    ``opset_version`` and every later opset (until another registration), in preference to
    the built-in translation."""
    symbolic_name = _check_name(symbolic_name)
    _check_opset(symbolic_name, opset_version)
    if not callable(symbolic_fn):
        raise OnnxExporterError(
            f"Failed to register operator {symbolic_name}: symbolic_fn must be a function "
            f"taking (g, *inputs), got {type(symbolic_fn).__name__}.")
    _custom_registry().register(symbolic_name, _as_translation(symbolic_fn), opset_version)


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    """Remove the registration made for ``symbolic_name`` at ``opset_version``; the built-in
    translation (if any) applies again."""
    symbolic_name = _check_name(symbolic_name)
    _check_opset(symbolic_name, opset_version)
    _custom_registry().unregister(symbolic_name, opset_version)


def _custom_registry():
    return default_registry().custom


def _check_name(symbolic_name: Any) -> str:
    if not isinstance(symbolic_name, str):
        raise OnnxExporterError(
            f"Failed to register operator {symbolic_name!r}: the symbolic name must be a "
            f"string 'namespace::name', e.g. 'aten::relu' or 'custom_ops::foo_forward'.")
    if symbolic_name.startswith("::"):
        symbolic_name = "aten" + symbolic_name
    if not _NAME.match(symbolic_name):
        raise OnnxExporterError(
            f"Failed to register operator {symbolic_name!r}. The symbolic name must match the "
            f"format namespace::name (e.g. 'aten::{symbolic_name.split('::')[-1] or 'relu'}' or "
            f"'custom_ops::foo_forward'), start with a letter and contain only alphanumerical "
            f"characters, '-' and '_'.")
    if symbolic_name.split("::", 1)[0] == "onnx":
        raise OnnxExporterError(
            f"Failed to register operator {symbolic_name!r}: the 'onnx' namespace cannot be "
            f"modified; register the torch op (e.g. 'aten::relu') instead.")
    return normalize_name(symbolic_name)


def _check_opset(symbolic_name: str, opset_version: Any) -> None:
    if (isinstance(opset_version, bool) or not isinstance(opset_version, int)
            or not MIN_CUSTOM_OPSET <= opset_version <= MAX_CUSTOM_OPSET):
        raise OnnxExporterError(
            f"Failed to register operator {symbolic_name!r}: opset_version={opset_version!r} "
            f"is not supported; it must be an int from {MIN_CUSTOM_OPSET} to "
            f"{MAX_CUSTOM_OPSET} (a registration serves its opset and every later one).")


# -- calling a symbolic function -----------------------------------------------------------------
def _as_translation(symbolic_fn: Callable) -> Callable:
    """A translation (our calling convention) that calls ``symbolic_fn`` the torch.onnx way."""

    @functools.wraps(symbolic_fn)
    def translation(g: GraphBuilder, *args: Any, **kwargs: Any) -> Any:
        inputs = _schema_arguments(g.provenance.aten, args, kwargs)
        inputs = _fit_to_signature(symbolic_fn, inputs, g.provenance.aten)
        return call_symbolic(symbolic_fn, g, [wrap(v) for v, _ in inputs], {},
                             f"the symbolic function registered for {g.provenance.aten}")

    translation.symbolic_fn = symbolic_fn
    return translation


def call_symbolic(symbolic_fn: Callable, g: GraphBuilder, inputs: list, kwargs: dict,
                  label: str) -> Any:
    """``symbolic_fn(g, *inputs, **kwargs)``, its result checked against the op's outputs:
    a failure names the op (``label``), the function and what it returned."""
    function = getattr(symbolic_fn, "__qualname__", repr(symbolic_fn))
    try:
        with g.made_by(f"{label} ({function})"):
            result = symbolic_fn(SymbolicGraph(g), *inputs, **kwargs)
    except (TranslationError, OnnxExporterError):
        raise
    except Exception as error:
        raise TranslationError(
            f"{label} ({function}) raised {type(error).__name__}: {error}") from error
    expected = g.expected
    count = len(expected) if isinstance(expected, (list, tuple)) else 1
    returned = list(result) if isinstance(result, (list, tuple)) else [result]
    if result is None or not all(isinstance(r, SymbolicValue) for r in returned):
        shown = "None" if result is None else ", ".join(type(r).__name__ for r in returned)
        raise TranslationError(
            f"{label} ({function}) returned {shown}; it must return the value(s) it built "
            f"with g.op(...) ({count} for this op).")
    if len(returned) != count:
        raise TranslationError(
            f"{label} ({function}) returned {len(returned)} value(s), but the op has {count} "
            f"output(s); return one value per output (g.op(..., outputs=n) makes n).")
    if isinstance(expected, (list, tuple)):
        return [r.ir_value for r in returned]
    return returned[0].ir_value


# -- torch.autograd.Function (kept whole by capture/quirks/autograd_functions.py) ---------------
# The node meta key under which capture records the Function's call (class and arguments).
_FUNCTION_CALL_META = "onnxport_autograd_function"


@translates("onnxport::autograd_function")
def autograd_function(g: GraphBuilder, tensors: list, call_name: str) -> Any:
    """autograd_function(Tensor[] tensors, str call) -> Tensor[]"""
    call = g.node_meta[_FUNCTION_CALL_META]
    cls = call.cls
    inputs = call.bind([wrap(t) for t in tensors])
    python_op = _custom_registry().lookup("prim::PythonOp", g.opset)
    if python_op is not None:
        symbolic_fn = getattr(python_op.function, "symbolic_fn", python_op.function)
        try:
            return call_symbolic(symbolic_fn, g, inputs,
                                 {"name": cls.__name__, "module": cls.__module__,
                                  "inplace": False},
                                 f"the symbolic function registered for prim::PythonOp "
                                 f"(autograd Function {cls.__qualname__})")
        except TranslationError:
            if not has_symbolic(cls):
                raise
    if has_symbolic(cls):
        return call_symbolic(cls.symbolic, g, inputs, {},
                             f"the symbolic of autograd Function {cls.__qualname__}")
    # operator_export_type=ONNX_FALLTHROUGH / ONNX_ATEN_FALLBACK: one node, as torch.onnx's
    # prim::PythonOp.
    count = len(g.expected) if isinstance(g.expected, (list, tuple)) else 1
    result = g.op("prim::PythonOp", *tensors, outputs=count, name=cls.__name__,
                  module=cls.__module__)
    return list(result) if count > 1 else [result]


def has_symbolic(cls: type) -> bool:
    """True when ``cls`` has a static ``symbolic`` that can run on onnxport's ``g``."""
    symbolic = getattr(cls, "symbolic", None)
    if not callable(symbolic):
        return False
    if _calls_torch_onnx(symbolic):
        warnings.warn(
            f"{cls.__qualname__}.symbolic calls torch.onnx's own functions (written for "
            f"torch.onnx's TorchScript graph), which onnxport does not run: the ops of its "
            f"forward are exported instead. To choose the ONNX ops, register a symbolic for "
            f"'prim::PythonOp' with onnxport.register_custom_op_symbolic.",
            UserWarning, stacklevel=4)  # the line that applies the Function
        return False
    return True


def kept_autograd_functions(opset: int, operator_export_type) -> Callable[[type], bool]:
    """Which autograd Functions capture keeps as one call: those with a ``symbolic``, all when
    a ``prim::PythonOp`` symbolic is registered or when they may stay one node; the others are
    inlined into their ops."""
    from onnxport._enums import OperatorExportTypes

    keep_all = operator_export_type in (OperatorExportTypes.ONNX_FALLTHROUGH,
                                        OperatorExportTypes.ONNX_ATEN_FALLBACK) or \
        default_registry().custom.lookup("prim::PythonOp", opset) is not None
    return lambda cls: keep_all or has_symbolic(cls)


def _calls_torch_onnx(function: Callable) -> bool:
    """Whether ``function`` imports or reads ``torch.onnx`` (its symbolic_opsetN functions
    take torch's own graph objects; transformers' XSoftmax and XDropout call them)."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return False
    codes, names = [code], set()
    while codes:
        current = codes.pop()
        names.update(current.co_names)
        codes.extend(c for c in current.co_consts if hasattr(c, "co_names"))
    return "onnx" in names or any(name.startswith("torch.onnx") for name in names)



_NO_DEFAULT = object()


def _schema_arguments(name: str, args: tuple, kwargs: dict) -> list[tuple[Any, Any]]:
    """Every argument of ``name``'s schema in order, as (value, schema default): the FX call
    leaves out arguments at their default, a TorchScript node (what symbolics expect) does not."""
    schema = _schema(name)
    if schema is None:
        return [(a, _NO_DEFAULT) for a in args] + [(v, _NO_DEFAULT) for v in kwargs.values()]
    result = []
    for i, argument in enumerate(schema.arguments):
        default = argument.default_value if argument.has_default_value() else _NO_DEFAULT
        if i < len(args) and not argument.kwarg_only:
            value = args[i]
        elif argument.name in kwargs:
            value = kwargs[argument.name]
        else:
            value = None if default is _NO_DEFAULT else default
        result.append((value, default))
    return result


def _schema(name: str):
    namespace, _, rest = name.partition("::")
    op_name, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), op_name)
        return getattr(packet, overload or "default")._schema
    except (AttributeError, RuntimeError):
        return None


def _fit_to_signature(symbolic_fn: Callable, inputs: list, name: str) -> list:
    """Drop trailing arguments the function does not take, when they are at their default
    (older symbolics, like the documents' ``elu(g, input, alpha, inplace=False)``, name fewer
    arguments than today's schema has)."""
    target = inspect.unwrap(symbolic_fn)
    try:
        parameters = list(inspect.signature(target).parameters.values())[1:]  # after g
    except (TypeError, ValueError):
        return inputs
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return inputs
    limit = len([p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
    descriptors = getattr(symbolic_fn, "_onnxport_arg_descriptors", None)
    if descriptors is not None:
        limit = min(limit, len(descriptors))
    for value, default in inputs[limit:]:
        if default is _NO_DEFAULT or not _equal(value, default):
            raise TranslationError(
                f"the symbolic function registered for {name} takes {limit} inputs after g, "
                f"but the op is called with {len(inputs)} and input {len(inputs[:limit]) + 1} "
                f"({value!r}) is not at its default; add the missing parameters to the "
                f"function.")
    return inputs[:limit]


def _equal(value: Any, default: Any) -> bool:
    try:
        return bool(value == default)
    except Exception:
        return False


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
        from onnxport._type_utils import JitScalarType

        if self._dtype is None:
            return None
        return JitScalarType.from_value(self._dtype).scalar_name()

    def dtype(self) -> torch.dtype | None:
        from onnxport._type_utils import JitScalarType

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


def check_custom_opsets(custom_opsets: Any) -> dict[str, int]:
    """``export(custom_opsets=...)``: a dict of custom domain -> opset version."""
    if custom_opsets is None:
        return {}
    if not isinstance(custom_opsets, dict) or not all(
            isinstance(k, str) and k and isinstance(v, int) and not isinstance(v, bool) and v >= 1
            for k, v in custom_opsets.items()):
        from onnxport.errors import InvalidExportOptionsError

        raise InvalidExportOptionsError(
            f"custom_opsets must be a dict of custom domain name -> opset version (an int "
            f">= 1), e.g. {{'custom_domain': 2}}; got {custom_opsets!r}")
    if "" in custom_opsets or "ai.onnx" in custom_opsets:
        from onnxport.errors import InvalidExportOptionsError

        raise InvalidExportOptionsError(
            "custom_opsets names custom domains only; set the ONNX opset with opset_version")
    return dict(custom_opsets)


def as_torch(tensor: ir.TensorProtocol) -> torch.Tensor:
    """An ONNX tensor's content as a torch tensor (without a copy when it wraps one)."""
    if isinstance(tensor, TorchTensor):
        return tensor.raw
    return torch.from_numpy(tensor.numpy().copy())
