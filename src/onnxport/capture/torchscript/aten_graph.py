"""The converted graph with each call on its ATen overload, its weights made placeholders
(:func:`_aten_graph`), as propagation runs it."""

from __future__ import annotations

import builtins
import contextlib
import operator
from typing import Any

import torch
from torch._export.converter import (execute_subgraph_from_prim_loop, get_dtype_as_int,
                                     list_add, list_append)

from onnxport.capture.torchscript.convert import _shape_as_tensor, _tensor
from onnxport.capture.torchscript.fx_helpers import _attribute
from onnxport.capture.torchscript.list_scans import (INDEXED_LIST_EDITS, LIST_EDITS, LIST_JOINS,
                                                     edits_known_list)
from onnxport.capture.torchscript.loops import prim_loop
from onnxport.capture.torchscript.sizes import _size_read_back
from onnxport.errors import CaptureError


def _weight_kind(graph_module: torch.fx.GraphModule, target: str) -> tuple[Any, str]:
    """The input kind of the converted graph's tensor attribute ``target`` in an exported
    program, and the prefix of its placeholder's name (torch.export's)."""
    from torch.export.graph_signature import InputKind

    if target in getattr(graph_module, "_onnxport_parameters", ()):
        return InputKind.PARAMETER, "p_"
    if target in getattr(graph_module, "_onnxport_buffers", ()):
        return InputKind.BUFFER, "b_"
    return InputKind.CONSTANT_TENSOR, "c_"


def _aten_graph(graph_module: torch.fx.GraphModule,
                weights: list[tuple[torch.fx.Node, str, torch.Tensor]] | None = None,
                ) -> torch.fx.Graph | None:
    """The converted graph with each call on its ATen overload, the lists the converter
    unpacks and the sizes the tracer read back resolved; None when a call is no ATen op.

    Given ``weights``, each tensor attribute read (a weight, a constant) becomes a
    placeholder before the graph's inputs, named by :func:`_weight_kind`, and (that
    placeholder, its attribute's path, its value) is appended to ``weights``: made so as the
    graph is copied rather than copied and then replaced (a tenth of the propagation of a
    model of many weights)."""
    graph = torch.fx.Graph()
    if _copy_nodes(graph, graph_module, {}, weights) is _REFUSED:
        return None
    for node in list(graph.nodes):  # (the bodies of loops inlined above; a dtype read for a
        if (node.op == "get_attr" or node.target is get_dtype_as_int) and not node.users:
            graph.erase_node(node)  # scalar of that dtype, which reads the tensor itself)
    return graph


_REFUSED = object()  # a call that is no ATen op: the graph cannot be propagated here


def _copy_nodes(graph: torch.fx.Graph, module: torch.fx.GraphModule, remap: dict,
                weights: list | None, inlined: bool = False,
                top: torch.fx.GraphModule | None = None) -> Any:
    """Copy ``module``'s nodes into ``graph`` as :func:`_aten_graph` describes; ``remap``
    holds the values of an inlined body's inputs, ``top`` is the module ``graph`` is made
    for (``module`` at the top). Returns what an inlined body returns, ``_REFUSED`` when a
    call is no ATen op."""
    top = module if top is None else top
    first = None  # the first input, before which weights become inputs (top level)
    for node in module.graph.nodes:
        if weights is not None and node.op == "get_attr":
            value = _attribute(module, node.target)
            if isinstance(value, torch.Tensor):
                _, prefix = _weight_kind(module, node.target)
                with graph.inserting_before(first) if first is not None else \
                        contextlib.nullcontext():  # (before any input: in order, at the end)
                    remap[node] = graph.placeholder(prefix + node.target.replace(".", "_"))
                weights.append((remap[node], node.target, value))
                continue
        if node.op == "placeholder" and node in remap:
            continue  # an inlined body's input: its value is known
        if node.op == "get_attr" and inlined:
            if all(user.target is execute_subgraph_from_prim_loop for user in node.users):
                continue  # the body of an unrolled inner loop: inlined where it is called
            # The body of a loop kept (a long one) or a branch: an attribute of the body,
            # made one of the graph's module too.
            remap[node] = _hoisted(graph, top, _attribute(module, node.target), node.target)
            if remap[node] is None:
                return _REFUSED
            continue
        if node.op == "output" and inlined:
            return torch.fx.node.map_arg(node.args[0], lambda n: remap[n])
        handled = _remapped(graph, module, node, remap, top)
        if handled is _REFUSED:
            return _REFUSED
        if handled:
            continue
        target = None
        if node.op == "call_function":
            target = _call_target(node)
            if target is None:
                return _REFUSED
        elif node.op not in ("placeholder", "get_attr", "output"):
            return _REFUSED  # a call_module: a branch or loop body of a scripted model
        remap[node] = graph.node_copy(node, lambda n: remap[n])
        if node.op == "placeholder" and first is None:
            first = remap[node]
        if node.op == "call_function":
            remap[node].target = target
        if node.target is torch.cond and not _returns_several(_attribute(module,
                                                                         node.args[1].target)):
            # The converter uses a one-output cond as that output; torch's cond returns a
            # tuple.
            with graph.inserting_after(remap[node]):
                remap[node] = graph.call_function(operator.getitem, (remap[node], 0))
    return None


