"""Selective decomposition: a call with no translation is replaced by its ATen decomposition,
traced for that one node on the fake values torch already computed, and translated in place.

This costs a few milliseconds per decomposed node instead of re-tracing the whole program
(``ExportedProgram.run_decompositions``), and leaves every op the library knows untouched.
The translator traces each decomposition once, looks through it for unsupported ops before it
emits anything, and then translates it as traced.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch
import torch.fx
from torch._guards import detect_fake_mode

@dataclasses.dataclass
class Decomposition:
    """A node's decomposition traced on its fake inputs."""

    module: torch.fx.GraphModule
    # Positions, in the flattened (args, kwargs) of the node, of the tensors that became the
    # traced module's placeholders, in order.
    tensor_positions: list[int]


@functools.cache
def _decomposition_table() -> dict:
    from torch._decomp import decomposition_table

    return dict(decomposition_table)


def _cudnn_grid_sampler(input, grid):
    # cuDNN's sampler is bilinear with zero padding and align_corners=True only.
    return torch.ops.aten.grid_sampler_2d(input, grid, 0, 0, True)


# GPU kernels that a composite op's decomposition picks when traced on GPU tensors
# (grid_sampler picks cudnn_grid_sampler on cuda), replaced by the op the CPU gets, so that a
# model exports the same graph from any device.
_GPU_KERNELS = {"cudnn_grid_sampler": _cudnn_grid_sampler}


def _decomposition_of(target: Any):
    if not isinstance(target, torch._ops.OpOverload):
        return None
    if target.namespace == "aten" and target._overloadname == "default" \
            and target._opname in _GPU_KERNELS:
        return _GPU_KERNELS[target._opname]
    table = _decomposition_table()
    if target in table:
        return table[target]
    try:
        composite = torch._C._dispatch_has_kernel_for_dispatch_key(target.name(),
                                                                   "CompositeImplicitAutograd")
    except RuntimeError:  # an op of TorchScript's alone (aten::ScalarImplicit): no kernels
        return None
    return target.decompose if composite else None


def has_decomposition(target: Any) -> bool:
    return _decomposition_of(target) is not None


def decomposition(node: torch.fx.Node) -> Decomposition:
    """The decomposition of ``node`` traced on its fake inputs."""
    function = _decomposition_of(node.target)
    if function is None:
        raise ValueError(f"{node.target} has no decomposition")
    fake_args = _plain(torch.fx.node.map_arg(node.args, lambda n: n.meta["val"]))
    fake_kwargs = _plain(torch.fx.node.map_arg(node.kwargs, lambda n: n.meta["val"]))
    flat, spec = torch.utils._pytree.tree_flatten((fake_args, fake_kwargs))
    tensor_positions = [i for i, item in enumerate(flat) if isinstance(item, torch.Tensor)]
    # Traced as on the CPU whatever the model's device: a decomposition picks its kernels by
    # device (SDPA becomes cuDNN's or flash attention's, grid_sampler cudnn_grid_sampler),
    # and the file must be the one a CPU export gives.
    flat = [torch.device("cpu") if isinstance(item, torch.device) else item for item in flat]

    def call(*tensors):
        items = list(flat)
        for position, tensor in zip(tensor_positions, tensors):
            items[position] = tensor
        call_args, call_kwargs = torch.utils._pytree.tree_unflatten(items, spec)
        return function(*call_args, **call_kwargs)

    fake_inputs = [flat[i] for i in tensor_positions]
    fake_mode = detect_fake_mode(fake_inputs)
    from torch.fx.experimental.proxy_tensor import make_fx

    # Sizes the capture kept symbolic at 0 or 1 must stay so here too, or a decomposition
    # (einsum's) bakes the example's size into its reshapes.
    # A dynamic size the decomposition passes to an op (the batch of im2col's closing view)
    # stays a symbol only when traced symbolically; traced with real ints, it was made a
    # constant of the example's size and the dim fixed with no warning (timm's volo).
    # (Static inputs are traced as before: torch 2.11's symbolic tracing of some
    # decompositions differs, sdpa's and linalg.solve's.)
    symbolic = any(isinstance(size, torch.SymInt) for t in fake_inputs for size in t.shape)
    mode = "symbolic" if symbolic and fake_mode is not None and \
        fake_mode.shape_env is not None else "real"
    owner = node.graph.owning_module
    oblivious = bool(owner is not None and owner.meta.get("backed_size_oblivious"))
    from torch.fx.experimental import _config as shapes_config

    with fake_mode if fake_mode is not None else _null(), \
            shapes_config.patch(backed_size_oblivious=oblivious):
        fake_inputs = [t if t.device.type == "cpu" else t.to("cpu") for t in fake_inputs]
        module = make_fx(call, tracing_mode=mode, pre_dispatch=False)(*fake_inputs)
        if _writes(module):
            # A decomposition that writes in place (vander's cumprod into a narrowed view of
            # its ones): translation rebinds only the tensor written, not what it views, so
            # the decomposition is traced again with its writes made values.
            # (The traced graph is what is functionalized: a composite kernel called directly
            # runs its ops below functionalization.)
            module = _functionalized(module, mode, fake_inputs)
    return Decomposition(module, tensor_positions)


def _functionalized(module: torch.fx.GraphModule, mode: str,
                    fake_inputs: list) -> torch.fx.GraphModule:
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        functional = make_fx(torch.func.functionalize(module), tracing_mode=mode,
                             pre_dispatch=False)(*fake_inputs)
    except Exception:  # (as before: right wherever the writes are not into views)
        return module
    functional.graph.eliminate_dead_code()
    functional.recompile()
    return functional


def _writes(module: torch.fx.GraphModule) -> bool:
    return any(node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
               and node.target._schema.is_mutable for node in module.graph.nodes)


def decomposition_inputs(node: torch.fx.Node, traced: Decomposition) -> list:
    """The nodes of ``node``'s arguments that feed the traced decomposition's placeholders."""
    real_flat, _ = torch.utils._pytree.tree_flatten((_plain(node.args), _plain(node.kwargs)))
    return [real_flat[i] for i in traced.tensor_positions]


def _plain(value: Any) -> Any:
    """FX's immutable containers as plain lists and dicts (decompositions may modify them)."""
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
