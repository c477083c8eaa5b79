"""The helpers torch.onnx symbolic functions import from ``torch.onnx.symbolic_helper``
(``parse_args``, ``_get_tensor_rank``, ``_maybe_get_const``...), over onnxport's values.

Symbolic functions receive tensors as values and other arguments as Python values; these
helpers accept both, so that a function written for torch.onnx runs unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from onnxport.compat.symbolic_graph import SymbolicValue, as_torch
from onnxport.errors import OnnxExporterError, TranslationError

_DESCRIPTORS = ("v", "i", "is", "f", "fs", "b", "s", "t", "none")


def parse_args(*arg_descriptors: str) -> Callable:
    """Convert a symbolic function's inputs before the call: ``"v"`` a value (as is), ``"i"``
    int, ``"is"`` list of ints, ``"f"`` float, ``"fs"`` list of floats, ``"b"`` bool, ``"s"``
    string, ``"t"`` a torch.Tensor, ``"none"`` unused (as is)."""
    for descriptor in arg_descriptors:
        if descriptor not in _DESCRIPTORS:
            raise OnnxExporterError(
                f"parse_args: unknown descriptor {descriptor!r}; use one of {_DESCRIPTORS}")

    def decorator(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(g, *args, **kwargs):
            if len(args) > len(arg_descriptors):
                raise TranslationError(
                    f"{fn.__qualname__} got {len(args)} inputs but parse_args describes "
                    f"{len(arg_descriptors)}; add a descriptor for each input.")
            name = getattr(fn, "__name__", "symbolic")
            parsed = [_parse_arg(a, d, i, name)
                      for i, (a, d) in enumerate(zip(args, arg_descriptors))]
            return fn(g, *parsed, **kwargs)

        wrapper._onnxport_arg_descriptors = arg_descriptors
        return wrapper

    return decorator


def _parse_arg(value: Any, desc: str, index: Any = None, node_name: str = "") -> Any:
    if desc in ("v", "none"):
        return value
    if _is_value(value):
        constant = _constant_tensor(value)
        if constant is None:
            raise TranslationError(
                f"{node_name}: input {index} must be a constant to be parsed as {desc!r}, but it "
                f"is computed in the graph ({value!r}); parse it as 'v' and use it as a value.")
        value = constant
    return _convert(value, desc, index, node_name)


def _convert(value: Any, desc: str, index: Any = None, node_name: str = "") -> Any:
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        if desc == "t":
            return value
        if desc in ("is", "fs"):
            value = value.tolist()
            value = value if isinstance(value, list) else [value]
        else:
            value = value.item()
    if desc == "t":
        return torch.tensor(value)
    if desc == "i":
        return int(value)
    if desc == "f":
        return float(value)
    if desc == "b":
        return bool(value)
    if desc == "s":
        return str(value)
    if desc == "is":
        return [int(_constant_or_self(v)) for v in value]
    if desc == "fs":
        return [float(_constant_or_self(v)) for v in value]
    raise TranslationError(f"{node_name}: cannot parse input {index} as {desc!r}")


def _constant_or_self(value: Any) -> Any:
    if _is_value(value):
        constant = _constant_tensor(value)
        if constant is None:
            raise TranslationError(f"expected a constant, got a computed value {value!r}")
        return constant.item()
    if isinstance(value, torch.Tensor):
        return value.item()
    return value


def _constant_tensor(value: SymbolicValue) -> torch.Tensor | None:
    """The value's content when it is known at export time (a Constant node, an initializer)."""
    ir_value = value.ir_value
    tensor = ir_value.const_value
    if tensor is None:
        node = ir_value.producer()
        if node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            attribute = node.attributes.get("value")
            tensor = attribute.value if attribute is not None else None
    if tensor is None:
        return None
    return as_torch(tensor)


# -- predicates -------------------------------------------------------------------------------
def _is_value(x: Any) -> bool:
    return isinstance(x, SymbolicValue)


def _is_none(x: Any) -> bool:
    return x is None


def _is_constant(value: Any) -> bool:
    return not _is_value(value) or _constant_tensor(value) is not None


def _is_tensor(x: Any) -> bool:
    return _is_value(x)


def _is_list(x: Any) -> bool:
    return isinstance(x, (list, tuple))


def _is_packed_list(list_value: Any) -> bool:
    return _is_list(list_value)


# -- constants --------------------------------------------------------------------------------
def _maybe_get_const(value: Any, desc: str) -> Any:
    """``value`` parsed as ``desc`` when it is known at export time, else ``value`` itself."""
    if _is_value(value) and _constant_tensor(value) is None:
        return value
    return _parse_arg(value, desc)


def _get_const(value: Any, desc: str, arg_name: str) -> Any:
    """``value`` parsed as ``desc``; an error naming ``arg_name`` when it is not a constant."""
    if not _is_constant(value):
        raise TranslationError(
            f"ONNX export failed: {arg_name} must be a constant, got a computed value {value!r}")
    return _parse_arg(value, desc)


def _maybe_get_scalar(value: Any) -> Any:
    constant = _maybe_get_const(value, "t")
    if isinstance(constant, torch.Tensor) and constant.shape == ():
        return constant
    return value


