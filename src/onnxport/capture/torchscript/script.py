"""A scripted model (``ScriptModule``, ``ScriptFunction``) as the converter takes it: frozen,
inlined, its number inputs bound as constants."""

from __future__ import annotations

import torch

from onnxport.capture import quirks
from onnxport.capture.common import source_line
from onnxport.compat.jit_scalar_type import JitScalarType
from onnxport.capture.script_mutations import functionalize_writes, nodes_inside, within
from onnxport.capture.torchscript.branches import (_LIST_EDITS as _EDITS_IN_PLACE,
                                                   decide_branches, fold_to_constant,
                                                   unpacked_item)
from onnxport.capture.torchscript.static_conditions import fold_static_size_conditions
from onnxport.capture.torchscript.trace import _ConverterState
from onnxport.errors import CaptureError


def _frozen(model: torch.jit.ScriptModule | torch.jit.ScriptFunction):
    """A scripted model with its attributes folded in (``self.training`` and the like are
    then constants and their branches gone), parameters kept as parameters."""
    if isinstance(model, torch.jit.ScriptFunction):
        return model
    _refuse_mkldnn(model)
    # In the mode the export put it in: training=TRAINING keeps Dropout's training branch.
    frozen = torch._C._freeze_module(model._c, preserveParameters=True)
    return torch.jit._recursive.wrap_cpp_module(frozen)


def _refuse_mkldnn(model: torch.jit.ScriptModule) -> None:
    """torch.jit.optimize_for_inference's module holds MKLDNN tensors and kernels
    (``prim::ConstantMKLDNNTensor``, ``prim::mkldnn_convolution``), whose reading crashed the
    process: refused, with the way out."""
    graph = model.graph
    for kind in ("prim::ConstantMKLDNNTensor", "aten::to_mkldnn"):
        if graph.findNode(kind, True) is not None:
            raise CaptureError(
                f"the scripted model holds MKLDNN-specific ops ({kind}), as "
                "torch.jit.optimize_for_inference makes them; they have no ONNX form. Export "
                "the module before optimizing it (torch.jit.script or torch.jit.freeze "
                "alone are fine)")


_NUMBERS = (bool, int, float, str, type(None))


def is_tensor_sequence(value) -> bool:
    """A list or tuple of tensors, which a scripted model's graph takes as one input."""
    return isinstance(value, (list, tuple)) and bool(value) and \
        all(isinstance(item, torch.Tensor) for item in value)


