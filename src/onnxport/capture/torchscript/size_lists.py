"""Scripted code's ``x.shape``: a list of the tensor's sizes, one read each, which list ops
take item by item; and lists of sizes compared (``x.shape == y.shape``) one size at a time,
a condition of the run."""

from __future__ import annotations

import operator
from typing import Any

import torch

from onnxport.capture.torchscript.ranks import known_ranks

# ``a == b`` and ``a != b`` of two lists of ints.
LIST_COMPARISONS = (torch.ops.aten.eq.int_list, torch.ops.aten.ne.int_list)


def list_op(target: Any, args: list) -> list | None:
    """A slice (``x.shape[1:]``) or a join (``a + b``) of lists the converter holds item by
    item, done on them; None for any other call."""
    if target is torch.ops.aten.slice.t and isinstance(args[0], (list, tuple)) and \
            all(a is None or type(a) is int for a in args[1:]):
        return list(args[0][slice(*args[1:])])
    if target is torch.ops.aten.add.t and all(isinstance(a, (list, tuple)) for a in args):
        return [*args[0], *args[1]]
    return None


def convert_size(converter: Any, node: torch._C.Node) -> None:
    """``x.shape`` (``aten::size`` of a whole tensor) of a known rank, as a list of its sizes
    (``y.shape[:1] + [2] + y.shape[1:]``: torch's slice of the one value of symbolic sizes
    failed, "Expected a value of type 'List[t]'"); ``x.size(d)``, and a shape of an unknown
    rank, as torch's converter makes them."""
    from torch._export.converter import TS2FXGraphConverter

    rank = None
    if node.inputsSize() == 1:
        kind = node.inputsAt(0).type()
        rank = kind.dim() if isinstance(kind, torch._C.TensorType) else None
        if rank is None:  # (a value TorchScript types as any Tensor: the script's ranks)
            block = node.owningBlock()
            while block.owningNode() is not None:
                block = block.owningNode().owningBlock()
            rank = known_ranks(block).get(node.inputsAt(0))
    if not isinstance(rank, int):
        TS2FXGraphConverter._convert_standard_operators(converter, node)
        return
    tensor = converter.get_fx_value_by_ir_value(node.inputsAt(0))
    converter.name_to_node[node.output().debugName()] = sizes_listed(converter.fx_graph,
                                                                     tensor, rank)


def sizes_listed(graph: torch.fx.Graph, tensor: torch.fx.Node, rank: int) -> list:
    return [graph.call_function(torch.ops.aten.sym_size.int, (tensor, k)) for k in range(rank)]


def compared_lists(graph: torch.fx.Graph, target: Any, first: list, second: list) -> Any:
    """``first == second`` (or ``!=``, by ``target``) as a bool where the lists decide it (their
    lengths differ, or a pair of known ints), else as a condition computed from their sizes:
    taken as the example's answer, a branch on it was decided for every size (``if x.shape ==
    y.shape: return x + y`` added a y of one row to an x of six, silently)."""
    equal: Any = len(first) == len(second)
    if equal:
        for a, b in zip(first, second):
            if isinstance(a, int) and isinstance(b, int):
                equal = equal and a == b
                continue
            same = graph.call_function(operator.eq, (a, b))
            equal = same if equal is True else graph.call_function(operator.and_, (equal, same))
            if equal is False:
                break
    if target is torch.ops.aten.eq.int_list:
        return equal
    return not equal if isinstance(equal, bool) else graph.call_function(torch.sym_not, (equal,))
