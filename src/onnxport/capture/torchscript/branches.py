"""Scripted code's branches decided before conversion, where the graph decides them: the
checks that raise or warn (ONNX has neither), ranks the graph knows, ``is`` and ``is not``
that it decides; then what only those checks read (dead loops, casts) goes too."""

from __future__ import annotations

from typing import Any

import torch

from onnxport.capture.script_mutations import within
from onnxport.capture.torchscript import uninitialized
from onnxport.capture.torchscript.ranks import known_ranks


def fold_to_constant(graph: torch._C.Graph, node: torch._C.Node, value: Any) -> None:
    """Replace ``node`` (of one output) by a constant of ``value`` where it stood."""
    with graph.insert_point_guard(node):
        node.output().replaceAllUsesWith(graph.insertConstant(value))
    node.destroy()


def decide_branches(graph: torch._C.Graph, distinct_inputs: bool = False) -> None:
    """Simplify ``graph`` (a TorchScript graph with branches) in place. ``distinct_inputs``:
    the example gave no tensor for two of the graph's inputs."""
    # Scripted code's warnings (F.mse_loss's on broadcast sizes) have no ONNX form: gone,
    # with the strings they format and the branches that only warn.
    changed = _drop_warnings(graph)
    changed = _fold_run_state(graph) or changed
    # Repeated while it decides more: a branch decided by an identity check can leave a rank
    # known that decides the next (the second layer of a scripted nn.TransformerEncoder
    # reads the rank of the first's output, known once its attention's branches are gone).
    for _ in range(8):
        dropped = _fold_known_ranks(graph)
        dropped = _drop_raising_branches(graph) or dropped
        if dropped or changed:
            # What the checks were about (a rank, an optional argument) is constant now.
            torch._C._jit_pass_constant_propagation(graph)
        decided = _fold_identity_checks(graph, distinct_inputs)
        if not (dropped or decided):
            break
        changed = True
    if _optionals_set_in_one_branch(graph) or changed:
        torch._C._jit_pass_dce(graph)
    if _drop_dead_control_flow(graph):
        torch._C._jit_pass_dce(graph)
    uninitialized.localize(graph)  # (before the copies: an outer one is no tensor to copy)
    _copy_outer_tensors_returned(graph, graph.block())


def _fold_run_state(graph: torch._C.Graph) -> bool:
    """What scripted code asks of the run that an ONNX graph has no such thing as, folded to
    the export's answer: ``torch.is_grad_enabled()`` (the capture runs without gradients),
    ``torch.is_autocast_enabled()`` (as at the export) and ``x.is_nested`` (an input is never
    a nested tensor). The fast-path checks of a scripted nn.TransformerEncoderLayer branch on
    them, a list comprehension inside, and the conversion failed on its appends. Whether
    there was one."""
    found = False
    for node in graph.findAllNodes("aten::is_grad_enabled", True) + \
            graph.findAllNodes("prim::is_nested", True):
        fold_to_constant(graph, node, False)
        found = True
    for node in graph.findAllNodes("aten::is_autocast_enabled", True):
        device = node.inputsAt(0).toIValue() if node.inputsSize() == 1 else None
        if node.inputsSize() == 1 and not isinstance(device, str):
            continue
        fold_to_constant(graph, node, torch.is_autocast_enabled(device) if device else
                         torch.is_autocast_enabled())
        found = True
    return found


def _copy_outer_tensors_returned(graph: torch._C.Graph, block: Any) -> None:
    """A branch that returns a tensor or number of the enclosing code unchanged (``res = y``
    in one branch of ``if cond:``) returns a copy of it made in the branch (``_COPIES``):
    torch's converter looks a branch's results up among the values the branch makes and
    uses ("Output y.1 not found")."""
    for node in block.nodes():
        for sub_block in node.blocks():
            _copy_outer_tensors_returned(graph, sub_block)
            if node.kind() != "prim::If":
                continue
            returned = sub_block.returnNode()
            for k, value in enumerate(list(returned.inputs())):
                kind = value.type().kind()
                if kind not in _COPIES or value.node().owningBlock() == sub_block or \
                        (kind != "TensorType" and value.node().kind() == "prim::Constant"):
                    continue
                op, second = _COPIES[kind]
                operand = graph.insertConstant(second)
                operand.node().moveBefore(returned)
                copy = graph.create(op, [value, operand])
                copy.insertBefore(returned)
                copy.output().setType(value.type())
                returned.replaceInput(k, copy.output())