def _script_state(scripted: torch.jit.ScriptModule | torch.jit.ScriptFunction,
                  args: tuple = (), static_sizes: set | None = None,
                  dynamic: set = frozenset()) -> _ConverterState | None:
    """A scripted model's inlined graph, with its parameters and buffers known by name (not by
    comparing values, which takes a buffer equal to a parameter for that parameter), and the
    numbers among ``args`` bound as constants, as tracing fixes a model's number inputs.

    With ``static_sizes`` (the (input, axis) pairs that are dynamic), the sizes of the inputs'
    static axes that the graph reads are the example's, as tracing fixes them: a loop over one
    is then unrolled (with the lists it appends to); None when the graph reads no such size.
    Without them, the branches on sizes static in the export (the axes not in ``dynamic``) are
    decided (:mod:`.static_conditions`)."""
    is_module = isinstance(scripted, torch.jit.ScriptModule)
    graph = scripted.inlined_graph if is_module else scripted.graph.copy()
    if not is_module:  # (the functions it calls, F.layer_norm or torch.norm, inlined too)
        torch._C._jit_pass_inline(graph)
    if graph.findNode("prim::fork", True) is not None:  # (torch.jit.fork's call, in place)
        torch._C._jit_pass_inline_fork_wait(graph)
        torch._C._jit_pass_inline(graph)
    quirks.in_scripted_graph(graph)
    _bind_arguments(graph, args, _defaults(scripted, len(args)), 1 if is_module else 0)
    tensors = [t for arg in args for t in (arg if is_tensor_sequence(arg) else [arg])
               if isinstance(t, torch.Tensor)]
    if is_module:
        _fold_training_flags(graph, scripted)
        _forward_attribute_writes(graph, graph.block(), next(graph.inputs()), scripted)
    distinct = len({id(t) for t in tensors}) == len(tensors)
    for _ in range(4):
        folded = _fold_dtypes(graph, tensors, 1 if is_module else 0,
                              scripted if is_module else None)
        if not folded:
            break
        # Branches the folds decide may leave more dtypes known (a scripted
        # nn.TransformerEncoder's second layer checks the dtype of the first's output).
        if graph.findNode("prim::If", True) is not None:
            decide_branches(graph, distinct)
    if fold_static_size_conditions(graph, tensors, 1 if is_module else 0,
                                   static_sizes if static_sizes is not None else dynamic):
        decide_branches(graph, distinct)
    _fold_split_counts(graph)
    if _fold_known_list_items(graph):  # (``for t in [x, y]: if t is not None``, unrolled)
        decide_branches(graph, distinct)
    _drop_sole_list_copies(graph)
    if static_sizes is not None:
        folded = _fold_sizes(graph, tensors, 1 if is_module else 0, static_sizes)
        if not _unroll_branching_list_loops(graph) and not folded:
            return None
        # (the sizes the unrolled iterations read, x.size(i), and the lengths of the lists
        # of sizes they built, and their items read: ``if y[0] < 5`` of list(range(3)))
        _fold_sizes(graph, tensors, 1 if is_module else 0, static_sizes)
        _fold_split_counts(graph)
        if _fold_known_list_items(graph):
            torch._C._jit_pass_constant_propagation(graph)
            decide_branches(graph, distinct)
    functionalize_writes(graph)
    return _ConverterState(
        ts_model=scripted, ts_graph=graph,
        name_to_param=dict(scripted.named_parameters()) if is_module else {},
        name_to_buffer=dict(scripted.named_buffers()) if is_module else {},
        name_to_non_tensor_attributes={}, name_to_constant={}, distinct_inputs=distinct)


def _defaults(scripted, given: int) -> list:
    """The default values of the parameters after the ``given`` first (``y=None``), up to the
    first without one: what the call leaves out."""
    try:
        function = scripted.forward if isinstance(scripted, torch.jit.ScriptModule) else scripted
        arguments = function.schema.arguments
    except (AttributeError, RuntimeError):
        return []
    if arguments and arguments[0].name == "self":
        arguments = arguments[1:]
    defaults = []
    for argument in arguments[given:]:
        if not argument.has_default_value():
            break
        defaults.append(argument.default_value)
    return defaults


def _fold_dtypes(graph: torch._C.Graph, tensors: list, first: int,
                 module: torch.jit.ScriptModule | None) -> bool:
    """Reads of the dtype and device of the tensor inputs and of the module's parameters and
    buffers (``prim::dtype(x)``, which ``x[i] = 0.0`` makes; F.embedding_bag's check of its
    weight's dtype, which swaps its arguments), whether they are floating point and their ranks
    (F.kl_div's ``input.dim() != 0``) become constants of the example's: the converter's own
    helper for them cannot run inside a branch or loop body, nor convert a branch returning a
    weight."""
    inputs = list(graph.inputs())[first:]
    if len(inputs) != len(tensors):
        return False
    known_tensors = list(zip(inputs, tensors))
    if module is not None:
        known_tensors += _attribute_tensors(graph, module)
    folded = False
    for value, tensor in known_tensors:
        for use in list(value.uses()):
            reader = use.user
            if reader.kind() == "prim::device":
                known = tensor.device
            elif reader.kind() == "aten::is_floating_point":
                known = tensor.is_floating_point()
            elif reader.kind() == "aten::dim":  # (an ONNX input's rank is fixed too)
                known = tensor.dim()
            elif reader.kind() == "aten::size" and reader.inputsSize() == 1:
                _list_sizes(graph, reader, tensor.dim())
                continue
            else:
                continue
            fold_to_constant(graph, reader, known)
            folded = True
    # (the dtype of these tensors and of what is derived from them)
    folded = _fold_derived_dtypes(graph, known_tensors) or folded
    if folded:
        torch._C._jit_pass_constant_propagation(graph)
    return folded


