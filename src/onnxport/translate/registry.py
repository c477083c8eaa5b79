"""The registry of translation functions: ATen op name (and overload) -> ONNX translation.

Opset differences are data on a registration (``since_opset``): a lookup for a target opset
takes the registration with the highest ``since_opset`` that is not above it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Iterable


@dataclasses.dataclass(frozen=True)
class Translation:
    name: str  # "aten::add.Tensor" or "aten::relu" (all overloads)
    function: Callable
    since_opset: int


class Registry:
    """Translations keyed by qualified ATen name, each with the lowest opset it works at."""

    def __init__(self) -> None:
        self._translations: dict[str, list[Translation]] = {}
        # Users' registrations (register_custom_op_symbolic), consulted before the library's
        # own so that they override it at every opset they cover.
        self.custom: Registry | None = None

    def register(self, name: str, function: Callable, since_opset: int = 1) -> None:
        name = normalize_name(name)
        entries = self._translations.setdefault(name, [])
        entries[:] = [t for t in entries if t.since_opset != since_opset]
        entries.append(Translation(name, function, since_opset))
        entries.sort(key=lambda t: t.since_opset)

    def unregister(self, name: str, since_opset: int | None = None) -> None:
        name = normalize_name(name)
        if since_opset is None:
            self._translations.pop(name, None)
        elif name in self._translations:
            self._translations[name] = [
                t for t in self._translations[name] if t.since_opset != since_opset
            ]

    def alias(self, target: str, *names: str) -> None:
        """Register ``target``'s translations, at every opset they cover, for ``names`` too
        (ops that mean the same and take the same arguments)."""
        for translation in self._translations.get(normalize_name(target), ()):
            for name in names:
                self.register(name, translation.function, translation.since_opset)

    def wrap(self, name: str, wrapper: Callable[[Callable], Callable]) -> bool:
        """Replace each of ``name``'s translations by ``wrapper(translation)`` at the same
        opset (a translation that handles more, handing the rest to the one it wraps).
        Returns whether ``name`` had any translation to wrap."""
        entries = list(self._translations.get(normalize_name(name), ()))
        for entry in entries:
            self.register(name, wrapper(entry.function), entry.since_opset)
        return bool(entries)

    def lowest_opset(self, name: str) -> int | None:
        """The lowest opset ``name`` has a translation at (a user's or the library's), or
        None: what an export at a lower opset can be told to ask for."""
        name = normalize_name(name)
        found = [t.since_opset for registry in (self.custom, self) if registry is not None
                 for candidate in (name, name.rsplit(".", 1)[0])
                 for t in registry._translations.get(candidate, ())]
        return min(found, default=None)

    def lookup(self, name: str, opset: int) -> Translation | None:
        """The translation for ``name`` at ``opset``; an exact overload wins over the packet."""
        name = normalize_name(name)
        if self.custom is not None:
            found = self.custom.lookup(name, opset)
            if found is not None:
                return found
        candidates = [name]
        if "." in name.split("::", 1)[-1]:
            candidates.append(name.rsplit(".", 1)[0])
        for candidate in candidates:
            best = None
            for translation in self._translations.get(candidate, ()):
                if translation.since_opset <= opset:
                    best = translation
            if best is not None:
                return best
        return None

    def is_registered(self, name: str, opset: int = 10**6) -> bool:
        return self.lookup(name, opset) is not None

    def names(self) -> Iterable[str]:
        return sorted(self._translations)

    def copy(self) -> "Registry":
        other = Registry()
        other._translations = {k: list(v) for k, v in self._translations.items()}
        other.custom = self.custom.copy() if self.custom is not None else None
        return other


def normalize_name(name: str) -> str:
    """``aten.add.Tensor`` / ``aten::add.Tensor`` / ``aten::add.default`` -> canonical form."""
    if "::" not in name and name.count(".") >= 1:
        namespace, rest = name.split(".", 1)
        name = f"{namespace}::{rest}"
    if name.endswith(".default"):
        name = name[: -len(".default")]
    return name


def aten_name(target) -> str:
    """The qualified name of an OpOverload, e.g. ``aten::add.Tensor``."""
    schema_name = getattr(target, "_schema", None)
    if schema_name is not None:
        overload = target._overloadname
        base = target._schema.name
        return normalize_name(f"{base}.{overload}" if overload else base)
    import torch

    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order::{target.name()}"  # torch.cond, while_loop, scan, map...
    if hasattr(target, "__module__") and hasattr(target, "__name__"):
        return f"{target.__module__}.{target.__name__}"
    return str(target)


# Ops whose translations take and make complex tensors as a last axis of 2 (real, imaginary),
# ONNX DFT's layout (ops/spectral.py); complex tensors elsewhere are refused before translation.
COMPLEX_LAYOUT_OPS: set[str] = set()

_DEFAULT = Registry()
_DEFAULT.custom = Registry()


def translates(*names: str, since_opset: int = 1):
    """Register the decorated function as the translation of ``names`` in the default registry."""

    def decorator(function: Callable) -> Callable:
        for name in names:
            _DEFAULT.register(name, function, since_opset)
        return function

    return decorator


def alias(target: str, *names: str) -> None:
    """Register the library's translations of ``target`` for ``names`` too."""
    _DEFAULT.alias(target, *names)


def wrap_translations(name: str, wrapper: Callable[[Callable], Callable]) -> bool:
    """Wrap the library's translations of ``name`` (see ``Registry.wrap``)."""
    return _DEFAULT.wrap(name, wrapper)


@functools.cache
def default_registry() -> Registry:
    """The built-in op library, loaded once per process."""
    from onnxport.translate import ops  # noqa: F401  (registers on import)

    return _DEFAULT
