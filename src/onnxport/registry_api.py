"""``OnnxRegistry``: the registry object of the dynamo-page API. Translations registered on one
are an overlay over the built-in op library, seen only by the exports given that registry."""

from __future__ import annotations

from typing import Callable

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
    tensors. (onnxscript functions are not accepted yet.)
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
        if not callable(function):
            if hasattr(function, "to_function_proto"):
                raise InvalidExportOptionsError(
                    f"register_op got an onnxscript function ({function!r}); onnxport does not "
                    "take onnxscript functions yet: write the translation as a Python function "
                    "def fn(g, *args, **kwargs) building nodes with g.op(...)")
            raise InvalidExportOptionsError(
                f"register_op needs a function def fn(g, *args, **kwargs), got "
                f"{type(function).__name__}")
        self._custom.register(_qualified_name(namespace, op_name, overload), function)

    def get_op_functions(self, namespace: str, op_name: str,
                         overload: str | None = None) -> list[Callable] | None:
        """The functions that would translate the op, the one used first; None if none does."""
        name = _qualified_name(namespace, op_name, overload)
        found = [t.function for t in (self._custom.lookup(name, self._opset_version),
                                      default_registry().lookup(name, self._opset_version))
                 if t is not None]
        return found or None

    def is_registered_op(self, namespace: str, op_name: str, overload: str | None = None) -> bool:
        """True when an export at this registry's opset has a translation for the op."""
        return self.get_op_functions(namespace, op_name, overload) is not None

    # What translate/ asks a registry; the custom registration wins over the built-in one.
    def lookup(self, name: str, opset: int) -> Translation | None:
        found = self._custom.lookup(name, opset)
        return found if found is not None else default_registry().lookup(name, opset)

    def is_registered(self, name: str, opset: int = 10**6) -> bool:
        return self.lookup(name, opset) is not None

    def names(self) -> list[str]:
        return sorted(set(self._custom.names()) | set(default_registry().names()))

    def __repr__(self) -> str:
        return (f"OnnxRegistry(opset_version={self._opset_version}, "
                f"custom={list(self._custom.names())})")


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
