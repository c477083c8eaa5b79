"""What the captured graph needs before translation: runtime asserts dropped, and
functionalization when it writes into views or inputs."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.export import ExportedProgram

from onnxport.capture.common import aliases, first_lines
from onnxport.errors import CaptureError


_RUNTIME_ASSERTS = (torch.ops.aten._assert_scalar.default, torch.ops.aten._assert_async.msg,
                    torch.ops.aten.sym_constrain_range_for_size.default)


def drop_runtime_asserts(graph_module: torch.fx.GraphModule) -> None:
    """Remove torch's runtime asserts on sizes and the Python-number arithmetic only they use
    (``x.reshape(y, -1)`` asserts ``not (y == 0)`` through ``torch.sym_not``): the asserts emit
    nothing in ONNX, and their arithmetic may have no translation."""
    graph = graph_module.graph
    asserts = [n for n in graph.nodes if n.op == "call_function" and n.target in _RUNTIME_ASSERTS]
    if not asserts:
        return
    pending = []
    for node in asserts:
        pending.extend(a for a in node.all_input_nodes)
        graph.erase_node(node)
    while pending:
        node = pending.pop()
        if getattr(node, "_erased", False) or node.users or node.op != "call_function":
            continue
        if not _is_number_arithmetic(node):
            continue
        inputs = node.all_input_nodes
        graph.erase_node(node)
        pending.extend(inputs)
    graph_module.recompile()


def _is_number_arithmetic(node: torch.fx.Node) -> bool:
    """A call on Python numbers (operator.eq, torch.sym_not...), never one on tensors."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload) or isinstance(
            node.meta.get("val"), torch.Tensor):
        return False
    return getattr(target, "__module__", None) in ("_operator", "operator", "torch") or \
        target in (torch.sym_not, torch.sym_max, torch.sym_min, torch.sym_float, torch.sym_int,
                   torch.sym_ite)


def needs_functionalization(program: ExportedProgram) -> bool:
    """True when an in-place op writes into a tensor that is read afterwards through another
    alias (a view or the base it is a view of), or into a graph input. Rebinding the written
    value is enough otherwise; these graphs go through torch's functionalization instead."""
    nodes = list(program.graph.nodes)
    order = {node: i for i, node in enumerate(nodes)}
    for node in nodes:
        if node.op != "call_function":
            continue
        schema = getattr(node.target, "_schema", None)
        if schema is None or not schema.is_mutable:
            continue
        for position, argument in enumerate(schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = node.args[position] if position < len(node.args) else \
                node.kwargs.get(argument.name)  # (out= is keyword-only)
            if not isinstance(value, torch.fx.Node):
                continue
            if value.op == "placeholder":
                return True
            for alias in aliases(value):
                if alias is not value and any(order[user] > order[node] for user in alias.users):
                    return True
    return False


def functionalize(program: ExportedProgram, keep_op: Callable[[Any], bool]) -> ExportedProgram:
    """Functionalize ``program``, decomposing only the ops ``keep_op`` does not keep."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if keep_op(op):
            del table[op]
    try:
        return program.run_decompositions(table)
    except Exception as error:
        raise CaptureError(
            f"functionalizing the captured graph (it writes into views) failed: "
            f"{type(error).__name__}: {first_lines(str(error))}") from error

