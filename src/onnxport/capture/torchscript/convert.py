"""torch's TorchScript-to-FX converter (:func:`_to_fx`), keeping each call's provenance and the
type the tracer recorded for it."""

from __future__ import annotations

import functools
import operator
import re
import warnings
from typing import Any

import torch

from onnxport.capture import quirks
from onnxport.capture.common import first_lines, source_line
from onnxport.capture.torchscript.branches import decide_branches
from onnxport.capture.torchscript.fake_calls import ARANGE_OUTS, functional_arange
from onnxport.capture.torchscript.list_scans import (
    LIST_EDITS, StackedList, convert_append, convert_list_add, edits_known_list,
    returned_as_sequences, stacked_call)
from onnxport.capture.torchscript.loops import block_arguments, convert_if
from onnxport.capture.torchscript.pieces import convert_piece
from onnxport.capture.torchscript.size_lists import (convert_contains, convert_size, list_op,
                                                      ranks_inferred_once, sizes_listed)
from onnxport.capture.torchscript.trace import _ConverterState, _PREFIX, _TracedCall
from onnxport.capture.torchscript.uninitialized import convert_uninitialized
from onnxport.capture.torchscript.unrolling import KEPT_LOOPS, _KEPT, _convert_loop_node
from onnxport.capture.torchscript.unrecorded_numbers import UnrecordedNumbers
from onnxport.errors import CaptureError


def _to_fx(state: _ConverterState) -> torch.fx.GraphModule:
    """The TorchScript graph as an FX graph of ATen calls (torch's converter)."""
    kept: list = []
    token = _KEPT.set(kept)
    try:
        graph_module = _converted(state)
    finally:
        _KEPT.reset(token)
    graph_module.meta[KEPT_LOOPS] = bool(kept)
    return graph_module


def _converted(state: _ConverterState) -> torch.fx.GraphModule:
    # TS2EPConverter's own setup passes the graph through torch.onnx's jit passes (function
    # substitution, parameter listing) and its convert() re-exports with every dim dynamic;
    # only its graph converter is used.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # (A traced graph has no branch: walking its nodes in Python is then time lost. A
            # warning left where scripting decided its branch, F.grid_sample's on a default
            # align_corners, goes there too; and a loop, whose count may be a rank the graph
            # knows: [... for i in range(y.dim())].)
            if any(state.ts_graph.findNode(kind, True) is not None
                   for kind in ("prim::If", "aten::warn", "prim::Loop", "prim::Print")):
                decide_branches(state.ts_graph, state.distinct_inputs)
            quirks.in_decided_scripted_graph(state.ts_graph)
            paths = _lift_attributes(state)
            blocks, attribute_names = _lifted_attributes(state.ts_graph)
            attribute_names.update(paths)
            graph_converter = _converter_class()(
                state.ts_graph, state.name_to_param, state.name_to_buffer, blocks,
                state.name_to_non_tensor_attributes, state.name_to_constant, attribute_names)
            with ranks_inferred_once():
                graph_module = graph_converter.convert()
            graph_module._onnxport_parameters = set(state.name_to_param)
            graph_module._onnxport_buffers = set(state.name_to_buffer)
    except Exception as error:
        cause = error
        while cause is not None and not isinstance(cause, CaptureError):
            cause = cause.__cause__
        if cause is not None:  # ours, naming the construct and its line (of its kind)
            raise type(cause)(str(cause)) from error
        raise CaptureError(
            f"the traced TorchScript graph could not be turned into ATen calls: "
            f"{type(error).__name__}: {first_lines(str(error))}\nThe stage that failed is "
            "capture (tracing)."
        ) from error
    for module in graph_module.modules():  # the graph and its branches' subgraphs
        if not isinstance(module, torch.fx.GraphModule):
            continue
        changed = False  # regenerating the code is a tenth of a second on a large graph
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            if node.target in _SYMBOLIC_REPLACEMENTS:
                node.target = _SYMBOLIC_REPLACEMENTS[node.target]
                changed = True
            elif getattr(node.target, "__qualname__", "").endswith(
                    "convert_aten_tensor.<locals>.target"):
                # The converter's torch.tensor is a local function, which the code generated
                # for a subgraph names as if it were global (and so cannot call).
                node.target = _tensor
                changed = True
        if changed:
            module.recompile()
    return graph_module


def _lifted_attributes(graph: torch._C.Graph) -> tuple[dict, dict]:
    """torch's get_block_to_lifted_attrs (the attributes each block reads), which walks
    every node in Python twice: a traced graph, which reads no attribute and has no block,
    has none, so the walk is skipped."""
    from torch._export.converter import get_block_to_lifted_attrs

    if all(graph.findNode(kind, True) is None
           for kind in ("prim::GetAttr", "prim::If", "prim::Loop")):
        return {}, {}
    return get_block_to_lifted_attrs(graph)


