"""In-place writes that scripted control flow makes to tensors from outside it, made values.

``if cond: x[i] = 0`` in scripted code writes into ``x``, a tensor the branch did not make;
``for ...: x.add_(1)`` does so once per iteration. ONNX If and Loop bodies cannot write into
their surroundings, and torch's TorchScript converter refuses such writes. Here each write
becomes its functional op (``index_put_`` -> ``index_put``), the written tensor's new value
leaves the branch as an output of the If (the other branch passing the old value) or the loop
as a carried value, and what follows reads that output: the graph says with values what the
writes did. Nested control flow is rewritten innermost first; its outputs count as writes in
the block around it.

A list that both branches of an If append one tensor to (``if c: ys.append(a) else:
ys.append(b)``) is appended to after the If instead, with what the branch taken returns.
"""

from __future__ import annotations

import torch

from onnxport.capture.common import source_line
from onnxport.errors import CaptureError

_CONTROL_FLOW = ("prim::If", "prim::Loop")


def functionalize_writes(graph: torch._C.Graph) -> None:
    """Rewrite ``graph`` (a TorchScript graph) in place; see the module's docstring."""
    if all(graph.findNode(kind, True) is None for kind in _CONTROL_FLOW):
        return  # (a traced graph has none: walking its nodes in Python is then time lost)
    _hoist_branch_appends(graph, graph.block())
    _rewrite_nodes(graph, graph.block(), {})


def _rewrite_nodes(graph, block, written: dict) -> None:
    """Rewrite the control flow in ``block`` (innermost first). ``written`` maps a value made
    by a rewrite to the value outside it that it is the new version of."""
    for node in list(block.nodes()):
        if node.kind() not in _CONTROL_FLOW:
            continue
        for inner in node.blocks():
            _rewrite_nodes(graph, inner, written)
        if node.kind() == "prim::If":
            _rewrite_if(graph, node, written)
        else:
            _rewrite_loop(graph, node, written)


def _functional_kind(node: torch._C.Node) -> str | None:
    """The functional op of an in-place one (``aten::add_`` -> ``aten::add``), when it writes
    its first input and the functional op exists."""
    kind = node.kind()
    if not kind.startswith("aten::") or not kind.endswith("_") or kind.endswith("__"):
        return None
    functional = kind[:-1]
    if not torch._C._jit_get_schemas_for_operator(functional):
        return None
    return functional


def within(node: torch._C.Node, owner: torch._C.Node) -> bool:
    """Whether ``node`` is ``owner`` or a node in its blocks, at any depth."""
    while node is not None:
        if node == owner:
            return True
        block = node.owningBlock()
        node = block.owningNode() if block is not None else None
    return False


def _outside(value: torch._C.Value, owner: torch._C.Node) -> bool:
    """Whether ``value`` is made outside ``owner`` (not by a node within it)."""
    return not within(value.node(), owner)


def _ancestor_in(node: torch._C.Node, block) -> torch._C.Node | None:
    """``node`` or the node around it that sits directly in ``block``; None when neither."""
    while node is not None:
        owning = node.owningBlock()
        if owning == block:
            return node
        node = owning.owningNode() if owning is not None else None
    return None


def _replace_later_uses(value: torch._C.Value, after: torch._C.Node,
                        new: torch._C.Value) -> None:
    """Uses of ``value`` after ``after`` in ``after``'s block (nested ones included) read
    ``new`` instead."""
    block = after.owningBlock()
    for use in list(value.uses()):
        user = use.user
        if user.kind() == "prim::Return" and user.owningBlock() == block:
            user.replaceInput(use.offset, new)  # the block's own result, after everything
            continue
        ancestor = _ancestor_in(user, block)
        if ancestor is not None and ancestor != after and ancestor.isAfter(after):
            user.replaceInput(use.offset, new)


