"""Selective decomposition: a call with no translation is replaced by its ATen decomposition,
traced for that one node on the fake values torch already computed, and translated in place.

This costs a few milliseconds per decomposed node instead of re-tracing the whole program
(``ExportedProgram.run_decompositions``), and leaves every op the library knows untouched.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.fx
from torch._guards import detect_fake_mode


@functools.cache
def _decomposition_table() -> dict:
    from torch._decomp import decomposition_table

    return dict(decomposition_table)


def _decomposition_of(target: Any):
    if not isinstance(target, torch._ops.OpOverload):
        return None
    table = _decomposition_table()
    if target in table:
        return table[target]
    if torch._C._dispatch_has_kernel_for_dispatch_key(target.name(), "CompositeImplicitAutograd"):
        return target.decompose
    return None


def has_decomposition(target: Any) -> bool:
    return _decomposition_of(target) is not None


def translate_by_decomposition(translator, node: torch.fx.Node, args: tuple, kwargs: dict) -> Any:
    """Trace the decomposition of ``node`` on its fake inputs and translate the result."""
    function = _decomposition_of(node.target)
    fake_args = torch.fx.node.map_arg(node.args, lambda n: n.meta["val"])
    fake_kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: n.meta["val"])
    flat, spec = torch.utils._pytree.tree_flatten((fake_args, fake_kwargs))
    tensor_positions = [i for i, item in enumerate(flat) if isinstance(item, torch.Tensor)]
    real_flat, _ = torch.utils._pytree.tree_flatten(
        (torch.fx.node.map_arg(node.args, lambda n: n), torch.fx.node.map_arg(node.kwargs, lambda n: n))
    )

    def call(*tensors):
        items = list(flat)
        for position, tensor in zip(tensor_positions, tensors):
            items[position] = tensor
        call_args, call_kwargs = torch.utils._pytree.tree_unflatten(items, spec)
        return function(*call_args, **call_kwargs)

    fake_inputs = [flat[i] for i in tensor_positions]
    fake_mode = detect_fake_mode(fake_inputs)
    from torch.fx.experimental.proxy_tensor import make_fx

    with fake_mode if fake_mode is not None else _null():
        traced = make_fx(call, tracing_mode="real", pre_dispatch=False)(*fake_inputs)
    inputs = [translator.env[real_flat[i]] for i in tensor_positions]
    return _translate_subgraph(translator, node, traced, inputs)


def _translate_subgraph(translator, parent: torch.fx.Node, traced: torch.fx.GraphModule,
                        inputs: list) -> Any:
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    for placeholder, value in zip(placeholders, inputs):
        translator.env[placeholder] = value
    result = None
    for sub in traced.graph.nodes:
        if sub.op == "call_function":
            sub.name = f"{parent.name}__{sub.name}"
            sub.meta.setdefault("nn_module_stack", parent.meta.get("nn_module_stack"))
            sub.meta.setdefault("stack_trace", parent.meta.get("stack_trace"))
            translator._translate_node(sub)
        elif sub.op == "get_attr":
            translator.env[sub] = translator.g.const(getattr(traced, sub.target))
        elif sub.op == "output":
            result = torch.fx.node.map_arg(sub.args[0], lambda n: translator.env[n])
    return result


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