def _tensor(*args, **kwargs) -> torch.Tensor:
    from torch._export.converter import _TORCH_ENUM_TO_DTYPE

    if kwargs.get("dtype") is not None:
        kwargs["dtype"] = _TORCH_ENUM_TO_DTYPE[kwargs["dtype"]]
    return torch.tensor(*args, **kwargs)


# TorchScript nodes whose conversion makes no call (a Python value, a list of values, a
# get_attr at most): their provenance and traced type are not read.
_MAKES_NO_CALL = {"prim::Constant": "convert_prim_Constant",
                  "prim::ListConstruct": "convert_prim_ListConstruct",
                  "prim::TupleConstruct": "convert_prim_TupleConstruct"}
# A node's schema text -> (its ATen overload, each argument's (name, keyword-only)): what
# torch's converter parses again for every call (a tenth of a traced graph's conversion).
_OVERLOADS: dict[str, tuple[Any, tuple[tuple[str, bool], ...]]] = {}


@functools.cache
def _converter_class():
    """torch's TorchScript-to-FX graph converter, keeping where each call came from: the
    module (the tracer's scope) and the Python stack (its source range) of the TorchScript
    node become the FX nodes' ``nn_module_stack`` and ``stack_trace``, as torch.export's own.
    (Made on first use: importing torch's converter is slow.)"""
    from torch._export.converter import TS2FXGraphConverter

    class Converter(TS2FXGraphConverter):
        __init__ = _init_converter
        convert = _convert
        convert_prim_Loop = _convert_loop_node
        convert_prim_If = convert_if
        _identify_inputs_as_arguments = block_arguments
        convert_aten_len = _convert_len
        convert_aten_list = _convert_list
        convert_aten_size = convert_size
        convert_aten___contains__ = convert_contains
        convert_call_function_op = _convert_call
        convert_aten___getitem__ = _convert_getitem
        _convert_block_to_subgraph = _convert_blocks
        convert_aten_Float = _convert_float
        convert_node = _convert_node
        # torch's own, reading a node's values by index (see _inputs)
        get_args_kwargs = _get_args_kwargs
        _convert_prim_iterator = _convert_iterator
        _convert_prim_unpack_iterator = _convert_unpack
        convert_aten_Int = _convert_int
        convert_prim_Constant = _convert_constant
        convert_prim_NumToTensor = _convert_num_to_tensor
        convert_aten_tensor = _convert_tensor
        convert_aten_allclose = _convert_allclose
        convert_prim_Uninitialized = convert_uninitialized
        convert_aten_append = convert_append
        convert_aten_add = convert_list_add

    return Converter


def _inputs(node: torch._C.Node) -> list:
    """``list(node.inputs())``, read by index: iterating a node's inputs in Python costs seven
    times as much (a tenth of the conversion of a traced graph)."""
    return [node.inputsAt(k) for k in range(node.inputsSize())]


def _outputs(node: torch._C.Node) -> list:
    return [node.outputsAt(k) for k in range(node.outputsSize())]


def _get_args_kwargs(self, node, schema):
    args, kwargs = _split_arguments(self, node, [(argument.name, argument.kwarg_only)
                                                 for argument in schema.arguments])
    return tuple(args), kwargs


def _split_arguments(self, node, arguments) -> tuple[list, dict]:
    """``node``'s inputs as FX values, positional or by keyword as ``arguments`` (each one's
    (name, keyword-only)) say."""
    args, kwargs = [], {}
    for value, (name, kwarg_only) in zip(_inputs(node), arguments):
        if kwarg_only:
            kwargs[name] = self.get_fx_value_by_ir_value(value)
        else:
            args.append(self.get_fx_value_by_ir_value(value))
    return args, kwargs


def _convert_iterator(self, node):
    self.name_to_node[node.output().debugName()] = [self.get_fx_value_by_ir_value(value)
                                                    for value in _inputs(node)]


def _convert_unpack(self, node):
    """Each item of an unpacked list or tuple; of a list a loop appended to (a scripted
    function's, that a trace unpacks as its example's count of items), that row of its
    stacked items, unbound: the count is the example's, which a dynamic length cannot keep
    (unbind fixes it)."""
    for k, output in enumerate(_outputs(node)):
        container = self.get_fx_value_by_ir_value(node.input())  # (as torch's: once each)
        if isinstance(container, StackedList):
            container = self.fx_graph.call_function(torch.ops.aten.unbind.int,
                                                    (container.node, 0))
        self.name_to_node[output.debugName()] = self.fx_graph.call_function(
            operator.getitem, (container, k))


