"""Scripted ``for`` loops over a count of the run and ``while`` loops, converted to one
:data:`prim_loop` call whose body is a subgraph (ONNX Loop in translation)."""

from __future__ import annotations

import operator
from typing import Any

import torch

from onnxport.capture.common import source_line
from onnxport.capture.script_mutations import nodes_inside, within
from onnxport.capture.torchscript.branches import _LIST_EDITS
from onnxport.capture.torchscript.list_scans import (StackedList, lists_as_scans,
                                                     stacked_lists_read)
from onnxport.errors import CaptureError


def _convert_loop(converter: Any, node: torch._C.Node, trip_count: Any, condition: Any) -> None:
    """A ``for`` loop whose count is a value of the run (``range(masks.size(0))`` in a function
    torchvision scripts when traced: one iteration per detection), or a ``while`` loop (its
    ``condition`` computed before it, then by the body), as one :data:`prim_loop` call, its
    body a subgraph: ONNX Loop in translation."""
    inputs = list(node.inputs())
    where = source_line(node)
    carried = [converter.get_fx_value_by_ir_value(value) for value in inputs[2:]]
    names = list(converter._identify_inputs_as_arguments(node))
    for block in node.blocks():
        names += sorted(set(converter.blocks_to_lifted_attrs[block]) - set(names))
    (body,), (body_converter,) = converter._convert_block_to_subgraph(node, names)
    updated = list(body_converter.name_update_from_subblock_to_parent)
    outer = outer_values(converter, names)
    outer = stacked_lists_read(converter.subgraphs[body.target], outer)
    # A tuple of tensors carried (an LSTMCell's (h, c)) as its tensors, one carried each.
    tuples = [isinstance(value.type(), torch._C.TupleType) for value in inputs[2:]]
    widths = _tuples_carried_flat(converter.subgraphs[body.target], carried, len(names), tuples)
    carried = [item for value, width in zip(carried, widths)
               for item in (value if width is not None else (value,))]
    slots = lists_as_scans(converter.subgraphs[body.target], carried, names, outer, updated)
    scanned = {slot.carried for slot in slots} | {slot.name for slot in slots}
    carried = [value for k, value in enumerate(carried) if k not in scanned]
    outer = [value for name, value in zip(names, outer) if name not in scanned]
    updated = [name for name in updated if name not in scanned]
    if any(isinstance(value, (list, tuple)) for value in (*carried, *outer)) or any(
            isinstance(converter.name_to_node.get(name), (list, tuple)) for name in updated):
        raise CaptureError(
            f"a loop ({where}) carries a tuple, or uses a list made before it other than by "
            "appending one tensor to it per iteration, and ONNX Loop carries only tensors. "
            "Such a loop is unrolled "
            "when it runs a static number of times (a static size of an input, a constant "
            "range); this one's count is known only at run time (a dynamic axis or a tensor's "
            "value): collect the items in a tensor instead (torch.cat, or writes into a "
            "preallocated tensor)")
    if updated:
        raise CaptureError(
            f"a loop ({where}) writes in place to tensors made "
            "before it, which ONNX Loop cannot express; return the updated tensors instead")
    graph = converter.fx_graph
    loop = graph.call_function(prim_loop, (body, trip_count, tuple(carried), tuple(outer),
                                           condition))
    stacked, first = {}, len(carried)
    for slot in slots:
        scans = [graph.call_function(operator.getitem, (loop, first + j))
                 for j in range(len(slot.items))]
        first += len(slot.items)
        if len(scans) > 1:  # several appends per iteration: their items interleaved
            scans = [graph.call_function(torch.ops.aten.flatten.using_ints, (
                graph.call_function(torch.ops.aten.stack.default, (scans, 1)), 0, 1))]
        if slot.front:  # (each iteration's item went before the earlier ones)
            scans = [graph.call_function(torch.ops.aten.flip.default, (scans[0], [0]))]
        key = slot.carried if slot.carried is not None else slot.name
        stacked[key] = StackedList(scans[0], where)
    kept, k = 0, 0  # (k: the position among the carried values made flat)
    for output, width in zip(node.outputs(), widths):
        if width is not None:
            converter.name_to_node[output.debugName()] = tuple(
                graph.call_function(operator.getitem, (loop, kept + j)) for j in range(width))
            kept, k = kept + width, k + width
            continue
        if k in stacked:
            converter.name_to_node[output.debugName()] = stacked[k]
            k += 1
            continue
        converter.name_to_node[output.debugName()] = graph.call_function(
            operator.getitem, (loop, kept))
        kept, k = kept + 1, k + 1
    for slot in slots:
        if slot.name is not None:
            converter.name_to_node[slot.name] = stacked[slot.name]