# A copy of a value of each kind, made in the branch that returns it: a tensor's clone, a
# number plus 0 (the counter a ``while`` loop's ``break`` branch keeps: torch's converter
# clones a branch's input it returns, which fails on an int).
_COPIES = {"TensorType": ("aten::clone", None), "IntType": ("aten::add", 0),
           "FloatType": ("aten::add", 0.0), "BoolType": ("aten::__and__", True)}


def _fold_known_ranks(graph: torch._C.Graph) -> bool:
    """``x.dim()`` of a tensor whose rank the graph knows (a traced value read by a scripted
    function inside the trace, a value of scripted code that :mod:`.ranks` infers from the
    inputs') becomes that number, which decides the branches on it (ONNX has no branch whose
    results differ in rank); whether there was one. Repeated while it decides branches: a
    branch gone may leave a rank known (nn.LSTMCell's state in a loop)."""
    folded = False
    while True:
        ranks = known_ranks(graph)
        found = [(node, ranks[node.inputsAt(0)]) for node in graph.findAllNodes("aten::dim", True)
                 if isinstance(ranks.get(node.inputsAt(0)), int)]
        if not found:
            return folded
        for node, rank in found:
            fold_to_constant(graph, node, rank)
        folded = True
        torch._C._jit_pass_constant_propagation(graph)


def _drop_dead_control_flow(block: Any) -> bool:
    """Remove the loops and branches whose results nothing reads and that write nothing but
    lists of their own (the size check of F.group_norm's batch, whose raise is gone; the
    device checks left of nn.MultiheadAttention's fast path): TorchScript's dead-code pass
    keeps them, and their list arithmetic cannot run on symbolic sizes. Whether there was
    one."""
    dropped = False
    for node in reversed(list(block.nodes())):
        for inner in node.blocks():
            dropped = _drop_dead_control_flow(inner) or dropped
        if node.kind() in ("prim::Loop", "prim::If") and \
                not any(o.uses() for o in node.outputs()) and \
                not any(_writes_outside(b, set()) for b in node.blocks()):
            node.destroy()
            dropped = True
    return dropped


_LIST_EDITS = {"aten::append", "aten::insert", "aten::_set_item", "aten::pop",
               "aten::Delete", "aten::extend", "aten::clear", "aten::reverse"}
_SIDE_EFFECTS = {"prim::RaiseException", "prim::Print", "prim::SetAttr", "aten::warn",
                 *_LIST_EDITS}


def _writes_outside(block: Any, local: set) -> bool:
    """Whether ``block`` writes anything but the lists made in it (``local``: what the
    blocks around it made, within the node being judged)."""
    for node in block.nodes():
        kind = node.kind()
        if kind in _LIST_EDITS and node.inputsAt(0).unique() in local:
            pass
        elif kind in _SIDE_EFFECTS or kind.endswith("_") and not kind.endswith("__"):
            return True
        if any(_writes_outside(b, local) for b in node.blocks()):
            return True
        local.update(o.unique() for o in node.outputs())
    return False


def _drop_warnings(graph: torch._C.Graph) -> bool:
    """Remove the graph's ``aten::warn`` and ``print`` calls (as torch.onnx drops them: no
    ONNX op prints); whether there was one."""
    warnings_ = graph.findAllNodes("aten::warn", True) + graph.findAllNodes("prim::Print", True)
    for node in warnings_:
        node.destroy()
    return bool(warnings_)


def _drop_raising_branches(block: Any) -> bool:
    """Inline the other branch of each ``prim::If`` one of whose branches always raises (the
    argument checks of scripted code, ``interpolate``'s rank dispatch): ONNX has no exceptions,
    and the checks read ranks and strings that only a run knows."""
    changed = False
    for node in list(block.nodes()):
        for sub_block in node.blocks():
            changed = _drop_raising_branches(sub_block) or changed
        if node.kind() != "prim::If":
            continue
        branches = list(node.blocks())
        raises = [any(n.kind() == "prim::RaiseException" for n in b.nodes()) for b in branches]
        if raises.count(True) != 1:
            continue
        kept = branches[raises.index(False)]
        for inner in list(kept.nodes()):
            inner.moveBefore(node)
        for output, value in zip(node.outputs(), kept.returnNode().inputs()):
            output.replaceAllUsesWith(value)
        node.destroy()
        changed = True
    return changed