def _convert_constant(self, node):
    """torch's conversion of a constant, a boolean as a bool: TorchScript stores it as an
    integer, which torch's Python functions refuse where they take a bool (a decomposition
    calling ``linalg_vector_norm(..., keepdim=0)`` failed)."""
    from torch._export.converter import TS2FXGraphConverter

    TS2FXGraphConverter.convert_prim_Constant(self, node)
    name = node.output().debugName()
    value = self.name_to_constant.get(name)
    if type(value) is int and isinstance(node.output().type(), torch._C.BoolType):
        self.name_to_constant[name] = bool(value)
    elif isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        # A frozen module's list of tensors (a scripted GRU's _flat_weights, when it is
        # given its initial state): each tensor lifted as the converter lifts one tensor, not
        # left in the call's arguments, where no graph value stands for it.
        del self.name_to_constant[name]
        items = []
        for k, item in enumerate(value):
            if isinstance(item, torch.Tensor):
                alias = f"lifted_tensor_{name}_{k}"
                self.name_to_constant[alias] = item
                item = self.fx_graph.get_attr(alias)
            items.append(item)
        self.name_to_node[name] = items


def _convert_int(self, node):
    """``int(t)``: aten._to_copy to int32, then aten._local_scalar_dense (torch's); ``int(n)``
    of a number (``int(k.item())`` in a scripted model) is that int, or a float's truncation."""
    args = tuple(self.get_fx_value_by_ir_value(value) for value in _inputs(node))
    kind = _inputs(node)[0].type().kind()
    if kind == "BoolType" and _makes_a_tensor(args[0]):
        kind = "TensorType"  # a bool held as a 0-d tensor: torch.allclose's (_convert_allclose)
    if kind != "TensorType":  # (sym_int of a SymBool would fix it: int(x.size(0) % 3 != 0))
        self.name_to_node[node.output().debugName()] = args[0] if kind == "IntType" else \
            self.fx_graph.call_function(torch.sym_ite, (args[0], 1, 0)) if kind == "BoolType" \
            else self.fx_graph.call_function(torch.sym_int, args)
        return
    copy = self.fx_graph.call_function(torch.ops.aten._to_copy.default, args,
                                       {"dtype": torch.int32})
    self.name_to_node[node.output().debugName()] = self.fx_graph.call_function(
        torch.ops.aten._local_scalar_dense.default, (copy,))


def _makes_a_tensor(value: Any) -> bool:
    """Whether ``value`` is an FX node of an ATen op that returns a tensor."""
    target = getattr(value, "target", None)
    schema = getattr(target, "_schema", None)
    return isinstance(value, torch.fx.Node) and schema is not None and \
        len(schema.returns) == 1 and schema.returns[0].type.kind() == "TensorType"


def _convert_allclose(self, node):
    """``torch.allclose`` as all of isclose, a 0-d bool tensor (what aten::Bool of a tensor
    leaves too): its Python bool depends on the values, so a branch on it is decided at run
    time."""
    args = tuple(self.get_fx_value_by_ir_value(value) for value in _inputs(node))
    close = self.fx_graph.call_function(torch.ops.aten.isclose.default, args)
    self.name_to_node[node.output().debugName()] = self.fx_graph.call_function(
        torch.ops.aten.all.default, (close,))


def _convert_num_to_tensor(self, node):
    """A number as a 0-d long tensor: aten.scalar_tensor (torch's)."""
    args = tuple(self.get_fx_value_by_ir_value(value) for value in _inputs(node))
    self.name_to_node[node.output().debugName()] = self.fx_graph.call_function(
        torch.ops.aten.scalar_tensor, args, {"dtype": torch.long})


def _convert_tensor(self, node):
    """``torch.tensor(n)`` of a number: aten.scalar_tensor of the number's own dtype (or the one
    given), so that a number the graph computes (a loop's count) stays computed; torch's
    conversion for anything else."""
    from torch._export.converter import TS2FXGraphConverter, _TORCH_ENUM_TO_DTYPE

    inputs = _inputs(node)
    kind = inputs[0].type().kind()
    if kind not in _NUMBER_DTYPES or len(inputs) != 4 or \
            inputs[1].node().kind() != "prim::Constant" or inputs[3].toIValue() is not False:
        return TS2FXGraphConverter.convert_aten_tensor(self, node)  # (requires_grad=True...)
    dtype = inputs[1].toIValue()
    dtype = _TORCH_ENUM_TO_DTYPE[dtype] if dtype is not None else \
        _NUMBER_DTYPES[kind] or torch.get_default_dtype()
    self.name_to_node[node.output().debugName()] = self.fx_graph.call_function(
        torch.ops.aten.scalar_tensor.default, (self.get_fx_value_by_ir_value(inputs[0]),),
        {"dtype": dtype})