def _remapped(graph: torch.fx.Graph, module: torch.fx.GraphModule, node: torch.fx.Node,
              remap: dict, top: torch.fx.GraphModule) -> Any:
    """For a node that is no call to copy (an item of a list, an unrolled loop iteration, a
    size read back, a number made a tensor): its value entered in ``remap`` and True, or
    ``_REFUSED``; False for any other node."""
    if node.target is operator.getitem and isinstance(node.args[0], (list, tuple)):
        # An item of a list the converter built (a list unpacked): that item itself.
        index = remap.get(node.args[1]) if isinstance(node.args[1], torch.fx.Node) \
            else node.args[1]
        if not isinstance(index, int):
            return _REFUSED
        item = node.args[0][index]
        if isinstance(item, (bool, int, float)):  # a number of a list constant (a folded size)
            remap[node] = item
            return True
        if not isinstance(item, torch.fx.Node):
            return _REFUSED
        remap[node] = remap[item]
        return True
    if node.target is operator.getitem and isinstance(remap.get(node.args[0]), (list, tuple)):
        index = remap.get(node.args[1]) if isinstance(node.args[1], torch.fx.Node) \
            else node.args[1]
        if not isinstance(index, int):
            return _REFUSED
        remap[node] = remap[node.args[0]][index]  # of a list or an inlined body
        return True
    if node.target is torch.ops.aten.slice.t:
        return _sliced_list(graph, node, remap)
    if node.target in _NUMBER_ARITHMETIC and not node.kwargs:
        # Arithmetic of numbers known here (``arr[-1 - i]`` in an unrolled iteration): done.
        args = [remap[a] if isinstance(a, torch.fx.Node) else a for a in node.args]
        if all(type(a) in (bool, int, float) for a in args):
            try:
                remap[node] = node.target(*args)
                return True
            except ArithmeticError:  # (1 // 0: left to the run, which raises as torch does)
                pass
    if node.target in _RANGE_ARITHMETIC:
        # range(lo, hi, step)'s length and index as Python arithmetic, which fake values
        # follow on symbolic sizes (torch's ops take plain ints) and translation has.
        args = [remap[a] if isinstance(a, torch.fx.Node) else a for a in node.args]
        remap[node] = _RANGE_ARITHMETIC[node.target](graph, *args)
        return True
    if node.target in LIST_EDITS and isinstance(remap.get(node.args[0]), (list, tuple)):
        return _edited_list(graph, node, remap)
    if node.target is list_append:  # ys.append(y) in a loop the converter unrolled
        items = _list_value(node.args[0], remap)
        item = node.args[1]
        item = remap.get(item) if isinstance(item, torch.fx.Node) else item
        if items is None or item is None:
            return _REFUSED
        remap[node] = [*items, item]
        return True
    if node.target in LIST_JOINS or node.target is list_add:
        # Lists joined (``res += [y]`` in a loop the converter unrolled): the items joined.
        parts = [_list_value(argument, remap) for argument in node.args[:2]]
        if any(part is None for part in parts):
            return _REFUSED
        remap[node] = [*parts[0], *parts[1]]
        return True
    if node.target is execute_subgraph_from_prim_loop:
        # An iteration of a loop of known count, which torch's converter unrolls into
        # calls of its body: the body's calls, inlined.
        body = _attribute(module, node.args[0].target)
        iteration, local_count = node.args[1], node.args[2]
        values = torch.fx.node.map_arg(list(node.args[3:]), lambda n: remap[n])
        inputs = [*values[local_count:], iteration, *values[:local_count]]
        inner = dict(zip([n for n in body.graph.nodes if n.op == "placeholder"], inputs))
        result = _copy_nodes(graph, body, inner, None, inlined=True, top=top)
        if result is _REFUSED:
            return _REFUSED
        remap[node] = result
        return True
    if node.target in (builtins.min, builtins.max) and len(node.args) == 1 and \
            isinstance(node.args[0], (list, tuple)) and node.args[0] and not node.kwargs:
        # min or max of a list of numbers (the count of ``for i, row in enumerate(x)``,
        # min(2**63 - 1, len)): a chain of symbolic ones, int64's largest left out of a min.
        items = [remap[a] if isinstance(a, torch.fx.Node) else a for a in node.args[0]]
        if node.target is builtins.min and len(items) > 1:
            items = [item for item in items if item != 2 ** 63 - 1] or items[:1]
        pick = torch.sym_min if node.target is builtins.min else torch.sym_max
        result = items[0]
        for item in items[1:]:
            result = graph.call_function(pick, (result, item))
        remap[node] = result
        return True
    size = _size_read_back(node)
    if size is not None:
        remap[node] = remap[size]
        return True
    scalar = _scalar_tensor_call(node)
    if scalar is not None:
        remap[node] = graph.call_function(torch.ops.aten.scalar_tensor.default, *scalar)
        remap[node].meta = dict(node.meta)
        return True
    like = _scalar_like_call(node)
    if like is not None:
        # ``torch.tensor(5, dtype=bias.dtype)`` (ProphetNet's ngram mask, ``t[i] = 5`` in
        # scripted code): a 0-d tensor of that tensor's dtype and device.
        remap[node] = graph.call_function(torch.ops.aten.new_full.default,
                                          (remap[like[0]], [], like[1]))
        remap[node].meta = dict(node.meta)
        return True
    return False


