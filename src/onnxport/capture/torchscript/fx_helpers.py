"""Small helpers over the converted FX graph that every phase uses."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.utils._pytree as pytree


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


def _results_listed(graph: torch.fx.Graph, out_spec: Any) -> Any:
    """A result that is a list of tensors in one value (a scripted ``return x.unbind(1)``, whose
    graph returns the op's ``Tensor[]``) as its items, one output each, as eager returns them;
    the graph's output is changed and the outputs' new structure returned. Needs the nodes'
    fake values (``meta["val"]``)."""
    output = next(n for n in graph.nodes if n.op == "output")
    results = list(output.args[0])
    if not any(isinstance(r.meta.get("val"), (list, tuple)) for r in results):
        return out_spec

    def items(node: torch.fx.Node) -> Any:
        values = node.meta.get("val")
        if not isinstance(values, (list, tuple)):
            return node
        listed = []
        with graph.inserting_before(output):
            for k, value in enumerate(values):
                item = graph.call_function(operator.getitem, (node, k))
                item.meta["val"] = value
                listed.append(item)
        return listed

    nested = pytree.tree_map_only(torch.fx.Node, items, pytree.tree_unflatten(results, out_spec))
    flat, out_spec = pytree.tree_flatten(nested)
    output.args = (tuple(flat),)
    return out_spec