_NUMBER_DTYPES = {"IntType": torch.long, "BoolType": torch.bool, "FloatType": None}


def _init_converter(self, *args, **kwargs):
    from torch._export.converter import TS2FXGraphConverter

    TS2FXGraphConverter.__init__(self, *args, **kwargs)
    # torch's converter sets a handler on each instance for its standard operators; the
    # class's own for len, size and "in" win.
    self.__dict__.pop("convert_aten_len", None)
    self.__dict__.pop("convert_aten_size", None)
    self.__dict__.pop("convert_aten___contains__", None)
    self.stack_traces = {}  # a source range's text -> its stack trace (_provenance)
    self.handlers = {}  # a node kind -> the method converting it (looked up once)


def _convert(self) -> torch.fx.GraphModule:
    """TS2FXGraphConverter.convert, less two code generations of the whole graph: the module
    generates its code when first called, and the size-division rewrite runs only on graphs
    that have one; and less its lint: the graph is copied node by node in order next
    (_aten_graph), which finds what lint would."""
    from torch._export.converter import inplace_optimize_sym_size_div
    from torch.fx._lazy_graph_module import _LazyGraphModule

    self.convert_graph_inputs()
    for node in self.ts_graph.nodes():
        self.convert_node(node)
    if self.is_top_level_graph():
        returned_as_sequences(self, list(self.ts_graph.outputs()))
    self.convert_graph_outputs()
    # (A branch's or loop body's module generates its code at once: torch.cond's dynamo
    # tracing cannot step into a lazy module's first call.)
    module_class = _LazyGraphModule if self.is_top_level_graph() else torch.fx.GraphModule
    graph_module = module_class(
        {**self.subgraphs, **self.name_to_param, **self.name_to_buffer,
         **self.name_to_non_tensor_attribute, **self.name_to_constant},
        self.fx_graph)
    if any(node.target is torch.ops.aten.div.Scalar_mode for node in self.fx_graph.nodes):
        inplace_optimize_sym_size_div(graph_module)
    return graph_module


def _convert_blocks(self, node, arguments: list):
    """TS2FXGraphConverter._convert_block_to_subgraph, each block converted by this class
    (torch's makes its own base class, which cannot convert a loop of a run-time count nested
    in a loop or branch)."""
    from torch._export.converter import normalize_name

    subgraph_nodes, subgraph_converters = [], []
    for block in node.blocks():
        converter = type(self)(block, self.name_to_param, self.name_to_buffer,
                               self.blocks_to_lifted_attrs, {}, self.name_to_constant,
                               self.name_to_attribute_fqn)
        for argument in arguments:
            converter.name_to_node[argument] = converter.fx_graph.placeholder(
                normalize_name(argument))
        subgraph_nodes.append(self.fx_graph.get_attr(self.add_subgraph(converter.convert())))
        subgraph_converters.append(converter)
    return subgraph_nodes, subgraph_converters


def _convert_float(self, node):
    """``float(x)``: of a number, that number as a float; of a size (a loop's index, a tensor's
    size), torch.sym_float of it; of a tensor, its value in double. (torch's converter calls
    a function of its own that code generation cannot name.)"""
    value = self.get_fx_value_by_ir_value(node.input())
    name = node.output().debugName()
    if isinstance(value, (int, float, bool)):
        self.name_to_node[name] = float(value)
        return
    graph = self.fx_graph
    if isinstance(node.input().type(), torch._C.TensorType) or _makes_a_tensor(value):
        double = graph.call_function(torch.ops.aten._to_copy.default, (value,),
                                     {"dtype": torch.float64})
        self.name_to_node[name] = graph.call_function(
            torch.ops.aten._local_scalar_dense.default, (double,))
    else:
        self.name_to_node[name] = graph.call_function(torch.sym_float, (value,))


def _convert_len(self, node):
    """The length of a list the graph built (a scripted model's list input) is known: a
    number, so a loop over the list is unrolled as torch's converter unrolls one of a known
    count, instead of indexing a list by the iteration."""
    items = self.get_fx_value_by_ir_value(node.input())
    if isinstance(node.input().type(), torch._C.TensorType):  # len(x): its first size
        self.name_to_node[node.output().debugName()] = self.fx_graph.call_function(
            torch.ops.aten.sym_size.int, (items, 0))
        return
    if isinstance(items, StackedList):  # the count of a loop's iterations
        self.name_to_node[node.output().debugName()] = self.fx_graph.call_function(
            torch.ops.aten.sym_size.int, (items.node, 0))
        return
    length = _known_length(items)
    if length is not None:
        name = node.output().debugName()
        self.name_to_node[name] = self.name_to_constant[name] = length
        return
    self._convert_standard_operators(node)


