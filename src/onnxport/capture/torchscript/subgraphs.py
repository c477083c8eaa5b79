"""Loop bodies and branches of scripted code propagated on fake tensors: each subgraph's
nodes get their ``meta["val"]``, and where two runs of a body (or the two branches) give
different sizes, the size is a new symbol (:func:`_generalized`)."""

from __future__ import annotations

import contextlib
import operator
from typing import Any

import torch

from onnxport.capture.common import first_lines
from onnxport.capture.torchscript import uninitialized
from onnxport.capture.torchscript.fake_calls import run_keeping_inputs
from onnxport.capture.torchscript.fx_helpers import _attribute
from onnxport.capture.torchscript.loops import prim_loop
from onnxport.capture.torchscript.sizes import _replace_uses
from onnxport.errors import CaptureError


def _propagate_loop(shape_env: Any, body: torch.fx.GraphModule, trip_count: Any,
                    carried: tuple, outer: tuple, condition: Any = True) -> tuple:
    """What :data:`prim_loop` returns, on fake tensors; each body node gets its
    ``meta["val"]``. A dim of a carried tensor that the body changes (a tensor grown by one
    row per iteration) is a new symbol, in the body and in the results."""
    index = shape_env.create_unbacked_symint()
    torch._check_is_size(index)

    def run(state):
        return _run_subgraph(body, [*outer, index, *state])

    results = run(list(carried))
    general = _generalized(shape_env, list(carried), results[1:1 + len(carried)], "a loop")
    general = _numbers_computed(shape_env, body, len(outer), general)
    if any(g is not c for g, c in zip(general, carried)):
        results = run(general)
    scanned = results[1 + len(carried):]  # one item per iteration, stacked
    if scanned:
        count = trip_count if condition is True and isinstance(trip_count, (int, torch.SymInt)) \
            and trip_count < 2 ** 63 - 1 else shape_env.create_unbacked_symint()
        scanned = [item.new_empty((count, *item.shape)) for item in scanned]
    return (*general, *scanned)


def _numbers_computed(shape_env: Any, body: torch.fx.GraphModule, outer: int,
                      carried: list) -> list:
    """``carried``, with a new symbol for each number the body computes anew (not passes on):
    its value after the first iteration, the one the run gave, says nothing of the next ones
    (``b = b or bool(x[i].sum() > 0)`` False at the example's first row, and ``if b:`` after
    the loop decided on that)."""
    placeholders = [n for n in body.graph.nodes if n.op == "placeholder"][outer + 1:]
    output = next(n for n in body.graph.nodes if n.op == "output")
    returned = list(output.args[0])[1:1 + len(carried)]
    makers = {bool: shape_env.create_unbacked_symbool, int: shape_env.create_unbacked_symint,
              float: shape_env.create_unbacked_symfloat}
    return [makers[type(value)]() if type(value) in makers and result is not placeholder
            else value for value, placeholder, result in zip(carried, placeholders, returned)]


