"""``operator_export_type``: the registry an export looks translations up in, when ops without
an ONNX translation are kept as nodes of another domain instead of failing the export.

- ONNX_FALLTHROUGH: an op with neither a translation nor a decomposition stays one node of its
  own namespace (``aten::foo`` -> domain ``aten``, op ``foo``);
- ONNX_ATEN_FALLBACK: such an op becomes torch's ``org.pytorch.aten::ATen`` node;
- ONNX_ATEN: every ATen op becomes an ``ATen`` node (custom ops and symbolics still apply).
Tensor arguments are the node's inputs, the others its attributes, named as in the schema.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from onnxport.compat.enums import OperatorExportTypes
from onnxport.translate import decompose
from onnxport.translate.registry import (
    Registry, Translation, aten_name, default_registry, normalize_name)

ATEN_DOMAIN = "org.pytorch.aten"


class FallbackRegistry:
    """``base``'s translations, with a node of another domain for the ops it cannot translate."""

    def __init__(self, base: Registry, operator_export_type: OperatorExportTypes):
        self.base = base
        self.operator_export_type = operator_export_type
        # Ops whose decomposition has ops without a translation: kept whole, as torch.onnx
        # keeps the op it has no symbolic for (not the prims op its decomposition ends in).
        self.kept_whole: set[str] = set()

    def prepare(self, graph_module: torch.fx.GraphModule, opset: int) -> None:
        """Find the ops of the captured graph to keep whole (see ``kept_whole``)."""
        for module in graph_module.modules():
            if not isinstance(module, torch.fx.GraphModule):
                continue
            for node in module.graph.nodes:
                if node.op != "call_function" or not isinstance(node.target,
                                                                torch._ops.OpOverload):
                    continue
                name = normalize_name(aten_name(node.target))
                if name in self.kept_whole or self.base.lookup(name, opset) is not None \
                        or not _has_decomposition(name):
                    continue
                if not self._decomposes_fully(node, opset, depth=0):
                    self.kept_whole.add(name)

    def _decomposes_fully(self, node: torch.fx.Node, opset: int, depth: int) -> bool:
        try:
            traced = decompose.decomposition(node)
        except Exception:  # torch raises many kinds; all mean "cannot decompose"
            return False
        for inner in traced.module.graph.nodes:
            if inner.op != "call_function" or not isinstance(inner.target,
                                                              torch._ops.OpOverload):
                continue
            name = normalize_name(aten_name(inner.target))
            if self.base.lookup(name, opset) is not None:
                continue
            if depth > 4 or not _has_decomposition(name) or \
                    not self._decomposes_fully(inner, opset, depth + 1):
                return False
        return True

    def lookup(self, name: str, opset: int) -> Translation | None:
        kind = self.operator_export_type
        if kind == OperatorExportTypes.ONNX_ATEN and name.startswith("aten::") and \
                default_registry().custom.lookup(name, opset) is None:  # users' symbolics
            return Translation(name, _aten_node, 1)
        found = self.base.lookup(name, opset)
        if found is not None or (_has_decomposition(name)
                                 and normalize_name(name) not in self.kept_whole):
            return found
        if kind == OperatorExportTypes.ONNX_ATEN_FALLBACK and name.startswith("aten::"):
            return Translation(name, _aten_node, 1)
        return Translation(name, _namespace_node, 1)

    def is_registered(self, name: str, opset: int = 10**6) -> bool:
        return self.lookup(name, opset) is not None

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.base, attribute)


def fallback_registry(registry: Registry, operator_export_type: OperatorExportTypes):
    if operator_export_type == OperatorExportTypes.ONNX:
        return registry
    return FallbackRegistry(registry, operator_export_type)


def _has_decomposition(name: str) -> bool:
    target = _overload(name)
    try:
        return target is not None and decompose.has_decomposition(target)
    except RuntimeError:  # not a dispatcher op
        return False


def _overload(name: str):
    namespace, _, rest = name.partition("::")
    op_name, _, overload = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), op_name), overload or "default")
    except (AttributeError, RuntimeError):
        return None


def _aten_node(g, *args: Any, **kwargs: Any) -> Any:
    name = g.provenance.aten
    op_name, _, overload = name.removeprefix("aten::").partition(".")
    return _node(g, f"{ATEN_DOMAIN}::ATen", name, args, kwargs,
                 {"operator": op_name, "overload_name": overload})


def _namespace_node(g, *args: Any, **kwargs: Any) -> Any:
    name = g.provenance.aten
    namespace, _, op = name.partition("::")
    return _node(g, f"{namespace}::{op.partition('.')[0]}", name, args, kwargs, {})


def _node(g, op_type: str, name: str, args: tuple, kwargs: dict, attributes: dict) -> Any:
    schema = getattr(_overload(name), "_schema", None)
    argument_names = [a.name for a in schema.arguments] if schema is not None else []
    inputs = []
    for position, value in [*enumerate(args), *kwargs.items()]:
        label = (argument_names[position] if isinstance(position, int)
                 and position < len(argument_names) else str(position))
        if isinstance(value, ir.Value):
            inputs.append(value)
        elif isinstance(value, (list, tuple)) and value and all(
                isinstance(v, ir.Value) for v in value):
            inputs.extend(value)
        elif value is not None and not isinstance(value, (torch.dtype, torch.device,
                                                            torch.layout, torch.memory_format)):
            attributes[label] = value
    expected = g.expected
    count = len(expected) if isinstance(expected, (list, tuple)) else 1
    result = g.op(op_type, *inputs, outputs=count, **attributes)
    return list(result) if isinstance(expected, (list, tuple)) else result