def _known_length(items: Any) -> int | None:
    """The length of a list the converter holds, as a Python list or as torch's converter's
    ``list_append`` calls on one (``res.append(y)``), or None."""
    from torch._export.converter import list_append

    if isinstance(items, (list, tuple)):
        return len(items)
    if isinstance(items, torch.fx.Node) and items.target is list_append:
        before = _known_length(items.args[0])
        return None if before is None else before + 1
    return None


def _traced_dtype(node: torch._C.Node) -> torch.dtype | None:
    kind = node.output().type() if node.outputsSize() == 1 else None
    return kind.dtype() if isinstance(kind, torch._C.TensorType) else None


def _convert_list(self, node):
    """``list(xs)``: a copy, which the script's edits (``s[0] = n``) change without changing
    ``xs``: of a list known item by item, a list of its items; of the sizes of a tensor
    (``list(x.shape)``), the sizes read again."""
    items = self.get_fx_value_by_ir_value(node.input())
    name = node.output().debugName()
    if isinstance(items, (list, tuple)):
        self.name_to_node[name] = list(items)
        return
    rank = _rank(node.input().node().inputsAt(0)) if isinstance(items, torch.fx.Node) and \
        items.target in (torch.ops.aten.sym_size, torch.ops.aten.sym_size.default) else None
    if rank is not None:
        self.name_to_node[name] = sizes_listed(self.fx_graph, items.args[0], rank)
    else:
        self.convert_call_function_op(node)


def _rank(value: torch._C.Value) -> int | None:
    kind = value.type()
    return kind.dim() if isinstance(kind, torch._C.TensorType) else None


def _convert_getitem(self, node):
    """TS2FXGraphConverter.convert_aten___getitem__, and an item of a list a loop appended to
    (:class:`StackedList`): that row of the stacked items; a piece of a split, computed from
    the size (:mod:`.pieces`)."""
    from torch._export.converter import TS2FXGraphConverter

    container = self.get_fx_value_by_ir_value(node.inputsAt(0))
    if convert_piece(self, node):
        return None
    index = self.get_fx_value_by_ir_value(node.inputsAt(1))
    if isinstance(container, list) and type(index) is int and -len(container) <= index < \
            len(container):  # (the item itself, as the list holds it now)
        self.name_to_node[node.output().debugName()] = container[index]
        return None
    if not isinstance(container, StackedList):
        return TS2FXGraphConverter.convert_aten___getitem__(self, node)
    self.name_to_node[node.output().debugName()] = self.fx_graph.call_function(
        torch.ops.aten.select.int, (container.node, 0, index))


def _convert_call(self, node):
    """TS2FXGraphConverter.convert_call_function_op, the overload and its arguments' kinds
    looked up once per schema."""
    from torch._export.converter import get_op_overload

    schema = node.schema()
    found = _OVERLOADS.get(schema)
    if found is None:
        target = get_op_overload(node)
        found = _OVERLOADS[schema] = (target, tuple(
            (argument.name, argument.kwarg_only) for argument in target._schema.arguments))
    target, arguments = found
    args, kwargs = _split_arguments(self, node, arguments)
    if target in LIST_EDITS and edits_known_list(target, args):
        # An edit of a list the converter holds as a Python list (``outs[0] = y`` after
        # ``outs = [a, b]``): done on that list, which the reads after it take their items from
        # (FX's immutable list of a node's arguments first made a list of its own).
        if type(args[0]) is not list:
            args[0] = list(args[0])
            self.name_to_node[node.inputsAt(0).debugName()] = args[0]
        result = LIST_EDITS[target](*args)
        if node.outputsSize() == 1:
            self.name_to_node[node.output().debugName()] = result
        return
    if target in LIST_EDITS and isinstance(args[0], torch.fx.Node) and \
            args[0].target in _MAKE_PIECES:
        raise CaptureError(
            f"the script edits ({node.kind()} at `{source_line(node)}`) the list of the pieces "
            f"of a dynamic axis ({args[0].target._schema.name}), whose length is known only at "
            "run time: ONNX has no such list to edit. Join the pieces with torch.cat or "
            "torch.stack and edit the tensor, or keep that axis static")
    if target in _DICT_SETS and isinstance(args[0], dict) and len(args) == 3:
        # ``d["a"] = y`` in a dict the converter holds as a Python dict: set there, which
        # the reads and the outputs after it take.
        args[0][args[1]] = args[2]
        return
    if any(isinstance(arg, StackedList) for arg in (*args, *kwargs.values())):
        result = stacked_call(self, node, target, args)
        if node.outputsSize() == 1:
            self.name_to_node[node.output().debugName()] = result
        return
    if (rows := _rows_of(self, node, target, args, kwargs)) is not None:
        # ``for row in x.unbind(0)`` (or ``x.split(1)``) over a dynamic axis: the rows as the
        # stacked items of a list, their count the axis' size (a list of values has no
        # run-time length).
        self.name_to_node[node.output().debugName()] = StackedList(rows, source_line(node))
        return
    if (listed := list_op(self.fx_graph, target, args)) is not None:
        outputs = _outputs(node)
        for output, value in zip(outputs, listed if len(outputs) > 1 else [listed]):
            self.name_to_node[output.debugName()] = value  # (divmod's two results)
        return
    if target in ARANGE_OUTS and "out" in kwargs and (dtype := _traced_dtype(node)) is not None:
        target, kwargs = functional_arange(target, kwargs, dtype)  # (else the fake run does)
    fx_node = self.fx_graph.call_function(target, tuple(args), kwargs)
    if node.outputsSize() == 1:
        self.name_to_node[node.output().debugName()] = fx_node
    else:
        for k, output in enumerate(_outputs(node)):
            self.name_to_node[output.debugName()] = self.fx_graph.call_function(
                operator.getitem, (fx_node, k))