def _scalar(x: Any) -> Any:
    """A one-element tensor (or a Python number) as a Python number."""
    if isinstance(x, torch.Tensor):
        return x.item() if x.numel() == 1 else None
    if _is_value(x):
        constant = _constant_tensor(x)
        return None if constant is None or constant.numel() != 1 else constant.item()
    return x


def _unpack_list(list_value: Any) -> list:
    if not _is_list(list_value):
        raise TranslationError(f"expected a list of values, got {list_value!r}")
    return list(list_value)


_unpack_tuple = _unpack_list


# -- shapes and types ---------------------------------------------------------------------------
def _get_tensor_rank(x: Any) -> int | None:
    if not _is_value(x):
        return None
    return x.type().dim()


def _get_tensor_sizes(x: Any, allow_nonstatic: bool = True) -> list[int | None] | None:
    if not _is_value(x):
        return None
    sizes = x.type().varyingSizes()
    if sizes is not None and not allow_nonstatic and None in sizes:
        return None
    return sizes


def _get_tensor_dim_size(x: Any, dim: int) -> int | None:
    sizes = _get_tensor_sizes(x)
    return sizes[dim] if sizes else None


def _type_promote_from_values(*args: Any):
    from onnxport.compat.jit_scalar_type import JitScalarType

    dtypes = [JitScalarType.from_value(a).dtype() for a in args if _is_value(a)
              and a.ir_value.dtype is not None]
    if not dtypes:
        return JitScalarType.UNDEFINED
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = torch.promote_types(result, dtype)
    return JitScalarType.from_dtype(result)


def _is_fp(value: Any) -> bool:
    from onnxport.compat.jit_scalar_type import JitScalarType

    return _is_value(value) and JitScalarType.from_value(value, JitScalarType.UNDEFINED) in (
        JitScalarType.FLOAT, JitScalarType.DOUBLE, JitScalarType.HALF, JitScalarType.BFLOAT16)


def _is_bool(value: Any) -> bool:
    return _is_value(value) and value.ir_value.dtype is not None and \
        value.ir_value.dtype.name == "BOOL"


def _if_scalar_type_as(self: Any, tensor: Any) -> Any:
    """A Python number (or 0-d tensor) as a tensor of ``tensor``'s type; values pass as is."""
    from onnxport.compat.jit_scalar_type import JitScalarType

    if _is_value(self):
        return self
    dtype = JitScalarType.from_value(tensor, JitScalarType.UNDEFINED)
    if dtype is JitScalarType.UNDEFINED:
        return self
    return torch.as_tensor(self, dtype=dtype.dtype())


# -- opset-aware builders (the forms torch.onnx's helpers emit) ---------------------------------
def _int64(g, values: Any):
    if _is_value(values):
        return values
    return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))


def _unsqueeze_helper(g, input: Any, axes_i: list[int]):
    if g.opset >= 13:
        return g.op("Unsqueeze", input, _int64(g, axes_i))
    return g.op("Unsqueeze", input, axes_i=axes_i)


def _squeeze_helper(g, input: Any, axes_i: list[int]):
    if g.opset >= 13:
        return g.op("Squeeze", input, _int64(g, axes_i))
    return g.op("Squeeze", input, axes_i=axes_i)


def _slice_helper(g, input: Any, axes: Any, starts: Any, ends: Any, steps: Any = None):
    if g.opset >= 10:
        inputs = [input, _int64(g, starts), _int64(g, ends), _int64(g, axes)]
        if steps is not None:
            inputs.append(_int64(g, steps))
        return g.op("Slice", *inputs)
    if steps is not None and any(s != 1 for s in steps):
        _onnx_opset_unsupported("Slice with steps", g.opset, 10)
    return g.op("Slice", input, axes_i=axes, starts_i=starts, ends_i=ends)


def _reshape_helper(g, input: Any, shape: Any, allowzero: int = 0):
    if g.opset >= 14:
        return g.op("Reshape", input, _int64(g, shape), allowzero_i=allowzero)
    if allowzero:
        _onnx_opset_unsupported("Reshape with allowzero=1", g.opset, 14)
    return g.op("Reshape", input, _int64(g, shape))


def _size_helper(g, self: Any, dim: Any):
    """``self.size(dim)`` as a 0-d int64 value."""
    return g.op("Gather", g.op("Shape", self), _int64(g, dim), axis_i=0)


# -- failing clearly ----------------------------------------------------------------------------
def _unimplemented(op: str, msg: str, value: Any = None) -> None:
    raise TranslationError(f"Unsupported: ONNX export of {op}: {msg}")


def _onnx_unsupported(op_name: str, value: Any = None) -> None:
    raise TranslationError(
        f"Unsupported: ONNX export of operator {op_name}; register a symbolic function for it "
        f"with onnxport.register_custom_op_symbolic.")


def _onnx_opset_unsupported(op_name: str, current_opset: int, supported_opset: int,
                            value: Any = None) -> None:
    raise TranslationError(
        f"Unsupported: ONNX export of {op_name} in opset {current_opset}; export with "
        f"opset_version={supported_opset} or later.")


__all__ = ["parse_args"]