def _rewrite_block_writes(graph, block, owner: torch._C.Node, written: dict,
                          roots: dict | None = None) -> dict:
    """Turn ``block``'s writes to values from outside ``owner``, and its writes through views
    of tensors it made, into functional ops; return {value outside: its last version in the
    block}. ``roots`` maps stand-ins (a loop body's carried inputs) to the outside values
    they are."""
    roots = dict(roots or {})
    latest: dict = {}
    for node in list(block.nodes()):
        for output in node.outputs():
            if output in written and _outside(written[output], owner):
                latest[roots.get(written[output], written[output])] = output
        functional = _functional_kind(node)
        if functional is None or node.inputsSize() == 0:
            continue
        base, views, other_view = _views_of(node.inputsAt(0), owner, roots)
        outside = _outside(base, owner) or base in roots
        if other_view is not None:
            _refuse_unexpressed_view(node, owner, roots)
            continue
        if not outside and not _read_after(base, node, written=node.inputsAt(0)):
            continue  # (only the written tensor is read again: translation rebinds it)
        replacement = graph.create(functional, list(node.inputs()), 1)
        replacement.insertBefore(node)
        replacement.copyMetadata(node)
        replacement.output().setType(node.output().type())
        node.output().replaceAllUsesWith(replacement.output())
        new = _scattered_back(graph, views, replacement.output(), node)
        _renew_views(graph, base, new, node)
        _replace_later_uses(base, node, new)
        node.destroy()
        if outside:
            root = roots.get(base, base)
            roots[new] = root
            latest[root] = new
    return latest


# The views a write into is put back through to the tensor viewed: {kind: put back}.
_SCATTERS = {"aten::select": "aten::select_scatter", "aten::slice": "aten::slice_scatter",
             "aten::diagonal": "aten::diagonal_scatter"}
# Views of every element in the same order: put back by a reshape to the viewed size.
_SAME_ORDER = ("aten::view", "aten::view_as", "aten::unsqueeze", "aten::squeeze",
               "aten::unflatten", "aten::alias", "aten::detach")
_TRANSPOSES = ("aten::transpose", "aten::t", "aten::swapaxes", "aten::swapdims")
_PUT_BACK = (*_SCATTERS, *_SAME_ORDER, *_TRANSPOSES)
# Views no write is put back through here (a write into one is refused where it matters).
_OTHER_VIEWS = ("aten::expand", "aten::expand_as",
                "aten::as_strided", "aten::unfold", "aten::movedim", "aten::permute",
                "aten::real", "aten::imag", "aten::view_as_real", "aten::view_as_complex")


def _views_of(target: torch._C.Value, owner: torch._C.Node, roots: dict) -> tuple:
    """(base, views, other): the tensor ``target`` is a view of (``target`` itself when it
    is none), the view calls made within ``owner`` that lead from it to ``target``,
    outermost first, and the first view on the way that no write is put back through
    (None when there is none). The walk stops at a tensor from outside ``owner``."""
    views = []
    value = target
    while not (_outside(value, owner) or value in roots):
        maker = value.node()
        kind = _view_kind(maker)
        if kind == "other":
            return value, views, maker
        if kind is None:
            break
        views.insert(0, maker)
        value = maker.inputsAt(0)
    return value, views, None


def _view_kind(node: torch._C.Node) -> str | None:
    """"put back" for a view a write is put back through, "other" for another view, None
    for an op that makes no view."""
    kind = node.kind()
    if kind == "aten::view" and not isinstance(node.inputsAt(1).type(), torch._C.ListType):
        return "other"  # (x.view(dtype): the same bytes read as another type)
    if kind == "aten::narrow":  # put back as a slice, from a start that is a number
        return "put back" if isinstance(node.inputsAt(2).type(), torch._C.IntType) else "other"
    return "put back" if kind in _PUT_BACK else "other" if kind in _OTHER_VIEWS else None


def _views_of_outside(target: torch._C.Value, owner: torch._C.Node,
                      roots: dict) -> tuple[torch._C.Value, list] | None:
    """The tensor from outside ``owner`` that ``target`` is, or is a view of, and the views
    leading to it (:func:`_views_of`); None when ``target`` is a tensor the block made."""
    base, views, _ = _views_of(target, owner, roots)
    return (base, views) if _outside(base, owner) or base in roots else None


def _refuse_unexpressed_view(node, owner, roots: dict) -> None:
    """A write through a view that is not put back here (expand, permute, unfold...): fine
    when only the written view is read again (translation rebinds it); refused when the
    tensors it views are read again or come from outside, as an ONNX body cannot alias."""
    value, aliased = node.inputsAt(0), []
    while True:
        outside = _outside(value, owner) or value in roots
        if outside or _view_kind(value.node()) is None:
            break
        value = value.node().inputsAt(0)
        aliased.append(value)
    if not outside and not any(_used_after(v, node) for v in aliased):
        return
    line = source_line(node)
    view = next(v.node().kind() for v in (node.inputsAt(0), *aliased)
                if _view_kind(v.node()) == "other")
    raise CaptureError(
        f"scripted control flow writes in place ({node.kind()}) into a "
        f"{view.split('::')[-1]} view of a tensor it reads again ({line}); an ONNX "
        "Loop or If body cannot alias tensors, and a write into this kind of view is not put "
        "back into the tensor. Write through indexing (t[i] = v, t[:, a:b] = v) or use the "
        "functional op's result instead")