def _tuples_carried_flat(body: torch.fx.GraphModule, carried: list, outer: int,
                         tuples: list) -> list:
    """Rewrite ``body`` so that each tuple of tensors it carries (``state = (h, c)`` updated
    per iteration), whose placeholder it only indexes by constants, is carried as its tensors.
    Returns, per carried value, its width once flat, or None where it is carried as it was."""
    graph = body.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    output = next(n for n in graph.nodes if n.op == "output")
    if not isinstance(output.args[0], (list, tuple)):
        return [None] * len(carried)
    results = list(output.args[0])
    widths: list = []
    flat_results = [results[0]]
    for k, value in enumerate(carried):
        placeholder = placeholders[outer + 1 + k]
        result = results[1 + k]
        if not tuples[k] or not _flattenable(value, placeholder, result):
            widths.append(None)
            flat_results.append(result)
            continue
        width = len(value)
        with graph.inserting_after(placeholder):
            items = []
            for j in reversed(range(width)):  # (each inserted right after the placeholder)
                items.insert(0, graph.placeholder(f"{placeholder.name}_{j}"))
        for user in list(placeholder.users):
            user.replace_all_uses_with(items[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(placeholder)
        if isinstance(result, (list, tuple)):
            flat_results += list(result)
        else:
            with graph.inserting_before(output):
                flat_results += [graph.call_function(operator.getitem, (result, j))
                                 for j in range(width)]
        widths.append(width)
    if any(width is not None for width in widths):
        output.args = (flat_results + results[1 + len(carried):],)
        body.recompile()
    return widths


def _flattenable(value: Any, placeholder: torch.fx.Node, result: Any) -> bool:
    """Whether a carried ``value`` (a tuple, which the converter holds as a list) is of
    tensors, its ``placeholder`` read by the body only at constant indices, and its
    ``result`` one of as many."""
    if not isinstance(value, (list, tuple)) or not value or \
            not all(isinstance(item, torch.fx.Node) for item in value):
        return False
    if not all(user.op == "call_function" and user.target is operator.getitem and
               user.args[0] is placeholder and isinstance(user.args[1], int) and
               -len(value) <= user.args[1] < len(value) for user in placeholder.users):
        return False
    if isinstance(result, (list, tuple)):
        return len(result) == len(value) and all(isinstance(r, torch.fx.Node) for r in result)
    return isinstance(result, torch.fx.Node)


def outer_values(converter: Any, names: list) -> list:
    """The values of the names a loop body reads from outside it. A weight only the body
    reads (``self.lin(h)`` in the loop) has no node outside it yet: the top-level graph
    reads it here, as its own reads of attributes do."""
    for name in names:
        if name not in converter.name_to_node and converter.is_top_level_graph() and \
                converter._is_get_attr_node(name):
            converter.name_to_node[name] = converter.fx_graph.get_attr(name)
    return [converter.get_fx_value_by_fqn(name) for name in names]


def _loop_condition(converter: Any, node: torch._C.Node) -> Any:
    """None for a ``for`` loop (its condition is true throughout); for a ``while`` loop, whose
    condition the body computes, the condition it starts with."""
    inputs = list(node.inputs())
    condition = next(next(node.blocks()).outputs())
    start = converter.get_fx_value_by_ir_value(inputs[1])
    if isinstance(start, (bool, int)) and start and (
            condition.node().kind() == "prim::Constant" and condition.toIValue()
            or condition.debugName() == inputs[1].debugName()):
        return None
    return start


class _PrimLoop(torch._ops.HigherOrderOperator):
    """``prim_loop(body, trip_count, carried, outer, condition)``: at most ``trip_count``
    times, while the condition holds, ``body(*outer, i, *carried)`` returns (condition,
    *carried, *scanned); the results are the last carried values, then each scanned value
    stacked over the iterations (a list the loop appends to). Unlike torch's while_loop, the
    carried tensors may change shape from one iteration to the next (torchvision grows its
    pasted masks by one per iteration with cat), as in ONNX Loop."""

    def __init__(self):
        super().__init__("onnxport_prim_loop")

    def __call__(self, body, trip_count, carried, outer, condition=True):
        carried, scans = list(carried), []
        i = 0
        while i < int(trip_count) and bool(condition):
            condition, *results = body(*outer, i, *carried)
            carried = results[:len(carried)]
            scans.append(results[len(carried):])
            i += 1
        stacked = [torch.stack(items) for items in zip(*scans)]
        return (*carried, *stacked)


prim_loop = _PrimLoop()


def _known(value: Any) -> bool | int | float | None:
    """``value`` as a number where the converter made it from numbers only (``operator.gt(1,
    0)`` of a list's known length), else None."""
    if isinstance(value, (bool, int, float)):
        return value
    target = getattr(value, "target", None)
    if isinstance(value, torch.fx.Node) and value.op == "call_function" and not value.kwargs \
            and (getattr(target, "__module__", None) in ("_operator", "operator") or
                 isinstance(target, torch._ops.OpOverload) and target.namespace == "aten" and
                 all(not isinstance(a.type, torch.TensorType) for a in target._schema.returns)):
        args = [_known(arg) for arg in value.args]
        if all(arg is not None for arg in args):
            result = target(*args)
            return result if isinstance(result, (bool, int, float)) else None
    return None


def block_arguments(converter: Any, node: torch._C.Node) -> set[str]:
    """TS2FXGraphConverter._identify_inputs_as_arguments, with the values made before ``node``
    that one of its blocks returns as they are (``for _ in range(n): y = x``, a branch's
    ``y = x``): torch's counts the inputs of the blocks' nodes only, and the block's
    conversion failed ("Output x.1 not found"); and the weights read before ``node`` that
    its blocks use, by their path, as torch's lifts those read inside them
    (F.multi_head_attention_forward's in_proj_weight in the branch on ``k is v``: "Attribute
    m.in_proj_weight not found")."""
    from torch._export.converter import TS2FXGraphConverter

    arguments = TS2FXGraphConverter._identify_inputs_as_arguments(converter, node)
    for inner in nodes_inside(node):
        for value in inner.inputs():
            path = converter.name_to_attribute_fqn.get(value.debugName())
            if path in converter.name_to_param or path in converter.name_to_buffer:
                arguments.add(path)
    blocks = [*node.blocks(), *(inner for n in nodes_inside(node) for inner in n.blocks())]
    for block in blocks:
        returned = block.returnNode()
        for k in range(returned.inputsSize()):
            name = returned.inputsAt(k).debugName()
            if name in converter.name_to_node and name not in converter.name_to_attribute_fqn:
                arguments.add(name)
    return arguments


def convert_if(converter: Any, node: torch._C.Node) -> None:
    """TS2FXGraphConverter.convert_prim_If, the weights only its branches read (a traced
    submodule called in both branches of a scripted ``if``) read first by the top-level graph,
    as :func:`outer_values` does for a loop's body: torch's looked them up and failed."""
    from torch._export.converter import TS2FXGraphConverter

    predicate = _known(converter.get_fx_value_by_ir_value(next(iter(node.inputs()))))
    if predicate is not None:
        # A condition known here (``if len(res) > 0:`` of a list the graph built): the branch
        # taken runs in this graph. As a torch.cond, what it appends to a list made before
        # was lost: the model's outputs went missing with no error.
        block = list(node.blocks())[0 if predicate else 1]
        for inner in block.nodes():
            converter.convert_node(inner)
        for output, value in zip(node.outputs(), block.returnNode().inputs()):
            converter.name_to_node[output.debugName()] = \
                converter.get_fx_value_by_ir_value(value)
        return
    _refuse_edits_of_outer_containers(node)
    names = set(converter._identify_inputs_as_arguments(node))
    for block in node.blocks():
        names |= set(converter.blocks_to_lifted_attrs[block])
    outer_values(converter, sorted(names))
    TS2FXGraphConverter.convert_prim_If(converter, node)
    # A list an earlier loop built, among the operands: each branch reads its stacked rows.
    cond = next(n for n in reversed(converter.fx_graph.nodes) if n.target is torch.cond)
    operands = cond.args[3]
    if any(isinstance(value, StackedList) for value in operands):
        for branch in cond.args[1:3]:  # (both take the same operands, and get the same ones)
            read = stacked_lists_read(converter.subgraphs[branch.target], operands)
        cond.args = (*cond.args[:3], tuple(read), *cond.args[4:])


def _refuse_edits_of_outer_containers(node: torch._C.Node) -> None:
    """A branch on a value known at run time only that edits a list or dict made before it
    (``if x.sum() > 0: res[0] = y``): an ONNX If returns values and edits nothing, and the
    capture failed later with an error about an operator. Named here, with the line."""
    for inner in nodes_inside(node):
        if inner.kind() in _LIST_EDITS and not within(inner.inputsAt(0).node(), node):
            raise CaptureError(
                f"a scripted branch on a value known at run time only edits a list or dict "
                f"made before it ({inner.kind()} at `{source_line(inner)}`); ONNX If "
                "returns values and edits nothing. Give both branches the same edits of "
                "values they compute (`item = y if c else z; res.append(item)`), or build "
                "the container after the branch from its results")