def _propagate_cond(shape_env: Any, pred: Any, true_branch: torch.fx.GraphModule,
                    false_branch: torch.fx.GraphModule, operands: tuple) -> tuple:
    """What ``cond`` returns, on fake tensors, each branch's nodes given their
    ``meta["val"]``: where the branches' results differ in size (an empty result for no
    boxes), the size is a new symbol. A condition the sizes decide (``4 * s0 == 1``, of a
    view of a batch by heads) gives its branch's results."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    decided = pred if isinstance(pred, bool) else None  # (by a branch before, on sizes)
    if isinstance(pred, torch.SymBool):
        decided = True if statically_known_true(pred) else \
            False if statically_known_true(torch.sym_not(pred)) else None
    if decided is None:
        first, second = (_run_subgraph(true_branch, list(operands)),
                         _run_subgraph(false_branch, list(operands)))
        if len(first) != len(second):
            raise CaptureError(
                f"a scripted branch on a value known at run time returns {len(first)} values "
                f"in one case and {len(second)} in the other (lists of different lengths); "
                "ONNX If returns as many values either way. Return a tensor (torch.stack of "
                "the items) or lists of one length from both branches")
        results = _generalized(shape_env, first, second, "a branch")
    else:
        taken, other = (true_branch, false_branch) if decided else (false_branch, true_branch)
        results = _run_subgraph(taken, list(operands))
        # (The other's nodes get their values too, which the program's checks want; where it
        # cannot run at these sizes, the program is left to torch.export, as before.)
        with contextlib.suppress(Exception):
            others = _run_subgraph(other, list(operands))
            results = [uninitialized.either(r, o, shape_env) for r, o in zip(results, others)]
    if any(r is uninitialized.UNSET for r in results):
        raise CaptureError("neither branch of a scripted if sets one of its results")
    uninitialized.set_from((true_branch, false_branch), results)
    return tuple(results)


def _dtype_read(node: torch.fx.Node, value: Any) -> bool:
    """Whether ``node`` reads a tensor's dtype (``b.to(a.dtype)`` in scripted code), which its
    users now take as the number it is, and is gone: no ExportedProgram holds the converter's
    Python call (a while loop's body had one, and the graph was left to torch.export, which
    cannot run a loop on a tensor's value)."""
    from torch._export.converter import get_dtype_as_int

    if node.target is not get_dtype_as_int or not isinstance(value, int):
        return False
    _replace_uses(node, value)
    node.graph.erase_node(node)
    return True


def _run_subgraph(module: torch.fx.GraphModule, inputs: list) -> list:
    # The python dispatcher: composite ops (upsample to a size read from a tensor) take
    # symbolic sizes only through it.
    from torch._dispatch.python import enable_python_dispatcher

    with enable_python_dispatcher():
        return _run_nodes(module, inputs)


def _run_nodes(module: torch.fx.GraphModule, inputs: list) -> list:
    values: dict[torch.fx.Node, Any] = {}
    inputs = iter(inputs)
    for node in list(module.graph.nodes):
        if node._erased:  # (an item of x.size() replaced below)
            continue
        if node.target is torch.ops.aten.sym_size.default and len(node.args) == 1:
            # x.size() as a whole (torch.ones(x.shape) in scripted code): one size per dim,
            # which is how translation knows sizes.
            with module.graph.inserting_before(node):
                sizes = [module.graph.call_function(torch.ops.aten.sym_size.int,
                                                    (node.args[0], dim))
                         for dim in range(values[node.args[0]].dim())]
            for size in sizes:
                values[size] = size.meta["val"] = values[node.args[0]].shape[size.args[1]]
            for user in list(node.users):
                if user.target is operator.getitem:
                    user.replace_all_uses_with(sizes[user.args[1]])
                    module.graph.erase_node(user)
            for user in list(node.users):
                user.args, user.kwargs = torch.fx.node.map_arg(
                    (user.args, user.kwargs), lambda n: sizes if n is node else n)
            module.graph.erase_node(node)
            continue
        if node.op == "placeholder":
            value = next(inputs)
        elif node.target is uninitialized.uninitialized and \
                all(user.op == "output" for user in node.users):
            value = uninitialized.UNSET  # (the other branch's result, once known)
        elif node.op == "call_function" and node.target in (prim_loop,
                                                            torch.ops.higher_order.cond):
            # A loop or branch inside the body: propagated as the outer ones are.
            args = torch.fx.node.map_arg(node.args, lambda n: values[n])
            shape_env = _shape_env_of(list(values.values()))
            value = _propagate_loop(shape_env, *args) if node.target is prim_loop else \
                _propagate_cond(shape_env, *args)
        elif node.op == "call_function":
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: values[n])
            try:
                value = run_keeping_inputs(node.target, args, kwargs)
            except CaptureError:
                raise
            except Exception as error:
                raise CaptureError(
                    f"in a loop body or branch, {node.format_node()} failed: "
                    f"{type(error).__name__}: {first_lines(str(error), 2)}") from error
            if _dtype_read(node, value):
                continue
        elif node.op == "get_attr":  # a constant the converter lifted
            value = _attribute(module, node.target)
        elif node.op == "output":
            results = torch.fx.node.map_arg(node.args[0], lambda n: values[n])
            return list(results) if isinstance(results, (list, tuple)) else [results]
        else:
            raise CaptureError(f"a control-flow subgraph node {node.format_node()} is not "
                               "supported")
        values[node] = value
        node.meta["val"] = value
    raise CaptureError("a control-flow subgraph has no output")