def _derive_index(graph: torch.fx.Graph, index, start, step):
    """start + index * step: the ``index``-th value of a range."""
    return graph.call_function(operator.add, (start, graph.call_function(
        operator.mul, (index, step))))


def _range_length(graph: torch.fx.Graph, low, high, step):
    """The length of range(low, high, step) for a positive step: max(0, ceil((high - low) /
    step))."""
    span = graph.call_function(operator.sub, (high, low))
    if not (isinstance(step, int) and step == 1):
        if not isinstance(step, int) or step <= 0:
            raise CaptureError("a range with a step that is not a positive number is not "
                               "translated; give range() a positive step")
        span = graph.call_function(operator.floordiv, (graph.call_function(
            operator.add, (span, step - 1)), step))
    return graph.call_function(torch.sym_max, (span, 0))


_NUMBER_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.floordiv,
                      operator.mod, operator.neg, operator.truediv, operator.eq, operator.ne,
                      operator.lt, operator.le, operator.gt, operator.ge}
_RANGE_ARITHMETIC = {torch.ops.aten.__derive_index.default: _derive_index,
                     torch.ops.aten.__range_length.default: _range_length}
def _edited_list(graph: torch.fx.Graph, node: torch.fx.Node, remap: dict) -> Any:
    """``ys[i] = y``, ``ys.insert(i, y)``, ``del ys[i]``, ``ys.pop(i)`` on a list whose items
    are known (one a loop the converter unrolled built): done on the items (LIST_EDITS), which
    every later read sees. True, or ``_REFUSED`` for an index known only at run time (but for
    ``ys[i] = y`` on a list of tensors, :func:`_set_at_run_time_index`)."""
    items = remap[node.args[0]]
    if type(items) is not list:  # a tuple, or FX's immutable_list of a node's arguments
        items = remap[node.args[0]] = list(items)
    if node.target not in INDEXED_LIST_EDITS:  # ys.extend(zs), ys.clear(), ys.remove(2)
        others = [remap.get(a) if isinstance(a, torch.fx.Node) else a for a in node.args[1:]]
        if not edits_known_list(node.target, [items, *others]):
            return _REFUSED
        remap[node] = LIST_EDITS[node.target](items, *others)
        return True
    index = node.args[1] if len(node.args) > 1 else -1
    index = remap.get(index) if isinstance(index, torch.fx.Node) else index
    values = [remap[v] if isinstance(v, torch.fx.Node) else v for v in node.args[2:]]
    if isinstance(index, torch.fx.Node) and node.target is torch.ops.aten._set_item.t and \
            items and all(isinstance(v, torch.fx.Node) for v in (*items, *values)):
        _set_at_run_time_index(graph, items, index, values[0])
        remap[node] = items
        return True
    if not isinstance(index, int):
        return _REFUSED
    remap[node] = LIST_EDITS[node.target](items, index, *values)
    return True