# Ops whose result has the dtype of their first input (views, copies, writes into it).
_SAME_DTYPE = {f"aten::{name}" for name in (
    "select", "slice", "narrow", "view", "reshape", "clone", "contiguous", "unsqueeze",
    "squeeze", "transpose", "permute", "t", "expand", "expand_as", "flatten", "detach",
    "repeat", "flip", "roll", "neg", "abs", "copy", "copy_", "select_scatter",
    "slice_scatter", "masked_fill", "masked_fill_", "index_put", "index_put_", "fill_",
    "zero_", "index", "__getitem__", "clamp", "relu", "unflatten")}
# Ops whose result, from floating inputs of one dtype, has that dtype (numbers given with
# them do not promote a floating tensor): a scripted transformer layer's chain of them.
_FLOATS_KEPT = {f"aten::{name}" for name in (
    "add", "sub", "mul", "div", "layer_norm", "linear", "dropout", "gelu", "softmax", "matmul",
    "bmm", "baddbmm", "scaled_dot_product_attention", "tanh", "sigmoid", "silu")}
_FACTORIES = {f"aten::{name}" for name in (
    "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
    "new_zeros", "new_ones", "new_empty", "new_full", "arange", "eye")}


def _fold_derived_dtypes(graph: torch._C.Graph, known_tensors: list) -> bool:
    """``prim::dtype`` of a value made from a known tensor by ops that keep its dtype, or by
    a factory given a constant dtype (``mask[1] = True`` on ``torch.zeros(n,
    dtype=torch.bool)`` in a branch), becomes that constant, and so does
    ``is_floating_point`` of it (F.multi_head_attention_forward's check of a mask it made
    float); whether there was one."""
    sources = {value.debugName(): int(JitScalarType.from_dtype(tensor.dtype))
               for value, tensor in known_tensors}
    folded = False
    readers = [*graph.findAllNodes("prim::dtype", True),
               *graph.findAllNodes("aten::is_floating_point", True)]
    for reader in readers:
        dtype = _dtype_of(reader.inputsAt(0), sources)
        if dtype is None:
            continue
        fold_to_constant(graph, reader, dtype if reader.kind() == "prim::dtype"
                         else dtype in _FLOATING)
        folded = True
    return folded


_FLOATING = {int(JitScalarType.from_dtype(t)) for t in (torch.float16, torch.bfloat16,
                                                          torch.float32, torch.float64)}


def _dtype_of(value: torch._C.Value, sources: dict, depth: int = 0) -> int | None:
    """The ScalarType number of ``value`` when the graph fixes it; else None."""
    if value.debugName() in sources:
        return sources[value.debugName()]
    node = value.node()
    if depth > 50:
        return None
    if node.kind() in ("prim::ListUnpack", "prim::TupleUnpack", "prim::TupleIndex"):
        part = unpacked_item(value)
        return _dtype_of(part, sources, depth + 1) if part is not None else None
    if node.outputsSize() != 1:
        return None
    if node.kind() in _SAME_DTYPE and node.inputsSize() > 0:
        return _dtype_of(node.inputsAt(0), sources, depth + 1)
    if node.kind() in _FLOATS_KEPT:
        found = {_dtype_of(v, sources, depth + 1) for v in node.inputs()
                 if isinstance(v.type(), torch._C.TensorType) and
                 v.node().kind() != "prim::GetAttr"}  # (weights: the module's own dtype)
        dtype = found.pop() if len(found) == 1 else None
        dtype = dtype if dtype in _FLOATING else None
        sources[value.debugName()] = dtype  # (each value once: chains branch and rejoin)
        return dtype
    if node.kind() in _FACTORIES:
        schema = node.schema()
        names = [argument.name for argument in torch._C.parse_schema(schema).arguments] \
            if schema != "(no schema)" else []
        if "dtype" in names:
            dtype = node.inputsAt(names.index("dtype"))
            if dtype.node().kind() == "prim::Constant" and isinstance(dtype.toIValue(), int):
                return dtype.toIValue()
    return None