def _rows_of(self, node, target, args: list, kwargs: dict) -> torch.fx.Node | None:
    """The items of ``x.unbind(d)`` or ``x.split(1, d)`` stacked along a new first axis, where
    the list is only counted and indexed; else None."""
    if target not in (torch.ops.aten.unbind.int, torch.ops.aten.split.Tensor) or \
            not _only_counted_and_indexed(node.output()):
        return None
    graph, tensor = self.fx_graph, args[0]
    if target is torch.ops.aten.unbind.int:
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        return graph.call_function(torch.ops.aten.movedim.int, (tensor, dim, 0))
    size = args[1] if len(args) > 1 else kwargs.get("split_size")
    dim = args[2] if len(args) > 2 else kwargs.get("dim", 0)
    rank = _rank(node.inputsAt(0))
    if size != 1 or not isinstance(dim, int) or dim < 0 and rank is None:
        return None
    dim = dim % rank if dim < 0 else dim
    # (row i, x.narrow(dim, i, 1), is x.unsqueeze(dim + 1) at i along dim)
    pieces = graph.call_function(torch.ops.aten.unsqueeze.default, (tensor, dim + 1))
    return graph.call_function(torch.ops.aten.movedim.int, (pieces, dim, 0))


# Ops making a list of pieces of a tensor, of a length its sizes give.
_MAKE_PIECES = (torch.ops.aten.unbind.int, torch.ops.aten.split.Tensor,
                torch.ops.aten.chunk.default, torch.ops.aten.split_with_sizes.default,
                torch.ops.aten.tensor_split.sections)

# ``d[key] = value`` for the key types of TorchScript's dicts.
_DICT_SETS = (torch.ops.aten._set_item.str, torch.ops.aten._set_item.int,
              torch.ops.aten._set_item.bool, torch.ops.aten._set_item.float)


def _only_counted_and_indexed(value: torch._C.Value) -> bool:
    """Whether the list ``value`` is read only by ``len()`` and indexing (in a loop body too),
    and counted: a count folded to the example's (a static axis) unrolls the loop instead."""
    kinds = [use.user.kind() for use in value.uses()]
    return "aten::len" in kinds and all(kind in ("aten::len", "aten::__getitem__")
                                        for kind in kinds)


def _convert_node(self, node):
    """TS2FXGraphConverter.convert_node, less the text of every node it prints for a debug
    log, with each FX node it makes given the TorchScript node's provenance."""
    from torch._export.converter import ir_name_to_func_name

    kind = node.kind()
    if kind in _MAKES_NO_CALL:
        try:
            return getattr(self, _MAKES_NO_CALL[kind])(node)
        except Exception as error:
            raise RuntimeError(f"TS2EPConverter failed for node {kind}") from error
    last = next(iter(reversed(self.fx_graph.nodes)), None)
    handler = self.handlers.get(kind)
    if handler is None:
        handler = self.handlers[kind] = getattr(self, ir_name_to_func_name(kind),
                                                self.convert_call_function_op)
    try:
        handler(node)
    except Exception as error:
        raise RuntimeError(f"TS2EPConverter failed for node {kind}") from error
    meta = None  # read only for nodes that made calls: most (constants, lists) make none
    for fx_node in reversed(self.fx_graph.nodes):
        if fx_node is last:
            break
        if fx_node.op == "call_function":
            meta = _provenance(node, self.stack_traces) if meta is None else meta
            fx_node.meta.update(meta)
    if meta is not None and node.outputsSize() == 1:
        _record_traced_type(node, self.name_to_node.get(node.output().debugName()))
    elif meta is not None:
        _record_traced_shapes(node, self.name_to_node)