def _set_at_run_time_index(graph: torch.fx.Graph, items: list, index: torch.fx.Node,
                           value: torch.fx.Node) -> None:
    """``ys[i] = y`` with ``i`` a value of the run (``res[y] = x[y]``, torch.onnx's
    test_list_set): each item becomes ``where(i == k, y, ys[k])``, ``i`` taken modulo the
    list's length as Python takes a negative index. The items of such a list are the rows a
    loop took, of one shape, the value's (a list of mixed shapes is not expected here)."""
    at = graph.call_function(torch.ops.aten.scalar_tensor.default, (index,),
                             {"dtype": torch.int64})
    at = graph.call_function(torch.ops.aten.remainder.Scalar, (at, len(items)))
    for k, item in enumerate(items):
        hit = graph.call_function(torch.ops.aten.eq.Scalar, (at, k))
        items[k] = graph.call_function(torch.ops.aten.where.self, (hit, value, item))


def _sliced_list(graph: torch.fx.Graph, node: torch.fx.Node, remap: dict) -> Any:
    """``ys[a:b:c]`` of a list in scripted code (``x.split(1)[:3]``): the items themselves
    of a list whose items are known, else Python's slice of the list the node computes (the
    pieces of a split), which fake values and translation both take. True, or ``_REFUSED``
    for bounds known only at run time."""
    given = dict(zip(("l", "start", "end", "step"), node.args)) | dict(node.kwargs)
    bounds = [given.get("start"), given.get("end"), given.get("step", 1)]
    bounds = [remap.get(b) if isinstance(b, torch.fx.Node) else b for b in bounds]
    if not all(b is None or isinstance(b, int) for b in bounds):
        return _REFUSED
    items = _list_value(given["l"], remap)
    if items is not None:
        remap[node] = items[slice(*bounds)]
    elif isinstance(given["l"], torch.fx.Node) and given["l"] in remap:
        remap[node] = graph.call_function(operator.getitem, (remap[given["l"]], slice(*bounds)))
    else:
        return _REFUSED
    return True


def _list_value(argument: Any, remap: dict) -> list | None:
    """The copied items of a list argument (a list literal, or a node that stands for a list),
    or None when it is no list of values."""
    if isinstance(argument, torch.fx.Node):  # its items are copied already
        value = remap.get(argument)
        return list(value) if isinstance(value, (list, tuple)) else None
    if not isinstance(argument, (list, tuple)):
        return None
    items = [remap.get(item) if isinstance(item, torch.fx.Node) else item for item in argument]
    return None if any(item is None for item in items) else items


def _hoisted(graph: torch.fx.Graph, top: torch.fx.GraphModule, value: Any,
             target: str) -> torch.fx.Node | None:
    """A get_attr in ``graph`` of ``value``, a body inside an inlined one, set on ``top``
    under a name of its own; None when ``value`` is no body."""
    if not isinstance(value, torch.fx.GraphModule):
        return None
    name, k = target, 0
    while hasattr(top, name):
        k += 1
        name = f"{target}_inlined_{k}"
    top.add_submodule(name, value)
    return graph.get_attr(name)


def _call_target(node: torch.fx.Node) -> Any:
    """The op a copied call makes, or None when it is no ATen op."""
    if node.target is prim_loop:
        return prim_loop
    if node.target is torch.cond:
        return torch.ops.higher_order.cond
    if node.target in (builtins.min, builtins.max) and len(node.args) == 2 and not node.kwargs:
        # min/max of two sizes (scripted code's prim::min): symbolic, not fixed to the example
        return torch.sym_min if node.target is builtins.min else torch.sym_max
    if node.target is torch.clone and len(node.args) == 1 and not node.kwargs:
        # A branch returning its input unchanged (cond's outputs must not alias its inputs).
        return torch.ops.aten.clone.default
    if node.target is get_dtype_as_int:
        # ``x.dtype`` in scripted code, whose types do not say it (a scripted GRU's initial
        # state, zeros of its input's dtype): a number of the fake run, no node of the graph.
        return get_dtype_as_int
    if node.target is _shape_as_tensor:
        # One op, which translation makes one Shape (propagation runs the replacement: a
        # fake tensor has no data for the ATen op to read).
        return torch.ops.aten._shape_as_tensor.default
    target = _overload_of(node)
    if target is torch.ops.aten.IntImplicit.default:
        # A tensor's value as an int (a box's size in torchvision's paste loop): on fake
        # tensors IntImplicit guards on the value, _local_scalar_dense makes it a symbol.
        return torch.ops.aten._local_scalar_dense.default
    if node.target is operator.not_:  # ``not`` of a condition on sizes: a symbol's not
        return torch.sym_not
    return target