def _forward_attribute_writes(graph, block, module_value, module,
                              written: dict | None = None) -> dict:
    """``self.count = self.count + x`` (a module's attribute set in its forward, in a loop
    that scripting unrolled): each later read of the attribute in the same block reads the
    value written, and the writes go (the module's state after the call is no output). A
    branch's writes become outputs of the branch, read after it. Returns the attributes'
    values at the block's end."""
    written = {} if written is None else written
    for node in list(block.nodes()):
        inner = [_forward_attribute_writes(graph, b, module_value, module, dict(written))
                 for b in node.blocks()]
        changes = [{path: value for path, value in ends.items() if written.get(path) is not value}
                   for ends in inner]
        if node.kind() == "prim::If" and any(changes):
            _branch_writes_as_outputs(graph, node, changes, written, module_value, module)
            continue
        for path in (path for change in changes for path in change):
            written[path] = _SET_IN_A_LOOP  # (a loop body's writes: no value of it here)
        if any(n.kind() == "prim::SetAttr" for n in nodes_inside(node)):
            written.clear()  # (what a branch or loop body wrote is not known here)
            continue
        path = _attribute_path(node, module_value) if node.kind() in (
            "prim::GetAttr", "prim::SetAttr") else None
        if path is None:
            continue
        if node.kind() == "prim::SetAttr":
            written[path] = node.inputsAt(1)
            node.destroy()
        elif path in written:
            if written[path] is _SET_IN_A_LOOP:
                raise CaptureError(
                    f"the model sets self.{'.'.join(path)} in a loop and reads it after the "
                    "loop: ONNX has no form of a module's state a loop changes. Carry it as a "
                    "local variable of the loop instead")
            node.output().replaceAllUsesWith(written[path])
            node.destroy()
    return written


_SET_IN_A_LOOP = object()


def _branch_writes_as_outputs(graph, node, changes: list[dict], written: dict,
                              module_value, module) -> None:
    """The attributes the blocks of the prim::If ``node`` set (``changes``, per block) as new
    outputs of it: each block returns the value it set, or the one from before the branch
    (a read of the attribute in the block, when the forward had not set it yet)."""
    for path in dict.fromkeys(path for change in changes for path in change):
        before = written.get(path)
        if before is _SET_IN_A_LOOP or any(c.get(path) is _SET_IN_A_LOOP for c in changes):
            written[path] = _SET_IN_A_LOOP
            continue
        kind = next(c[path] for c in changes if path in c).type()
        if before is None and len(path) != 1:
            raise CaptureError(
                f"the model sets self.{'.'.join(path)} in one branch of an if "
                f"({source_line(node)}): set it in each branch, or on the model itself")
        output = node.addOutput()
        output.setType(kind)
        for block, change in zip(node.blocks(), changes):
            value = change.get(path, before)
            if value is None and not isinstance(kind, torch._C.TensorType):
                with graph.insert_point_guard(block.returnNode()):  # (a number: its value)
                    value = graph.insertConstant(getattr(module, path[0]))
            elif value is None:  # (read in the block: the converter looks tensors up there)
                read = graph.create("prim::GetAttr", [module_value])
                read.s_("name", path[0])
                read.insertBefore(block.returnNode())
                read.output().setType(kind)
                value = read.output()
            block.registerOutput(value)
        written[path] = output


def _fold_training_flags(graph: torch._C.Graph, module: torch.jit.ScriptModule) -> None:
    """``self.training`` (of the model or a submodule) becomes the mode the export put that
    module in, deciding its branches: freezing keeps the flag of a module in training mode
    (training=TRAINING), and BatchNorm's count update in a branch on it is no branch the
    converter takes."""
    module_value = next(graph.inputs())
    for node in graph.findAllNodes("prim::GetAttr", True):
        path = _attribute_path(node, module_value) if node.s("name") == "training" else None
        if path is None:
            continue
        owner = module
        for name in path[:-1]:
            owner = getattr(owner, name, None)
        if isinstance(owner, torch.jit.ScriptModule) and isinstance(owner.training, bool):
            fold_to_constant(graph, node, owner.training)


def _attribute_path(node, module_value) -> tuple | None:
    """The attribute path from the module that ``node`` (GetAttr, SetAttr) reads or writes;
    None when its object is not reached from the module by attribute reads."""
    path, at = [node.s("name")], node.inputsAt(0)
    while at.debugName() != module_value.debugName():
        owner = at.node()
        if owner.kind() != "prim::GetAttr":
            return None
        path.append(owner.s("name"))
        at = owner.inputsAt(0)
    return tuple(reversed(path))


