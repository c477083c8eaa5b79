"""Branches of scripted code on sizes that are static in the export (``if x[0].shape[0] < 5``
with the example's shape kept), decided as the TorchScript exporter decides them: its branches
may return what ONNX If cannot (a list in one branch, nothing in the other), which the branch
not taken then no longer does."""

from __future__ import annotations

import torch

from onnxport.capture.torchscript.branches import fold_to_constant

# Scalar computations a branch's condition is made of, from the sizes it reads.
_SCALAR_OPS = {
    "aten::lt", "aten::le", "aten::gt", "aten::ge", "aten::eq", "aten::ne", "aten::add",
    "aten::sub", "aten::mul", "aten::floordiv", "aten::remainder", "aten::__getitem__",
    "aten::len", "aten::__not__", "aten::__and__", "aten::__or__", "aten::neg", "prim::min",
    "prim::max", "aten::Int", "aten::Bool", "prim::TupleIndex", "aten::slice",
}
_SIZE_READS = ("aten::size", "aten::dim", "aten::numel", "aten::len")
# In-place ops that change a tensor's shape, which shape propagation over the graph's values
# does not see.
_RESHAPING_IN_PLACE = {
    "aten::unsqueeze_", "aten::squeeze_", "aten::t_", "aten::transpose_", "aten::resize_",
    "aten::resize_as_", "aten::as_strided_", "aten::swapaxes_", "aten::swapdims_", "aten::set_",
}


def fold_static_size_conditions(graph: torch._C.Graph, tensors: list, first: int,
                                dynamic: set) -> bool:
    """The sizes and ranks that branch conditions read, where shape propagation from the
    inputs (``dynamic``: the (input, axis) pairs that stay dynamic, the other axes the
    example's) finds them static, become constants, and the branches they decide are gone;
    whether there was one."""
    reads = _condition_size_reads(graph)
    inputs = list(graph.inputs())[first:]
    if not reads or len(inputs) != len(tensors) or any(
            graph.findNode(kind, True) is not None for kind in _RESHAPING_IN_PLACE):
        return False
    copy = graph.copy()
    for position, (value, tensor) in enumerate(zip(list(copy.inputs())[first:], tensors)):
        sizes = [None if (position, axis) in dynamic else size
                 for axis, size in enumerate(tensor.shape)]
        value.setType(torch._C.TensorType.get().with_sizes(sizes).with_dtype(tensor.dtype))
    try:
        torch._C._jit_pass_propagate_shapes_on_graph(copy)
    except RuntimeError:
        return False
    folded = False
    for kind in _SIZE_READS:
        originals, copies = graph.findAllNodes(kind, True), copy.findAllNodes(kind, True)
        if len(originals) != len(copies):
            return folded
        for node, propagated in zip(originals, copies):
            if node.output().unique() in reads:
                known = _static_read(propagated)
                if known is not None:
                    fold_to_constant(graph, node, known)
                    folded = True
    if folded:
        torch._C._jit_pass_constant_propagation(graph)
    return folded


def _condition_size_reads(graph: torch._C.Graph) -> set:
    """The size and rank reads (their outputs' ids) each branch condition is computed from
    by scalar ops only."""
    reads, seen = set(), set()
    pending = [node.inputsAt(0) for node in graph.findAllNodes("prim::If", True)]
    while pending:
        value = pending.pop()
        if value.unique() in seen:
            continue
        seen.add(value.unique())
        node = value.node()
        if node.kind() in _SIZE_READS and node.inputsAt(0).type().kind() == "TensorType":
            reads.add(value.unique())
        elif node.kind() in _SCALAR_OPS:
            pending.extend(i for i in node.inputs() if i.type().kind() != "TensorType")
    return reads


def _static_read(node: torch._C.Node):
    """What ``node`` reads, where its tensor's shape after propagation makes it static."""
    sizes = node.inputsAt(0).type().symbolic_sizes()
    if sizes is None:
        return None
    kind = node.kind()
    if kind == "aten::dim":
        return len(sizes)
    if kind == "aten::len":
        return sizes[0] if sizes and sizes[0] >= 0 else None
    if kind == "aten::numel":
        return int(torch.tensor(sizes).prod()) if all(s >= 0 for s in sizes) else None
    if node.inputsSize() == 1:  # x.size(): every size
        return list(sizes) if all(s >= 0 for s in sizes) else None
    axis = node.inputsAt(1).toIValue()
    if not isinstance(axis, int) or not -len(sizes) <= axis < len(sizes):
        return None
    return sizes[axis] if sizes[axis] >= 0 else None