def _fold_identity_checks(graph: torch._C.Graph, distinct_inputs: bool = False) -> bool:
    """``a is b`` and ``a is not b`` that the graph decides become constants, their branches
    decided and casts of a decided Optional to Tensor dropped; whether there was one. Decided:
    a value compared with itself (nn.MultiheadAttention's ``query is key``), None with None,
    and a tensor with None (an Optional[Tensor] parameter of an inlined function given one,
    ``per_sample_weights`` of F.embedding_bag, once the branches raising on it are gone). The
    converter has no conversion for these, and the cast cannot run on fake tensors."""
    folded = False
    for _ in range(4):  # a decided branch can make another value a plain tensor
        changed = _forward_unchanged_values(graph, graph.block())
        for node in [*graph.findAllNodes("aten::__is__", True),
                     *graph.findAllNodes("aten::__isnot__", True)]:
            same = _same_object(*node.inputs(), distinct_inputs)
            if same is None:
                continue
            fold_to_constant(graph, node, same == (node.kind() == "aten::__is__"))
            changed = True
        for node in graph.findAllNodes("prim::isinstance", True):
            decided = _isinstance_decided(node)
            if decided is not None:
                fold_to_constant(graph, node, decided)
                changed = True
        for node in graph.findAllNodes("prim::unchecked_cast", True):
            # (a decided Optional: a tensor, or a list F.interpolate's scale factors build)
            source, target = node.inputsAt(0).type(), node.output().type()
            if source.kind() == target.kind() == "TensorType" or source.isSubtypeOf(target):
                node.output().replaceAllUsesWith(node.inputsAt(0))
                node.destroy()
                changed = True
        if not changed:
            return folded
        folded = True
        torch._C._jit_pass_constant_propagation(graph)
    return folded


def _isinstance_decided(node: torch._C.Node) -> bool | None:
    """``isinstance(lengths, torch.Tensor)`` that the value's type decides: TorchScript decides
    it when compiling, but not once a function is inlined with a narrower argument
    (pack_padded_sequence's Union[Tensor, List[int]] lengths given a tensor)."""
    kind = node.inputsAt(0).type()
    if any(kind.isSubtypeOf(option) for option in node.tys("types")):
        return True
    if isinstance(kind, (torch._C.OptionalType, torch._C.UnionType, torch._C.AnyType)):
        return None
    return False


def _forward_unchanged_values(graph: torch._C.Graph, block: Any) -> bool:
    """A value a loop carries unchanged, or a branch returns from before it in each of its
    blocks (``if y is not None: ...`` in a loop over an Optional ``y``, which TorchScript
    carries through the loop), or a None both branches return, read as that value itself:
    an identity check on it is then decided by what the value is. Whether any was."""
    changed = False
    for node in block.nodes():
        for sub_block in node.blocks():
            changed = _forward_unchanged_values(graph, sub_block) or changed
        if node.kind() == "prim::If":
            changed = _tuples_returned_flat(graph, node) or changed
            for k in reversed(range(node.outputsSize())):
                if node.outputsAt(k).type().kind() == "NoneType":
                    # (None from each branch: ``return y, None``, which ONNX has no form of)
                    with graph.insert_point_guard(node):
                        node.outputsAt(k).replaceAllUsesWith(graph.insertConstant(None))
                    for sub_block in node.blocks():
                        sub_block.returnNode().removeInput(k)
                    node.eraseOutput(k)
                    changed = True
            for k, output in enumerate(node.outputs()):
                sources = {_uncast(b.returnNode().inputsAt(k)).unique() for b in node.blocks()}
                if len(sources) != 1 or not output.uses():
                    continue
                source = _uncast(next(node.blocks()).returnNode().inputsAt(k))
                if within(source.node(), node) or str(source.type()) != str(output.type()):
                    continue
                output.replaceAllUsesWith(source)
                changed = True
        elif node.kind() == "prim::Loop":
            body = next(node.blocks())
            parameters, returned = list(body.inputs()), list(body.returnNode().inputs())
            for k, output in enumerate(node.outputs()):
                parameter = parameters[1 + k]  # (after the iteration; the condition first)
                if returned[1 + k].unique() != parameter.unique() or \
                        not parameter.uses() and not output.uses():
                    continue
                # (The body then returns the initial value: carried, and read by no one.)
                parameter.replaceAllUsesWith(node.inputsAt(2 + k))
                output.replaceAllUsesWith(node.inputsAt(2 + k))
                changed = True
    return changed