def _attribute_tensors(graph: torch._C.Graph, module: torch.jit.ScriptModule) -> list:
    """(value, tensor) of each ``prim::GetAttr`` of ``graph`` (anywhere) that reads a
    parameter or buffer of ``module``."""
    found = []
    module_value = next(graph.inputs())
    for node in graph.findAllNodes("prim::GetAttr", True):
        path = _attribute_path(node, module_value)
        if path is None:
            continue
        target = module
        for name in path:
            target = getattr(target, name, None)
        if isinstance(target, torch.Tensor):
            found.append((node.output(), target))
    return found


def _list_sizes(graph: torch._C.Graph, reader: torch._C.Node, rank: int) -> None:
    """``x.size()`` of an input of known rank as the list ``[x.size(0), ..., x.size(r-1)]``:
    each size stays a read of the run, while the list's length is known, so a loop over it
    (``for d in x.size()``) is unrolled and slices and joins of it (``x.size()[2:] +
    y.size()[3:]``) are lists of known items."""
    with graph.insert_point_guard(reader):
        sizes = []
        for axis in range(rank):
            size = graph.create("aten::size", [reader.inputsAt(0), graph.insertConstant(axis)])
            size.output().setType(torch._C.IntType.get())
            sizes.append(graph.insertNode(size).output())
        listed = graph.insertNode(graph.create("prim::ListConstruct", sizes))
        listed.output().setType(torch._C.ListType.ofInts())
    reader.output().replaceAllUsesWith(listed.output())
    reader.destroy()


def _fold_split_counts(graph: torch._C.Graph) -> None:
    """``len(x.split([3, 4, 1], d))``, the count of a loop over the pieces: the length of the
    list of sizes, so the loop is unrolled as one over a constant range. So is the length of
    a list made in the graph (``for t in [x, y]``)."""
    for length in graph.findAllNodes("aten::len"):
        split = length.input().node()
        if split.kind() == "prim::ListConstruct":
            if (count := _length_built(split, length)) is not None:
                fold_to_constant(graph, length, count)
            continue
        if split.kind() in ("aten::items", "aten::keys", "aten::values"):
            # (``for k, v in d.items()`` of a dict the graph made and never edits)
            if (count := _keys_made(split.input().node())) is not None:
                fold_to_constant(graph, length, count)
            continue
        if split.kind() not in ("aten::split", "aten::split_with_sizes") or \
                split.inputsSize() < 2:
            continue
        sizes = split.inputsAt(1).node()
        if sizes.kind() == "prim::ListConstruct":  # (its items may be values of the run)
            if (count := _length_built(sizes, split)) is not None:
                fold_to_constant(graph, length, count)
        elif sizes.kind() == "prim::Constant" and isinstance(sizes.output().toIValue(), list):
            fold_to_constant(graph, length, len(sizes.output().toIValue()))


def _length_built(made: torch._C.Node, read: torch._C.Node) -> int | None:
    """The length of the list ``made`` when ``read`` reads it: its items, and one per append
    in its block before ``read`` (of a loop the graph unrolled); None when anything else edits
    it (an append in a loop: folding its length as made dropped the loop over the pieces)."""
    count = made.inputsSize()
    for use in made.output().uses():
        user = use.user
        if user.kind() == "aten::append" and user.owningBlock() == made.owningBlock() and \
                user.isBefore(read):
            count += 1
        elif user.kind() in _LIST_EDITS | _ALIASES | {"aten::remove", "aten::append"}:
            return None
    return count


def _keys_made(made: torch._C.Node) -> int | None:
    """The number of keys of a dict ``made`` by prim::DictConstruct of constant keys that no
    use edits or passes on; None otherwise."""
    if made.kind() != "prim::DictConstruct":
        return None
    keys = list(made.inputs())[::2]
    if any(key.node().kind() != "prim::Constant" for key in keys) or any(
            use.user.kind() not in ("aten::items", "aten::keys", "aten::values", "aten::len",
                                    "aten::__getitem__", "aten::get", "aten::__contains__")
            for use in made.output().uses()):
        return None
    return len({key.toIValue() for key in keys})


