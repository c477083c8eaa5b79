"""squeeze, whose result's rank depends on sizes: a size known only at run time makes an If
(a returned result) or a check that fails where torch would decide otherwise."""

from __future__ import annotations

import warnings

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.builder import SHAPE_AT_THE_EXAMPLE
from onnxport.translate.ops._helpers import (expected_rank, fail_unless, normalize_axis, rank,
                                             squeeze)
from onnxport.translate.registry import translates


@translates("aten::squeeze", "aten::squeeze_")
def squeeze_(g, self, dim=None):
    """squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)"""
    r = rank(self)
    shape = list(self.shape)
    if r == 0:
        return self  # squeezing a 0-d tensor (along 0 or -1) leaves it as it is
    if dim is None:
        candidates = list(range(r))
    else:
        dims = dim if isinstance(dim, (list, tuple)) else [dim]
        candidates = sorted({normalize_axis(d, r) for d in dims})
    axes = [a for a in candidates if shape[a] == 1]
    # A size known only at run time: torch drops the axis when it is 1 then, and an ONNX
    # value cannot change its rank with a size. The capture decided for the example (its
    # output's rank says how); the graph follows it and fails at run time, never answers in
    # another shape, at a size where torch decides otherwise.
    unknown = [a for a in candidates if not isinstance(shape[a], int)]
    if unknown and _only_returned(g):
        # Returned as it is: the graph can decide at run time, as torch does, since no later
        # op depends on the rank.
        known = [a for a in axes if a not in unknown]
        if known:
            self = squeeze(g, self, known)
            self.shape = ir.Shape([d for a, d in enumerate(shape) if a not in known])
        for axis in sorted(unknown, reverse=True):  # (counted after the known ones went)
            self = _squeeze_if_one(g, self, axis - sum(a < axis for a in known))
        # Its rank is known only at run time; declared as the example's (a capture that
        # reasoned about a size of 1 as any size kept that axis in its recorded shape).
        self.shape = ir.Shape([d for a, d in enumerate(shape) if a not in known and not (
            a in unknown and _example_size(g, a) == 1)])
        self.meta[SHAPE_AT_THE_EXAMPLE] = True
        return self
    out_rank = expected_rank(g)
    dropped = r - len(axes) - out_rank if out_rank is not None and unknown else 0
    if dropped == len(unknown):
        axes = sorted(axes + unknown)  # Squeeze fails on an axis that is not 1
        unknown = []
    elif dropped != 0:
        raise TranslationError(
            f"{g.provenance.aten} at {g.provenance.source or 'an unknown line'}: squeezing "
            f"axes {unknown} of a tensor of shape {shape} whose sizes are known only at run "
            "time, where the example dropped some of them: ONNX cannot drop an axis by its run "
            "time size. Squeeze the axes one at a time, or reshape to the shape you need.")
    for axis in unknown:
        if _example_size(g, axis) == 1:
            warnings.warn(
                f"{g.provenance.aten} at {g.provenance.source or 'an unknown line'}: axis {axis} "
                "is dynamic and 1 in the example; the graph keeps it, as torch does at every "
                "other size, and fails at run time when it is 1 (torch would drop it). Give "
                "an example whose dynamic sizes are not 1.", stacklevel=2)
        self = _fail_if_one(g, self, axis)
    if not axes:
        return self
    return squeeze(g, self, axes)


def _only_returned(g) -> bool:
    """Whether the result of the call being translated is only returned by the model."""
    node = g.node
    return node is not None and bool(node.users) and all(
        user.op == "output" for user in node.users) and g.graph is g.root_graph


def _squeeze_if_one(g, x: ir.Value, axis: int) -> ir.Value:
    """``x`` without axis ``axis`` when that axis is 1 at run time, else ``x``: an If whose
    result's rank is known only then (torch.onnx's form from opset 11)."""
    size = g.op("Slice", g.op("Shape", x), g.const([axis]), g.const([axis + 1]))
    is_one = g.op("Squeeze", g.op("Equal", size, g.const([1])), g.const([0]))
    dropped = g.subgraph(f"{g.provenance.value_prefix or 'squeeze'}_dropped")
    dropped.graph.outputs.append(dropped.op("Squeeze", x, dropped.const([axis])))
    kept = g.subgraph(f"{g.provenance.value_prefix or 'squeeze'}_kept")
    kept.graph.outputs.append(kept.op("Identity", x))
    # Each branch's output is declared with its own rank (the checker wants a shape on every
    # graph output, so the If's own, a graph output, keeps the example's rank).
    dims = list(x.shape) if x.shape is not None else None
    dropped.graph.outputs[0].shape = None if dims is None else \
        ir.Shape(dims[:axis] + dims[axis + 1:])
    kept.graph.outputs[0].shape = None if dims is None else ir.Shape(dims)
    out = g.op("If", is_one, then_branch_g=dropped.graph, else_branch_g=kept.graph)
    out.dtype, out.shape = x.dtype, None
    return out


def _example_size(g, axis: int) -> int | None:
    """The example's size of the first argument's axis ``axis``, when the capture knows it."""
    meta = g.arguments[0] if g.arguments else None
    size = meta.shape[axis] if isinstance(meta, torch.Tensor) else None
    return size.node.hint if isinstance(size, torch.SymInt) else size


def _fail_if_one(g, x: ir.Value, axis: int) -> ir.Value:
    """``x``, through a check that fails the run when its axis ``axis`` is 1: there torch's
    squeeze would drop the axis that the graph keeps. (Squeeze of a 0-sized axis fails.)"""
    return fail_unless(g, x, axis, lambda size: g.op("Not", g.op("Equal", size, g.const([1]))),
                       f"squeeze_fails_when_axis_{axis}_is_1_at_run_time")