def _tuples_returned_flat(graph: torch._C.Graph, node: torch._C.Node) -> bool:
    """A tuple each branch of ``node`` builds and returns (``return x[:2], None``) returned
    as its items, one result each, and built after the branch: whether there was one."""
    found = False
    for k in reversed(range(node.outputsSize())):
        output = node.outputsAt(k)
        builds = [b.returnNode().inputsAt(k).node() for b in node.blocks()]
        if output.type().kind() != "TupleType" or \
                any(b.kind() != "prim::TupleConstruct" for b in builds):
            continue
        items = []
        for j, item_type in enumerate(output.type().elements()):
            for block, build in zip(node.blocks(), builds):
                block.returnNode().addInput(build.inputsAt(j))
            items.append(node.addOutput().setType(item_type))
        joined = graph.create("prim::TupleConstruct", items)
        joined.insertAfter(node)
        joined.output().setType(output.type())
        output.replaceAllUsesWith(joined.output())
        for block in node.blocks():
            block.returnNode().removeInput(k)
        node.eraseOutput(k)
        found = True
    return found


def _optionals_set_in_one_branch(graph: torch._C.Graph) -> bool:
    """An Optional tensor that one branch of ``if c:`` sets and the other leaves None (``y =
    None`` then ``if x.sum() > 0: y = x * 2``), read only by checks against None and by casts,
    as a tensor: ``y is not None`` is ``c`` itself (or ``not c``), and the branch that leaves
    it None returns an uninitialized tensor (uninitialized.py). ONNX If returns tensors, and
    torch's branches must agree: the capture was refused. Whether there was one."""
    changed = False
    for node in graph.findAllNodes("prim::If", True):
        for k in range(node.outputsSize()):
            output = node.outputsAt(k)
            returned = [_uncast(b.returnNode().inputsAt(k)) for b in node.blocks()]
            kinds = [value.type().kind() for value in returned]
            if output.type().kind() != "OptionalType" or \
                    sorted(kinds) != ["NoneType", "TensorType"] or \
                    not all(_checks_or_casts(use) for use in output.uses()):
                continue
            unset = list(node.blocks())[kinds.index("NoneType")]
            local = graph.create("prim::Uninitialized")
            local.output().setType(torch._C.TensorType.get())
            local.insertBefore(unset.returnNode())
            unset.returnNode().replaceInput(k, local.output())
            output.setType(torch._C.TensorType.get())
            set_when_true = kinds.index("TensorType") == 0
            for use in list(output.uses()):
                user = use.user
                if user.kind() == "prim::unchecked_cast":
                    user.output().replaceAllUsesWith(output)
                elif (user.kind() == "aten::__isnot__") == set_when_true:
                    user.output().replaceAllUsesWith(node.inputsAt(0))
                else:
                    negated = _negated(graph, node.inputsAt(0), user)
                    user.output().replaceAllUsesWith(negated)
                user.destroy()
            changed = True
    return changed


def _negated(graph: torch._C.Graph, condition: torch._C.Value,
             before: torch._C.Node) -> torch._C.Value:
    """``not condition``, made before ``before``: of ``bool(t)``, ``bool(logical_not(t))``,
    a condition of the run as the original is (the converter's If takes those)."""
    source = condition.node()
    if source.kind() == "aten::Bool" and \
            isinstance(source.inputsAt(0).type(), torch._C.TensorType):
        flipped = graph.create("aten::logical_not", [source.inputsAt(0)])
        flipped.output().setType(source.inputsAt(0).type())
        flipped.insertBefore(before)
        negated = graph.create("aten::Bool", [flipped.output()])
    else:
        negated = graph.create("aten::__not__", [condition])
    negated.output().setType(torch._C.BoolType.get())
    negated.insertBefore(before)
    return negated.output()