# Uses that may let a list be edited under another name (held by another list, carried by a
# loop, returned by a branch or a call).
_ALIASES = {"prim::ListConstruct", "prim::TupleConstruct", "prim::DictConstruct", "prim::Loop",
            "prim::Return", "prim::CallFunction", "prim::CallMethod", "prim::SetAttr",
            "aten::_set_item", "aten::sort"}


def _fold_known_list_items(graph: torch._C.Graph) -> bool:
    """Items read by a constant index (``y[0]``) of a list the block built, from its items and
    appends (an unrolled ``list(range(3))``, ``for t in [x, y]``), up to the first other use
    of it, become the values put there; whether there was one."""
    folded = False
    for made in graph.findAllNodes("prim::ListConstruct"):
        items = list(made.inputs())
        listed = made.output()
        block = list(made.owningBlock().nodes())
        for node in block[block.index(made) + 1:]:
            uses = [use for use in listed.uses() if use.user == node or within(use.user, node)]
            if not uses:
                continue
            if node.kind() == "aten::append" and len(uses) == 1:
                items.append(node.inputsAt(1))
            elif node.kind() == "aten::__getitem__" and \
                    node.inputsAt(1).node().kind() == "prim::Constant" and \
                    isinstance(index := node.inputsAt(1).toIValue(), int) and \
                    -len(items) <= index < len(items) and \
                    items[index].type().isSubtypeOf(node.output().type()):
                node.output().replaceAllUsesWith(items[index])
                node.destroy()
                folded = True
            else:
                break
    return folded


def _drop_sole_list_copies(graph: torch._C.Graph) -> None:
    """``list(torch.unbind(x))``: the copy of a list nothing else reads is that list (torch's
    converter fails on ``aten::list``)."""
    for copy in graph.findAllNodes("aten::list"):
        source = copy.input()
        if len(source.uses()) == 1 and source.type().kind() == "ListType":
            copy.output().replaceAllUsesWith(source)
            copy.destroy()


def _fold_sizes(graph: torch._C.Graph, tensors: list, first: int, dynamic: set) -> bool:
    """Reads of the tensor inputs' rank and of the sizes of their static axes become constants
    of the example's; whether there was one."""
    inputs = list(graph.inputs())[first:]
    if len(inputs) != len(tensors):
        return False
    folded = False
    for position, (value, tensor) in enumerate(zip(inputs, tensors)):
        axes = {axis for (k, axis) in dynamic if k == position}
        for use in list(value.uses()):
            if use.user.kind() in ("aten::unbind", "aten::split", "aten::chunk"):
                folded |= _fold_piece_count(graph, use.user, tensor, axes)
                continue
            known = _known_size(use.user, tensor, axes)
            if known is None:
                continue
            fold_to_constant(graph, use.user, known)
            folded = True
    if folded:
        torch._C._jit_pass_constant_propagation(graph)
    return folded


def _fold_piece_count(graph: torch._C.Graph, node: torch._C.Node, tensor: torch.Tensor,
                      dynamic_axes: set) -> bool:
    """``len(x.unbind(d))``, ``len(x.split(s, d))`` or ``len(x.chunk(c, d))`` (the count of
    ``for row in x.unbind(0)``) as the example's count along a static axis ``d``: the loop over
    the pieces is then unrolled; whether there was one."""
    kind = node.kind()
    where = 1 if kind == "aten::unbind" else 2
    axis = node.inputsAt(where).toIValue() if node.inputsSize() > where else 0
    if not isinstance(axis, int) or not -tensor.dim() <= axis < tensor.dim() or \
            axis % tensor.dim() in dynamic_axes:
        return False
    if kind == "aten::unbind":
        count = tensor.shape[axis]
    else:
        size = node.inputsAt(1).toIValue() if node.inputsSize() > 1 else None
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            return False  # (sizes as a list: _fold_split_counts)
        pieces = tensor.split(size, axis) if kind == "aten::split" else tensor.chunk(size, axis)
        count = len(pieces)
    lengths = [use.user for use in node.output().uses() if use.user.kind() == "aten::len"]
    for length in lengths:
        fold_to_constant(graph, length, count)
    return bool(lengths) | _unpacked_when_edited(graph, node, count)