# The key of the type the tracer recorded for a node's result, (dtype, sizes, strides,
# device, in place): what a fake run of the node would compute, read instead when no dim is
# dynamic. "in place" when the op returns its first argument, written into.
_TRACED_TYPE = "onnxport_traced_type"
# The (dtype, sizes) the tracer recorded for the value a node stands for, whatever op
# computes it (a view too): what a read of its size returned while tracing (see
# :func:`_fix_scalar_reads`), and whether an index is made of integers.
_TRACED_SHAPE = "onnxport_traced_shape"
# TorchScript ops the converter calls under another name, for the same result.
_CONVERTED_AS = {"aten::_convolution": "aten::convolution"}


def _record_traced_type(node: torch._C.Node, fx_node: Any) -> None:
    """Keep the complete tensor type the tracer recorded for ``node``'s one result on the FX
    node that computes it, when that node calls the same ATen op (not a replacement of the
    converter's) and its result is a new tensor, its first argument written into, or a view
    (which propagation trusts only where nothing writes into a tensor)."""
    if not isinstance(fx_node, torch.fx.Node) or fx_node.op != "call_function":
        return
    traced = node.output().type()
    if not isinstance(traced, torch._C.TensorType):
        return
    try:  # (an incomplete type has None for what it does not know, or raises)
        recorded = (traced.dtype(), traced.sizes(), traced.strides(), traced.device())
    except RuntimeError:
        return
    if recorded[1] is not None and None not in recorded[1]:
        # Whatever op made it, the node stands for that value: its type and sizes are these.
        fx_node.meta[_TRACED_SHAPE] = (recorded[0], tuple(recorded[1]))
    in_place = _traced_type_kind(fx_node.target, node.kind())
    if in_place is None:
        return
    if None in recorded or None in recorded[1] or None in recorded[2]:
        return
    fx_node.meta[_TRACED_TYPE] = (recorded[0], tuple(recorded[1]), tuple(recorded[2]),
                                  recorded[3], in_place)


def _record_traced_shapes(node: torch._C.Node, name_to_node: dict) -> None:
    """The (dtype, sizes) the tracer recorded for each result of a node with several (the
    pieces of a ``split`` unpacked): a read of one's size is then that number, and
    :func:`_fix_scalar_reads` need not run the model up to it."""
    for output in _outputs(node):
        fx_node = name_to_node.get(output.debugName())
        traced = output.type()
        if not isinstance(fx_node, torch.fx.Node) or fx_node.op != "call_function" or \
                _TRACED_SHAPE in fx_node.meta or not isinstance(traced, torch._C.TensorType):
            continue
        try:
            dtype, sizes = traced.dtype(), traced.sizes()
        except RuntimeError:  # (an incomplete type)
            continue
        if sizes is not None and None not in sizes:
            fx_node.meta[_TRACED_SHAPE] = (dtype, tuple(sizes))


@functools.cache
def _traced_type_kind(target: Any, kind: str) -> bool | str | None:
    """For :func:`_record_traced_type`, once per op: None when the tracer's type of a ``kind``
    node converted to a call of ``target`` cannot stand for its fake run, :data:`VIEW` for a
    view of its input, else whether the call returns its first argument written into."""
    schema = getattr(target, "_schema", None)
    if schema is None or schema.name != _CONVERTED_AS.get(kind, kind) or \
            len(schema.returns) != 1:
        return None
    alias = schema.returns[0].alias_info
    in_place = alias is not None and alias.is_write and bool(schema.arguments) and \
        schema.arguments[0].alias_info is not None and \
        schema.arguments[0].alias_info.before_set == alias.before_set
    if alias is not None and not in_place and not schema.is_mutable and not alias.is_write:
        return VIEW
    if alias is not None and not in_place or schema.is_mutable and not in_place:
        return None
    return in_place


# The kind :func:`_traced_type_kind` gives an op returning a view of its input: its type
# stands for its fake run only in a graph that writes into no tensor (aliasing is then
# never observed), which propagation checks.
VIEW = "view"


def _provenance(node: torch._C.Node, stack_traces: dict[str, str | None]) -> dict[str, Any]:
    """The module and the stack trace of ``node``; ``stack_traces`` keeps the trace of each
    source range text read (the nodes of one line of the model share it)."""
    meta: dict[str, Any] = {}
    scope = node.scopeName().split("/")[-1].removeprefix("__module.").removeprefix(_PREFIX)
    if scope and scope != _PREFIX.rstrip("."):
        meta["nn_module_stack"] = {scope: (scope, "torch.nn.Module")}
    source_range = node.sourceRange()
    if source_range not in stack_traces:
        stack_traces[source_range] = _stack_trace(source_range)
    stack_trace = stack_traces[source_range]
    if stack_trace is not None:
        meta["stack_trace"] = stack_trace
    return meta