def _used_after(value: torch._C.Value, node: torch._C.Node) -> bool:
    """Whether an op after ``node`` in its block (or within one) reads ``value``, or the
    block returns it."""
    block = node.owningBlock()
    for use in value.uses():
        if use.user.kind() == "prim::Return" and use.user.owningBlock() == block:
            return True
        ancestor = _ancestor_in(use.user, block)
        if ancestor is not None and ancestor != node and ancestor.isAfter(node):
            return True
    return False


def _scattered_back(graph, views: list, written: torch._C.Value,
                    before: torch._C.Node) -> torch._C.Value:
    """The base tensor of ``views`` with the innermost view's new value ``written`` put back
    through each view (select, slice or diagonal scatter, a reshape or transpose back),
    innermost first."""
    for view in reversed(views):
        base = view.inputsAt(0)
        kind = view.kind()
        if kind in _SCATTERS:
            put = graph.create(_SCATTERS[kind], [base, written, *list(view.inputs())[1:]], 1)
        elif kind in _TRANSPOSES:
            put = graph.create(kind, [written, *list(view.inputs())[1:]], 1)
        elif kind == "aten::narrow":
            put = graph.create("aten::slice_scatter", [base, written, *_narrowed_slice(
                graph, view, before)], 1)
        else:
            size = graph.create("aten::size", [base], 1)
            size.output().setType(torch._C.ListType.ofInts())
            size.insertBefore(before)
            put = graph.create("aten::reshape", [written, size.output()], 1)
        put.insertBefore(before)
        put.copyMetadata(view)
        put.output().setType(base.type())
        written = put.output()
    return written


def _narrowed_slice(graph, view: torch._C.Node, before: torch._C.Node) -> list:
    """The (dim, start, end, step) of the slice ``narrow(dim, start, length)`` is."""
    dim, start, length = list(view.inputs())[1:]
    end = graph.create("aten::add", [start, length], 1)
    end.output().setType(torch._C.IntType.get())
    end.insertBefore(before)
    step = graph.create("prim::Constant")
    step.i_("value", 1)
    step.output().setType(torch._C.IntType.get())
    step.insertBefore(before)
    return [dim, start, end.output(), step.output()]


def _renew_views(graph, base: torch._C.Value, new: torch._C.Value,
                 node: torch._C.Node) -> None:
    """Views of ``base`` made before the write ``node`` and read after it (or through a view
    of them) see the write: each is made again from ``new`` (the base's new version) for
    those reads."""
    for view in _earlier_views(base, node):
        if not _read_after(view.output(), node):
            continue
        again = graph.create(view.kind(), [new, *list(view.inputs())[1:]], 1)
        again.insertBefore(node)
        again.copyMetadata(view)
        again.output().setType(view.output().type())
        _renew_views(graph, view.output(), again.output(), node)
        _replace_later_uses(view.output(), node, again.output())


def _earlier_views(base: torch._C.Value, node: torch._C.Node) -> list:
    """The views of ``base`` that are put back through, made before ``node`` in its block."""
    return [use.user for use in base.uses() if _view_kind(use.user) == "put back"
            and use.offset == 0 and use.user.owningBlock() == node.owningBlock()
            and node.isAfter(use.user)]


def _read_after(value: torch._C.Value, node: torch._C.Node,
                written: torch._C.Value | None = None) -> bool:
    """Whether the graph reads ``value`` after ``node``, or a view of it made before ``node``;
    a read of ``written`` itself (the tensor ``node`` writes, which translation rebinds to
    the write's result) does not count."""
    direct = (written is None or value.unique() != written.unique()) and \
        _used_after(value, node)
    return direct or any(_read_after(view.output(), node, written)
                         for view in _earlier_views(value, node))