def _scalar_like_call(node: torch.fx.Node) -> tuple[torch.fx.Node, Any] | None:
    """(tensor, number) for ``torch.tensor(number, dtype=tensor.dtype)`` in scripted code (no
    device other than the default, no grad); None for any other node."""
    dtype = node.kwargs.get("dtype")
    if node.target is not _tensor or len(node.args) != 1 or \
            not isinstance(node.args[0], (bool, int, float)) or \
            node.kwargs.get("requires_grad") or node.kwargs.get("device") is not None or \
            not isinstance(dtype, torch.fx.Node) or dtype.target is not get_dtype_as_int or \
            not isinstance(dtype.args[0], torch.fx.Node):
        return None
    return dtype.args[0], node.args[0]


def _scalar_tensor_call(node: torch.fx.Node) -> tuple[tuple, dict] | None:
    """The arguments of ``aten.scalar_tensor`` for a ``torch.tensor(<a number>)`` in scripted
    code (torchvision's batched NMS: ``torch.tensor(1)``), which the converter leaves a Python
    call; None for any other node."""
    if node.target is not _tensor or len(node.args) != 1:
        return None
    number = node.args[0]
    if not isinstance(number, (bool, int, float)) or node.kwargs.get("requires_grad"):
        return None
    from torch._export.converter import _TORCH_ENUM_TO_DTYPE

    dtype = node.kwargs.get("dtype")
    if dtype is not None and not isinstance(dtype, int):
        return None  # (the dtype of a tensor of the run: ``torch.tensor(5, dtype=x.dtype)``)
    dtype = (_TORCH_ENUM_TO_DTYPE[dtype] if dtype is not None else
             torch.bool if isinstance(number, bool) else
             torch.int64 if isinstance(number, int) else torch.get_default_dtype())
    return (number,), {"dtype": dtype}


def _returns_several(module: torch.fx.GraphModule) -> bool:
    output = next(n for n in module.graph.nodes if n.op == "output")
    return isinstance(output.args[0], (list, tuple))


def _aten_module(body: torch.fx.GraphModule) -> torch.fx.GraphModule | None:
    """A loop body or branch on its ATen calls, the loops and branches inside it likewise
    (their bodies its attributes); None when some call is no ATen op."""
    graph = _aten_graph(body)
    if graph is None:
        return None
    inner = {}
    for node in graph.nodes:
        if node.op != "get_attr":
            continue
        value = _attribute(body, node.target)
        if isinstance(value, torch.fx.GraphModule):
            inner[node.target] = _aten_module(value)
            if inner[node.target] is None:
                return None
        elif not isinstance(value, torch.Tensor):
            return None
    branches_return_tuples(graph, inner)
    module = torch.fx.GraphModule(body, graph)
    for target, converted in inner.items():
        setattr(module, target, converted)
    return module


def branches_return_tuples(graph: torch.fx.Graph, modules: dict) -> None:
    """The branches (among ``modules``, by attribute name) of each cond in ``graph`` returning
    a tuple, as torch's cond's do: the converter's one-output branch returns its value bare,
    which the cond's ``[0]`` (:func:`_aten_graph`) then indexed when the program ran eagerly
    (a mask's first row, or an IndexError on a 0-d result)."""
    for node in graph.nodes:
        if node.target is not torch.ops.higher_order.cond:
            continue
        for branch in node.args[1:3]:
            module = modules.get(getattr(branch, "target", None))
            output = None if module is None else \
                next(n for n in module.graph.nodes if n.op == "output")
            if output is not None and not isinstance(output.args[0], (list, tuple)):
                output.args = ((output.args[0],),)
                module.recompile()


def _overload_of(node: torch.fx.Node) -> Any:
    """The ATen overload a converted node calls, or None when it calls something else."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target
    if isinstance(target, torch._ops.OpOverloadPacket) and target in _SIZE_PACKETS:
        with_dim = len(node.args) + len(node.kwargs) > 1 and "int" in target.overloads()
        return target.int if with_dim else target.default
    if target in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
                  operator.add, operator.sub, operator.mul, operator.floordiv, operator.neg,
                  operator.truediv, operator.mod, operator.getitem, torch.sym_float,
                  torch.sym_int, torch.sym_max, torch.sym_min, torch.sym_ite, torch.sym_not,
                  operator.and_, operator.or_, operator.xor):
        return target
    return None


_SIZE_PACKETS = (torch.ops.aten.sym_size, torch.ops.aten.sym_stride, torch.ops.aten.sym_numel,
                 torch.ops.aten.sym_storage_offset, torch.ops.aten.scalar_tensor)