def _checks_or_casts(use: Any) -> bool:
    """Whether ``use`` of an Optional is ``is None``/``is not None`` or a cast to Tensor."""
    user = use.user
    if user.kind() == "prim::unchecked_cast":
        return True
    return user.kind() in ("aten::__is__", "aten::__isnot__") and \
        user.inputsAt(1 - use.offset).type().kind() == "NoneType"


def _uncast(value: torch._C.Value) -> torch._C.Value:
    while value.node().kind() == "prim::unchecked_cast":
        value = value.node().inputsAt(0)
    return value


def _same_object(a: torch._C.Value, b: torch._C.Value,
                 distinct_inputs: bool = False) -> bool | None:
    """Whether ``a is b`` holds, when the graph decides it; else None."""
    if a.debugName() == b.debugName():
        return True
    kinds = {a.type().kind(), b.type().kind()}
    if kinds == {"NoneType"}:
        return True
    if kinds in ({"TensorType", "NoneType"}, {"ListType", "NoneType"},
                 {"TupleType", "NoneType"}):
        return False  # (a list or tuple: of an Optional[List[Tensor]] given one)
    if kinds == {"TensorType"} and (_new_tensor(a) or _new_tensor(b)):
        return False  # (a decoder's query, normalized, is not its memory)
    if kinds == {"TensorType"} and distinct_inputs and _graph_input(a) and _graph_input(b):
        return False  # (nn.MultiheadAttention's `query is key` of a query and a memory)
    return None


def _graph_input(value: torch._C.Value) -> bool:
    """An input of the graph itself (not of a loop body, whose inputs carry values)."""
    node = value.node()
    return node.kind() == "prim::Param" and node.owningBlock().owningNode() is None


def _new_tensor(value: torch._C.Value) -> bool:
    node = _source(value).node()
    return node.kind() in _NEW_TENSOR and "(a!)" not in node.schema()  # (not out=)


def _source(value: torch._C.Value) -> torch._C.Value:
    item = unpacked_item(value)
    return value if item is None else item


def unpacked_item(value: torch._C.Value) -> torch._C.Value | None:
    """The value an item unpacked from a list or tuple built in the graph stands for (made
    with its items, or a list made empty and appended to: ``(x.transpose(1, 0) for x in
    (query, key))``); None when the graph does not say."""
    node = value.node()
    if node.kind() not in ("prim::ListUnpack", "prim::TupleUnpack", "prim::TupleIndex"):
        return None
    made = node.inputsAt(0).node()
    if made.kind() not in ("prim::ListConstruct", "prim::TupleConstruct"):
        return None
    if node.kind() == "prim::TupleIndex":
        index = node.inputsAt(1)
        k = index.toIValue() if index.node().kind() == "prim::Constant" else None
    else:
        k = list(node.outputs()).index(value)
    parts = list(made.inputs())
    if not parts and node.kind() == "prim::ListUnpack":
        uses = [use.user for use in made.output().uses()
                if use.user.kind() != "prim::ListUnpack"]
        if not all(user.kind() == "aten::append" for user in uses) or \
                len(uses) != node.outputsSize():
            return None
        parts = [user.inputsAt(1) for user in uses]  # (a block's uses are listed in order)
    return parts[k] if isinstance(k, int) and -len(parts) <= k < len(parts) else None


# Ops whose result is always a tensor of its own (a view is one too), never one of their
# arguments (unlike contiguous, to or dropout in eval, which can return their input).
_NEW_TENSOR = {f"aten::{name}" for name in (
    "layer_norm", "linear", "add", "sub", "mul", "div", "matmul", "bmm", "baddbmm",
    "softmax", "log_softmax", "relu", "gelu", "tanh", "sigmoid", "cat", "stack",
    "scaled_dot_product_attention", "transpose", "permute", "unsqueeze", "select", "view")}
