"""``OnnxRegistry``: the registry object of the dynamo-page API. Translations registered on one
are an overlay over the built-in op library, seen only by the exports given that registry."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from onnxport._arguments import check_opset
from onnxport.errors import InvalidExportOptionsError
from onnxport.translate.registry import Registry, Translation, default_registry


class OnnxRegistry:
    """Custom translations, consulted before the built-in ones, for one export's use.

    ``register_op(function, "aten", "gelu")`` makes exports given this registry (through
    ``ExportOptions(onnx_registry=...)``) translate ``aten::gelu`` with ``function``; every
    other export, and the process-wide op library, are left as they were. ``function`` is
    called like the built-in translations: ``function(g, *args, **kwargs)`` with ``g`` the
    graph builder (``g.op("Relu", x)``) and the ATen call's arguments, ONNX values in place of
    tensors. It may also be an ``onnxscript.script`` function: the ATen call's arguments fill
    its parameters in order (tensors its inputs, the others its attributes), and the model
    calls it as an ONNX function of its own domain.
    """

    def __init__(self, opset_version: int | None = None) -> None:
        self._opset_version = check_opset(opset_version)
        self._custom = Registry()

    @property
    def opset_version(self) -> int:
        """The ONNX opset the exports given this registry target (18 unless set)."""
        return self._opset_version

    def register_op(self, function: Callable, namespace: str, op_name: str,
                    overload: str | None = None) -> None:
        """Translate ``namespace::op_name[.overload]`` with ``function``. Without an overload,
        every overload of the op that has no registration of its own here is covered."""
        if hasattr(function, "to_function_proto"):
            function = _onnxscript_translation(function)
        elif not callable(function):
            raise InvalidExportOptionsError(
                f"register_op needs a function def fn(g, *args, **kwargs), got "
                f"{type(function).__name__}")
        self._custom.register(_qualified_name(namespace, op_name, overload), function)

    def get_op_functions(self, namespace: str, op_name: str,
                         overload: str | None = None) -> list[Callable] | None:
        """The functions that would translate the op, the one used first; None if none does."""
        name = _qualified_name(namespace, op_name, overload)
        found = [getattr(t.function, "onnxscript_function", t.function)
                 for t in (self._custom.lookup(name, self._opset_version),
                           default_registry().lookup(name, self._opset_version))
                 if t is not None]
        return found or None

    def is_registered_op(self, namespace: str, op_name: str, overload: str | None = None) -> bool:
        """True when an export at this registry's opset has a translation for the op."""
        return self.get_op_functions(namespace, op_name, overload) is not None

    # What translate/ asks a registry; the custom registration wins over the built-in one.
    def lookup(self, name: str, opset: int) -> Translation | None:
        found = self._custom.lookup(name, opset)
        if found is None:
            return default_registry().lookup(name, opset)
        return dataclasses.replace(found, function=_made_by_user(found))

    def is_registered(self, name: str, opset: int = 10**6) -> bool:
        return self.lookup(name, opset) is not None

    def lowest_opset(self, name: str) -> int | None:
        found = [o for o in (self._custom.lowest_opset(name),
                             default_registry().lowest_opset(name)) if o is not None]
        return min(found, default=None)

    def names(self) -> list[str]:
        return sorted(set(self._custom.names()) | set(default_registry().names()))

    def __repr__(self) -> str:
        return (f"OnnxRegistry(opset_version={self._opset_version}, "
                f"custom={list(self._custom.names())})")


def _made_by_user(translation: Translation) -> Callable:
    """``translation``'s function, its nodes stamped as the user's (an invalid model names it)."""
    function = getattr(translation.function, "onnxscript_function", translation.function)
    label = (f"the translation registered on an OnnxRegistry for {translation.name} "
             f"({getattr(function, '__qualname__', None) or repr(function)})")

    def translate(g, *args, **kwargs):
        with g.made_by(label):
            return translation.function(g, *args, **kwargs)

    return translate


def _onnxscript_translation(script_function: Any) -> Callable:
    """A translation that calls ``script_function`` (an ``onnxscript.script`` function) as an
    ONNX function, the ATen call's arguments bound to its parameters by position or name."""
    import inspect

    import onnx_ir as ir

    proto = script_function.to_function_proto()
    definition = ir.serde.deserialize_function(proto)
    inputs = set(proto.input)
    try:
        parameters = list(inspect.signature(script_function.function).parameters)
    except (AttributeError, TypeError, ValueError):
        parameters = list(proto.input) + [a.name for a in definition.attributes.values()]
    version = int(getattr(script_function.opset, "version", 1) or 1)

    def translate(g, *args, **kwargs):
        bound = dict(zip(parameters, args))
        bound.update((k, v) for k, v in kwargs.items() if k in parameters)
        g.functions[definition.identifier()] = definition
        g.custom_opsets.setdefault(definition.domain, version)
        values = [_as_input(g, bound.get(name)) for name in proto.input]
        attributes = {name: value for name, value in bound.items()
                      if name not in inputs and value is not None}
        return g.op(f"{definition.domain}::{definition.name}", *values,
                    outputs=len(proto.output), **attributes)

    translate.__name__ = translate.__qualname__ = getattr(script_function, "name", "onnxscript")
    translate.__doc__ = f"Calls the onnxscript function {definition.domain}::{definition.name}."
    translate.onnxscript_function = script_function  # what get_op_functions answers
    return translate


def _as_input(g, value: Any) -> Any:
    import torch

    if isinstance(value, (bool, int, float, torch.Tensor)):
        return g.const(value)  # a Python number where the function takes a tensor
    return value


def _qualified_name(namespace: str, op_name: str, overload: str | None) -> str:
    for label, part in (("namespace", namespace), ("op_name", op_name)):
        if not isinstance(part, str) or not part or "::" in part or "." in part:
            raise InvalidExportOptionsError(
                f"{label} must be a plain name such as 'aten' or 'gelu', got {part!r}")
    if overload is not None and (not isinstance(overload, str) or "." in overload):
        raise InvalidExportOptionsError(
            f"overload must be a name such as 'Tensor' or 'default', or None, got {overload!r}")
    name = f"{namespace}::{op_name}"
    return f"{name}.{overload}" if overload else name


__all__ = ["OnnxRegistry"]
