"""Users' symbolic functions written for torch.onnx (``register_custom_op_symbolic``): their
registration in the registry's users' layer, as translations that call them the torch.onnx way.

A symbolic function is called as torch.onnx calls it: ``fn(g, *inputs)`` with every argument of
the op's schema in order (defaults filled in), tensors as values, other arguments as Python
values (``symbolic_helper.parse_args`` accepts both).
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any, Callable

import torch

from onnxport.compat.symbolic_graph import SymbolicGraph, SymbolicValue, wrap
from onnxport.errors import OnnxExporterError, TranslationError
from onnxport.translate.builder import GraphBuilder
from onnxport.translate.registry import default_registry, normalize_name

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