def _stack_trace(source_range: str) -> str | None:
    """The model's frames only, innermost first: from the wrapper that calls it (_TracedCall)
    outwards the stack is onnxport's and the caller's, which would be taken as the user's line
    where the model has none of its own (an nn.Sequential of torch's modules, whose line is
    torch's on the dynamo path)."""
    frames = []
    for match in _SOURCE_RANGE_LINE.finditer(source_range):  # (not read past the model)
        path, line, function = match.groups()
        if path == _THIS_FILE:
            break
        if path == _NUMBERS_FILE:  # (the torch function mode around the call, while tracing)
            continue
        frames.append(f'  File "{path}", line {line}, in {function}')
    if not frames:
        return None
    return "\n".join(reversed(frames)) + "\n"  # innermost first in a source range


_THIS_FILE = _TracedCall.forward.__code__.co_filename  # as the tracer records it
_NUMBERS_FILE = UnrecordedNumbers.__torch_function__.__code__.co_filename
# A line "<file>(<line>): <function>" of a source range (the others quote the code); one
# search of the text up to the model's outermost frame, not one match per line.
_SOURCE_RANGE_LINE = re.compile(r"^[^\S\n]*(.+)\((\d+)\): (\S+)[^\S\n]*$", re.MULTILINE)


def _lift_attributes(state: _ConverterState) -> dict[str, str]:
    """Sort each attribute the graph reads (``prim::GetAttr`` chains from ``self``): tensors
    that are neither parameters nor buffers become buffers, script objects constants, the
    rest plain values (as TS2EPConverter.lift_get_attr does for its own graphs). Returns the
    path of each value read, ``self`` included."""
    if not isinstance(state.ts_model, torch.jit.ScriptModule):
        return {}  # a function: no self, no attributes
    self_value = next(iter(state.ts_graph.inputs()))
    paths = {self_value.debugName(): ""}

    def walk(block):
        for node in block.nodes():
            if node.kind() == "prim::GetAttr":
                parent = paths.get(node.input().debugName())
                if parent is not None:
                    path = f"{parent}.{node.s('name')}" if parent else node.s("name")
                    paths[node.output().debugName()] = path
                    value = state.ts_model
                    for part in path.split("."):
                        value = getattr(value, part)
                    if isinstance(value, torch.Tensor):
                        if path not in state.name_to_param:
                            state.name_to_buffer.setdefault(path, value)
                    elif isinstance(value, torch.ScriptObject):
                        state.name_to_constant.setdefault(path, value)
                    else:  # submodules too: the converter looks every step of a path up
                        state.name_to_non_tensor_attributes[path] = value
            for sub_block in node.blocks():
                walk(sub_block)

    walk(state.ts_graph)
    return paths


def _shape_as_tensor(tensor: torch.Tensor) -> torch.Tensor:
    # Built from the sizes so that torch.export sees them (its fake tensor has no data for
    # aten._shape_as_tensor to read).
    return torch.stack([torch.scalar_tensor(size, dtype=torch.long) for size in tensor.shape]) \
        if tensor.dim() else torch.zeros(0, dtype=torch.long)


# Ops the tracer records (torchvision calls them when tracing) that torch.export cannot run
# with symbolic sizes, and the same computation in ops it can.
_SYMBOLIC_REPLACEMENTS = {torch.ops.aten._shape_as_tensor.default: _shape_as_tensor}
# The converter calls the ATen overloads of number arithmetic, which take plain ints and floats
# only (a symbolic size given one is fixed to the example's: float(x.size(0)) * 0.5 was 2.0 at
# every size); Python's operators also take the symbolic sizes torch.export passes.
_SYMBOLIC_REPLACEMENTS.update({
    getattr(getattr(torch.ops.aten, name), overload): function
    for name, function in [("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                           ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                           ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                           ("floordiv", operator.floordiv), ("div", operator.truediv),
                           ("remainder", operator.mod), ("neg", operator.neg)]
    for overload in ("int", "float", "int_float", "float_int", "default", "Scalar", "bool")
    if overload in getattr(torch.ops.aten, name).overloads() and all(
        argument.type.kind() in ("IntType", "FloatType", "NumberType", "BoolType")
        for argument in getattr(getattr(torch.ops.aten, name), overload)._schema.arguments)
})
# (and, or and xor of bools only: of ints they are bitwise)
_SYMBOLIC_REPLACEMENTS.update({
    torch.ops.aten.__and__.bool: operator.and_, torch.ops.aten.__or__.bool: operator.or_,
    torch.ops.aten.__xor__.bool: operator.xor, torch.ops.aten.__not__.default: torch.sym_not})