def _rewrite_if(graph, node: torch._C.Node, written: dict) -> None:
    branches = [_rewrite_block_writes(graph, block, node, written) for block in node.blocks()]
    changed = list(dict.fromkeys(v for branch in branches for v in branch))
    for value in changed:
        for block, branch in zip(node.blocks(), branches):
            block.registerOutput(branch.get(value, value))
        _new_version_after(node, value, written)


def _rewrite_loop(graph, node: torch._C.Node, written: dict) -> None:
    body = next(node.blocks())
    changed = _written_from_outside(body, node, written)
    if not changed:  # (writes through views of the body's own tensors still become values)
        _rewrite_block_writes(graph, body, node, written)
        return
    stand_ins = {}
    for value in changed:  # each becomes a carried value of the loop
        node.addInput(value)
        carried = body.addInputToBlock()
        carried.setType(value.type())
        for use in list(value.uses()):
            if _ancestor_in(use.user, body) is not None:
                use.user.replaceInput(use.offset, carried)
        stand_ins[carried] = value
    latest = _rewrite_block_writes(graph, body, node, written, stand_ins)
    for carried, value in stand_ins.items():
        body.registerOutput(latest.get(value, carried))
        _new_version_after(node, value, written)


def _new_version_after(node: torch._C.Node, value: torch._C.Value, written: dict) -> None:
    """A new output of ``node`` (an If or Loop whose blocks now return ``value``'s last
    version) that what follows ``node`` reads instead of ``value``."""
    output = node.addOutput()
    output.setType(value.type())
    _replace_later_uses(value, node, output)
    written[output] = value


def _written_from_outside(body, loop: torch._C.Node, written: dict) -> list:
    """The values from outside ``loop`` that its body writes (in place, or through a rewritten
    control flow inside it)."""
    found = []
    for node in body.nodes():
        targets = [written[o] for o in node.outputs() if o in written]
        if _functional_kind(node) is not None and node.inputsSize():
            viewed = _views_of_outside(node.inputsAt(0), loop, {})
            targets.append(viewed[0] if viewed else node.inputsAt(0))
        for value in targets:
            if _outside(value, loop) and value not in found:
                found.append(value)
    return found


def _hoist_branch_appends(graph: torch._C.Graph, block) -> None:
    """``if c: ys.append(a) else: ys.append(b)``, each branch appending one tensor to the same
    list made outside it and using that list for nothing else: the If returns what its
    branch appends, appended after it. A loop then appends one tensor per iteration, which
    it carries as its scan output (list_scans) instead of refusing the list."""
    for node in list(block.nodes()):
        for inner in node.blocks():
            _hoist_branch_appends(graph, inner)
        if node.kind() != "prim::If":
            continue
        appends = [_sole_append(inner) for inner in node.blocks()]
        if len(appends) != 2 or None in appends or \
                appends[0].inputsAt(0).unique() != appends[1].inputsAt(0).unique() or \
                any(not isinstance(a.inputsAt(1).type(), torch._C.TensorType) for a in appends):
            continue
        target = appends[0].inputsAt(0)
        items = node.addOutput()
        items.setType(appends[0].inputsAt(1).type())
        for inner, append in zip(node.blocks(), appends):
            inner.registerOutput(append.inputsAt(1))
            append.destroy()
        hoisted = graph.create("aten::append", [target, items], 1)
        hoisted.output().setType(target.type())
        hoisted.insertAfter(node)


def _sole_append(block):
    """The one ``aten::append`` of ``block`` to a list made outside it, when the block uses
    that list for nothing else and the append's result is unused; else None."""
    found = [n for n in block.nodes() if n.kind() == "aten::append"]
    if len(found) != 1 or found[0].output().uses():
        return None
    items = found[0].inputsAt(0)
    if items.node().owningBlock() is block:  # (made in the branch itself)
        return None
    users = [n for n in nodes_within(block) if any(
        n.inputsAt(k).unique() == items.unique() for k in range(n.inputsSize()))]
    return found[0] if users == [found[0]] else None


def nodes_within(block):
    """Every node of ``block``, those of the blocks inside its nodes too, in order."""
    for node in block.nodes():
        yield node
        for inner in node.blocks():
            yield from nodes_within(inner)


def nodes_inside(node):
    """Every node in the blocks of ``node`` (a loop's body, an if's branches), nested ones
    too, in order."""
    for block in node.blocks():
        yield from nodes_within(block)
