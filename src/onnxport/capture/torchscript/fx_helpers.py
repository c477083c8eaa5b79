"""Small helpers over the converted FX graph that every phase uses."""

from __future__ import annotations

from typing import Any

import torch


def _eliminate_dead_code(graph: torch.fx.Graph) -> None:
    """``graph.eliminate_dead_code()``, less its lint of the whole graph (this one was built in
    order) and with the purity of each op looked up once, not once per node: a call's purity
    depends on its op alone, but for a higher-order op, whose operands tell."""
    impure: dict[Any, bool] = {}
    for node in reversed(graph.nodes):
        if node.users:
            continue
        target = node.target
        if node.op == "call_function" and not isinstance(target, torch._ops.HigherOrderOperator):
            if target not in impure:
                impure[target] = node.is_impure()
            if impure[target]:
                continue
        elif node.is_impure():
            continue
        graph.erase_node(node)


def _attribute(module: torch.nn.Module, path: str) -> Any:
    for part in path.split("."):
        module = getattr(module, part)
    return module


def _source_of(node: torch.fx.Node) -> str:
    frames = node.meta.get("stack_trace", "").strip().splitlines()
    return frames[-1].strip() if frames else node.name