def _unpacked_when_edited(graph: torch._C.Graph, node: torch._C.Node, count: int) -> bool:
    """The pieces of a static axis that the script edits as a list (``xs =
    list(x.unbind(0)); xs.insert(1, y)``) as a list of ``count`` items, which the converter
    edits item by item (it held the pieces as one value, and the edit failed in propagation:
    ``aten::insert() Expected a value of type 'List[t]'``); whether they were."""
    if not any(use.user.kind() in _LIST_EDITS for use in node.output().uses()):
        return False
    pieces = node.output()
    unpack = graph.create("prim::ListUnpack", [pieces], count)
    unpack.insertAfter(node)
    for item in unpack.outputs():
        item.setType(pieces.type().getElementType())
    items = graph.create("prim::ListConstruct", list(unpack.outputs()))
    items.insertAfter(unpack)
    items.output().setType(pieces.type())
    pieces.replaceAllUsesWith(items.output())
    unpack.replaceInput(0, pieces)
    return True


# The edits of a list: those a branch's check counts, and ``ys += [y]``.
_LIST_EDITS = _EDITS_IN_PLACE | {"aten::add_"}


def _unroll_branching_list_loops(graph: torch._C.Graph) -> bool:
    """Loops of a constant count that edit a list inside a branch (``if i % 2 == 0:
    ys.append(y)``) or other than by appending (``ys.insert(0, y)``), unrolled in the
    TorchScript graph, each iteration's branch then decided by constant propagation: torch's
    converter unrolls such a loop but drops the edits made in a branch (the list stays empty)
    or fails on the others, and ONNX Loop carries no list. So are loops carrying an Optional
    (``t = x[i] if t is None else t + x[i]``): unrolled, each check of it is decided.
    TorchScript's own unrolling pass leaves loops of many iterations partly rolled, which
    are then refused as before. So are loops building a list read after them other than as
    stacked items (:func:`_list_read_after_as_items`). Whether there was such a loop."""
    loops = [loop for loop in graph.findAllNodes("prim::Loop")
             if loop.inputsAt(0).node().kind() == "prim::Constant"
             and (any(_edits_in_branch(block) or _edits_list(block, _LIST_EDITS - {"aten::append"})
                      for block in loop.blocks()) or _list_edited_after(loop)
                  or _list_read_after_as_items(loop)
                  or any(isinstance(value.type(), torch._C.OptionalType)
                         for value in loop.outputs()))]
    if not loops:
        return False
    torch._C._jit_pass_constant_loop_unrolling(graph)
    for _ in range(3):  # one pass leaves comparisons of constants it made itself
        torch._C._jit_pass_constant_propagation(graph)
    return True


def _list_edited_after(loop: torch._C.Node) -> bool:
    """Whether a list the loop appends to is edited after it other than by appending
    (``ys.clear()``, ``ys.pop()``), or appended to in a branch (``y = list(range(n))``, then
    ``if c: y.append(10)``): the scan output the loop would leave takes no such edit."""
    for node in nodes_inside(loop):
        if node.kind() != "aten::append" or within(node.inputsAt(0).node(), loop):
            continue
        if any((use.user.kind() in _LIST_EDITS - {"aten::append"} or
                use.user.kind() == "aten::append" and use.user.owningBlock().owningNode())
               and not within(use.user, loop) for use in node.inputsAt(0).uses()):
            return True
    return False


# What reads a list a loop built as its items stacked (list_scans.StackedList).
_READS_OF_ROWS = {"aten::stack", "aten::cat", "aten::len", "aten::__getitem__", "aten::slice",
                  "prim::Return"}


