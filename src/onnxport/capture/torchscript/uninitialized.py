"""``prim::Uninitialized``: what TorchScript returns from a branch for a value that branch
never sets (the result of an early ``return`` taken in the other branch, the value a
``break`` leaves). The run never reads it, but ONNX If wants both branches' results of one
dtype and rank: the torch converter's empty float tensor made a branch of int results float,
an invalid file (or a refused capture on dynamic sizes). Each branch that returns one gets
its own :data:`uninitialized` call, whose value propagation takes from the other branch's
result (:data:`UNSET` until then), and translation makes an empty tensor of that type."""

from __future__ import annotations

from typing import Any

import torch


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


# The fake value of an uninitialized branch result until the other branch's result is known.
UNSET = _Unset()


@torch.library.custom_op("onnxport::uninitialized", mutates_args=())
def _uninitialized() -> torch.Tensor:
    """The value itself, where a program runs (an empty tensor, as torch's converter has)."""
    return torch.empty(0)


@_uninitialized.register_fake
def _() -> torch.Tensor:
    return torch.empty(0)


# An op of its own (an ExportedProgram's graph holds ops only), translated by name.
uninitialized = torch.ops.onnxport.uninitialized.default


def localize(graph: torch._C.Graph) -> None:
    """Give each branch that returns an uninitialized value a ``prim::Uninitialized`` of its
    own, made in that branch."""
    for node in graph.findAllNodes("prim::Uninitialized", True):
        for use in list(node.output().uses()):
            returned = use.user
            block = returned.owningBlock()
            if returned.kind() != "prim::Return" or block.owningNode() is None or \
                    block.owningNode().kind() != "prim::If" or block == node.owningBlock():
                continue
            local = graph.create("prim::Uninitialized")
            local.output().setType(node.output().type())
            local.insertBefore(returned)
            returned.replaceInput(use.offset, local.output())
        if not node.output().uses():
            node.destroy()


def convert_uninitialized(self, node: torch._C.Node) -> None:
    """A branch's own uninitialized result as an :func:`uninitialized` call; any other as the
    torch converter has it (a constant empty tensor)."""
    from torch._export.converter import TS2FXGraphConverter

    uses = node.output().uses()
    block = node.owningBlock()
    if uses and all(use.user.kind() == "prim::Return" and use.user.owningBlock() == block
                    for use in uses) and block.owningNode() is not None and \
            block.owningNode().kind() == "prim::If" and \
            isinstance(node.output().type(), torch._C.TensorType):
        self.name_to_node[node.output().debugName()] = self.fx_graph.call_function(
            uninitialized, ())
        return
    TS2FXGraphConverter.convert_prim_Uninitialized(self, node)


def set_from(branches: tuple, results: list) -> None:
    """Give each :func:`uninitialized` result of ``branches`` (subgraphs) the fake value the
    branches' combined ``results`` have at its place."""
    for branch in branches:
        output = next(n for n in branch.graph.nodes if n.op == "output")
        returned = output.args[0] if isinstance(output.args[0], (list, tuple)) else \
            [output.args[0]]
        for node, value in zip(returned, results):
            if isinstance(node, torch.fx.Node) and node.target is uninitialized and \
                    isinstance(value, torch.Tensor):
                node.meta["val"] = value


def either(first: Any, second: Any, shape_env: Any) -> Any:
    """The value of a result one of two branches may leave uninitialized: the other's, its
    dims known at run time only made new symbols (the empty tensor the unset branch returns
    has none of their sizes, and a file declaring them would be wrong when it runs)."""
    if first is not UNSET and second is not UNSET:
        return first
    value = second if first is UNSET else first
    if not isinstance(value, torch.Tensor) or all(isinstance(s, int) for s in value.shape):
        return value
    return value.new_empty([s if isinstance(s, int) else shape_env.create_unbacked_symint()
                            for s in value.shape])