def _shape_env_of(values: list) -> Any:
    """The shape environment of the fake tensors or symbols among ``values``."""
    for value in values:
        if isinstance(value, torch.SymInt | torch.SymBool | torch.SymFloat):
            return value.node.shape_env
        mode = getattr(value, "fake_mode", None)
        if mode is not None and mode.shape_env is not None:
            return mode.shape_env
    raise CaptureError("a loop or branch inside a loop body or branch has no fake input to "
                       "propagate with")


def _generalized(shape_env: Any, first: list, second: list, what: str) -> list:
    """``first``, with a new symbol for each dim where ``second`` has another size."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    general = []
    for before, after in zip(first, second):
        if before is uninitialized.UNSET or after is uninitialized.UNSET:
            general.append(uninitialized.either(before, after, shape_env))
            continue
        if (before is None) != (after is None):
            # An Optional that one branch leaves None (translation makes it an ONNX
            # optional): the tensor the other gives, whose sizes the optional declares.
            general.append(after if before is None else before)
            continue
        if isinstance(before, torch.Tensor) != isinstance(after, torch.Tensor):
            # A number in one, a 0-d tensor in the other (``while i < n and x.sum() < 100``:
            # False, or the comparison's tensor): the tensor, which translation makes both.
            tensor = before if isinstance(before, torch.Tensor) else after
            if tensor.dim() != 0:
                raise CaptureError(f"{what} gives a number or a tensor of rank "
                                   f"{tensor.dim()}, which ONNX cannot express")
            general.append(tensor)
            continue
        if not isinstance(before, torch.Tensor):
            general.append(_generalized_number(shape_env, before, after))
            continue
        if before.dim() != after.dim() or before.dtype != after.dtype:
            raise CaptureError(f"{what} changes the rank or dtype of a tensor, which ONNX "
                               "cannot express")
        # (A size known only as an expression of the iteration, as a tensor grown by cat,
        # cannot be compared with a guard: it is another size unless provably the same.)
        same = [statically_known_true(b == a) for b, a in zip(before.shape, after.shape)]
        if all(same):
            general.append(before)
            continue
        sizes = [b if known else shape_env.create_unbacked_symint()
                 for b, known in zip(before.shape, same)]
        general.append(torch.empty(sizes, dtype=before.dtype, device=before.device))
    return general


def _generalized_number(shape_env: Any, before: Any, after: Any) -> Any:
    """A number carried by a loop (a counter) or chosen by a branch: a new symbol when the
    two runs give different values, so that it is never taken as a constant."""
    if type(before) is int and not isinstance(after, bool) and isinstance(after, (int, torch.SymInt)) \
            and (isinstance(after, torch.SymInt) or after != before):
        return shape_env.create_unbacked_symint()
    # (a float or a bool taken as the first run's value was folded into the body: a loop's
    # ``f = f * 0.5`` gave 0.5 whatever the count)
    if type(before) is float and isinstance(after, (float, int, torch.SymFloat)) and \
            not isinstance(after, bool) and (isinstance(after, torch.SymFloat) or after != before):
        return shape_env.create_unbacked_symfloat()
    if type(before) is bool and isinstance(after, (bool, torch.SymBool)) and \
            (isinstance(after, torch.SymBool) or after != before):
        return shape_env.create_unbacked_symbool()
    return before