def _list_read_after_as_items(loop: torch._C.Node) -> bool:
    """Whether a list the loop builds (carried, ``ys += [y]``) is read after it other than
    as its stacked items (``x.split(sizes)`` of the ints it appended), or holds other than
    tensors: built in a loop of a constant count, it is a list of values once unrolled."""
    if any(node.kind() == "aten::append" and not within(node.inputsAt(0).node(), loop) and
           node.inputsAt(0).type().getElementType().kind() != "TensorType"
           for node in nodes_inside(loop)):
        return True  # (numbers, ``y = list(range(3))`` then ``if y[0] < 5``; tuples)
    return any(isinstance(output.type(), torch._C.ListType) and any(
        use.user.kind() not in _READS_OF_ROWS for use in output.uses())
        for output in loop.outputs()) or any(
        node.kind() == "aten::append" and not within(node.inputsAt(0).node(), loop) and any(
            use.user.kind() not in _READS_OF_ROWS | _LIST_EDITS and not within(use.user, loop)
            for use in node.inputsAt(0).uses())
        for node in nodes_inside(loop))


def _edits_in_branch(block) -> bool:
    return any(node.kind() == "prim::If" and any(_edits_list(b) for b in node.blocks())
               or any(_edits_in_branch(b) for b in node.blocks()) for node in block.nodes())


def _edits_list(block, edits: set = _LIST_EDITS) -> bool:
    return any(node.kind() in edits and node.inputsSize() > 0
               and isinstance(node.inputsAt(0).type(), torch._C.ListType)
               or any(_edits_list(b, edits) for b in node.blocks()) for node in block.nodes())


def _known_size(reader: torch._C.Node, tensor: torch.Tensor, dynamic_axes: set):
    """What ``reader`` (aten::dim, aten::size, aten::len of ``tensor``) reads, when no dynamic
    axis decides it; else None."""
    kind = reader.kind()
    if kind == "aten::dim":
        return tensor.dim()
    if kind == "aten::size" and reader.inputsSize() == 1:
        return None if dynamic_axes else list(tensor.shape)
    if kind == "aten::len" and tensor.dim() > 0 and 0 not in dynamic_axes:
        return tensor.shape[0]
    if kind != "aten::size" or reader.inputsSize() != 2:
        return None
    axis = reader.inputsAt(1).toIValue()
    if not isinstance(axis, int) or not -tensor.dim() <= axis < tensor.dim():
        return None
    axis %= tensor.dim()
    return None if axis in dynamic_axes else tensor.shape[axis]


def _of_rank(tensor: torch.Tensor) -> torch._C.TensorType:
    """A tensor input's type: the example's rank (its sizes may be dynamic)."""
    return torch._C.TensorType.get().with_sizes([None] * tensor.dim())


def _bind_arguments(graph: torch._C.Graph, args: tuple, defaults: list, first: int) -> None:
    """Replace the graph inputs that ``args`` gives numbers, bools, strings or None (after the
    ``first`` inputs, the module itself) with constants of those values, and a list or tuple
    of tensors with one input per tensor, in the order the tensors are flattened. The
    parameters after them take their ``defaults`` as constants (a tensor too)."""
    inputs = list(graph.inputs())[first:]
    order = list(graph.inputs())[:first]
    replaced = []
    with graph.insert_point_guard(next(iter(graph.nodes()), graph.return_node())):
        for k, (value, arg) in enumerate(zip(inputs, (*args, *defaults))):
            if isinstance(arg, torch.Tensor) and k < len(args):
                value.setType(_of_rank(arg))  # (for the ranks the code reads: ranks.py)
                order.append(value)
                continue
            if is_tensor_sequence(arg) and k < len(args):
                elements = [graph.addInput() for _ in arg]
                for element, tensor in zip(elements, arg):
                    element.setType(_of_rank(tensor))
                kind = "prim::ListConstruct" if isinstance(arg, list) else "prim::TupleConstruct"
                built = graph.insertNode(graph.create(kind, elements))
                declared = value.type()  # (Optional[List[Tensor]] given a list: that list)
                built.output().setType(declared.getElementType()
                                       if isinstance(declared, torch._C.OptionalType)
                                       else declared)
                value.replaceAllUsesWith(built.output())
                order += elements
            else:
                value.replaceAllUsesWith(graph.insertConstant(arg))
            replaced.append(value)
    if not replaced:
        return
    for value in replaced:
        graph.eraseInput(list(graph.inputs()).index(value))
    current = list(graph.inputs())
    graph.permuteInputs([current.index(value) for value in order])
    # Branches on those values (``if flag and mode == "scale"``) are decided now, as tracing
    # decides them.
    torch._C._jit_pass_constant_propagation(graph)
