"""Capture by tracing (``dynamo=False`` and the last strategy of ``fallback=True``): one run of
the TorchScript tracer, then torch's TorchScript-to-FX converter; one fake-tensor pass over that
straight-line program (torch.export over it when that pass cannot) makes it an ExportedProgram,
so that translate/ gets the same kind of graph as from torch.export."""

from __future__ import annotations

import contextlib
import re
import sys
import dataclasses
import functools
import operator
import os
import warnings
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
from torch.fx import traceback as fx_traceback
from torch.fx.experimental import _config as fx_config

from onnxport.capture.dynamic import tensor_input_slots
from onnxport.capture.packed_sequences import packed_sequences_as_padded
from onnxport.pytree_names import bookkeeping_outputs
from onnxport.pytree_names import output_names as output_names_of
from onnxport.capture.torch_export import (
    CapturedProgram, _aliases, _first_lines, _is_view, capture_torch_export, parameter_names,
)
from onnxport.errors import CaptureError, InvalidExportOptionsError

# The name the traced wrapper gives the model; stripped again from the weights' names.
_PREFIX = "model."
# ... and the prefix of the module that replays the converted graph for torch.export.
_REPLAY_PREFIX = "graph."


@dataclasses.dataclass
class _ConverterState:
    """The attributes of the traced module, sorted as torch's graph converter wants them."""

    ts_model: Any
    ts_graph: Any
    name_to_param: dict
    name_to_buffer: dict
    name_to_non_tensor_attributes: dict
    name_to_constant: dict


class TracingWarning(UserWarning):
    """Tracing recorded a value computed from a tensor (a Python bool, int or float, a branch
    taken, a loop count) as a constant: the ONNX model repeats this run's choice."""


class _TracedCall(torch.nn.Module):
    """Calls the model on its tensor inputs only: every other input (a number, a string, the
    keys of a dict) is fixed to the example's value, as the TorchScript tracer does."""

    def __init__(self, model: Any, leaves: list, spec: pytree.TreeSpec, tensor_positions: list[int]):
        super().__init__()
        self.model = model
        self._leaves = leaves
        self._spec = spec
        self._positions = tensor_positions
        self.output_names: list[str | None] = []  # readable names of the outputs kept

    def forward(self, *tensors):
        leaves = list(self._leaves)
        for position, tensor in zip(self._positions, tensors):
            leaves[position] = tensor
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        output = self.model(*args, **kwargs)
        # A dict comes out as its values, strings are dropped and numbers become constants,
        # the TorchScript exporter's rules for outputs.
        leaves, spec = pytree.tree_flatten(output)
        names = output_names_of(spec)
        if len(names) != len(leaves):
            names = [None] * len(leaves)
        dropped = bookkeeping_outputs(spec)  # a KV cache's token count and window
        results, self.output_names = [], []
        for leaf, name in [(leaf, name) for k, (leaf, name) in enumerate(zip(leaves, names))
                           if k not in dropped]:
            if isinstance(leaf, (bool, int, float)) and not isinstance(leaf, torch.Tensor):
                leaf = torch.tensor(leaf)
            if isinstance(leaf, torch.Tensor):
                results.append(leaf)
                self.output_names.append(name)
        return tuple(results)


def capture_tracing(
    model: Any,
    args: tuple,
    kwargs: dict,
    *,
    dim_names: Mapping[tuple[int, int], str] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    output_dim_names: Mapping[str, dict[int, str]] | None = None,
    keep_op: Callable[[Any], bool] | None = None,
) -> CapturedProgram:
    """Trace ``model`` once on the example inputs and describe the result like
    :func:`capture_torch_export` does.

    Loops are unrolled and only the branches taken are kept; a tensor read as a Python value
    becomes a constant (each gives a :class:`TracingWarning` naming its line). Sizes read with
    ``x.size()`` or ``x.shape`` stay computed from the input, so the dims in ``dim_names`` are
    dynamic; so do sizes computed from them with tensor ops and read back as numbers
    (torchvision's detection transform and anchors), unless an op fixes one (a warning names
    it).
    """
    if isinstance(model, torch.export.ExportedProgram):
        raise InvalidExportOptionsError(
            "an ExportedProgram cannot be traced (dynamo=False); pass it with dynamo=True, or "
            "pass the nn.Module it was exported from")
    dim_names = dict(dim_names or {})
    slots = tensor_input_slots(args, kwargs, parameter_names(model))
    leaves, spec = pytree.tree_flatten((args, kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = tuple(leaves[i] for i in positions)
    if len(tensors) != len(slots):  # both flatten the same pytree; a mismatch is our bug
        raise CaptureError(f"tracing found {len(tensors)} tensor inputs, expected {len(slots)}")
    readable: list[str | None] = []
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        if kwargs or not all(isinstance(arg, torch.Tensor) for arg in args):
            raise InvalidExportOptionsError(
                "a scripted model (ScriptModule, ScriptFunction) takes its example inputs as "
                "positional tensors only; numbers, strings and keyword arguments cannot be "
                "bound: pass the original nn.Module, or script a wrapper that fixes them")
        graph_module = _to_fx(_script_state(_frozen(model)))
    else:
        wrapper = _TracedCall(model, leaves, spec, positions)
        graph_module = _to_fx(_trace(wrapper, tensors))
        readable = wrapper.output_names
    dynamic = [
        {axis: torch.export.Dim.DYNAMIC for (k, axis) in dim_names if k == position} or None
        for position in range(len(tensors))
    ]
    if any(dynamic):
        program = _propagated(graph_module, tensors, dynamic,
                              hints=_read_back_hints(graph_module, tensors))
    else:
        program = _propagated_static(graph_module, tensors, dynamic)
    if program is None:
        program = _export_traced(graph_module, tensors, dynamic)
        _drop_runtime_asserts(program)
    names = list(input_names or []) + [slot.name for slot in slots[len(input_names or []):]]
    captured = capture_torch_export(
        program, (), {}, dim_names=dim_names, input_names=names, output_names=output_names,
        output_dim_names=output_dim_names, keep_op=keep_op)
    _name_outputs(captured, readable, len(output_names or []))
    captured.weights = {
        name: (target.removeprefix(_REPLAY_PREFIX).removeprefix(_PREFIX), tensor)
        for name, (target, tensor) in captured.weights.items()
    }
    return captured


def _propagated_static(graph_module: torch.fx.GraphModule, tensors: tuple,
                       dynamic: list) -> torch.export.ExportedProgram | None:
    """:func:`_propagated` without dynamic dims. Sizes read back from tensors are fixed to
    this run's values first (exact: they depend on the shapes only, and no shape is dynamic):
    propagation cannot follow them, and finding that out cost two fake runs of the model
    (vit_b_16's one read: 0.9 s). A graph with a scripted branch (torchvision's batched NMS)
    whose data propagation cannot follow either is left to torch.export (None), as before
    such graphs were propagated at all."""
    reads = _shape_reads(graph_module)
    _fix_scalar_reads(graph_module, tensors, reads)
    try:
        return _propagated(graph_module, tensors, dynamic)
    except CaptureError:
        if not reads:
            raise
        return None


def _name_outputs(captured: CapturedProgram, readable: list[str | None], given: int) -> None:
    """Outputs not named by the user take their path in the model's output (``logits``,
    ``past_key_values.0.key`` as ``present.0.key``), as on the dynamo path."""
    if len(readable) != len(captured.output_names):
        return
    taken = set(captured.input_names) | set(captured.output_names[:given])
    for k in range(given, len(readable)):
        name = readable[k]
        if name and name not in taken:
            captured.output_names[k] = name
        taken.add(captured.output_names[k])


def _export_traced(graph_module: torch.fx.GraphModule, tensors: tuple,
                   dynamic: list) -> torch.export.ExportedProgram:
    """torch.export over the traced program.

    The tracer keeps sizes as 0-d tensors, and some code (torchvision's resize and detection
    heads, interpolate with recompute_scale_factor) computes sizes with tensor ops and reads
    them back as ints, which torch.export cannot see through. With static shapes those reads
    were fixed to this run's values (:func:`capture_tracing`; exact: they depend on the shapes
    only); with dynamic axes they are symbols (:class:`_ReadBackSizes`), and this is reached
    only when propagating them failed otherwise: an error says what to do when torch.export
    cannot follow them either.
    """
    # torch.export specializes a dim of size 0 or 1 unless told to reason about it as any
    # size; the traced program has no branch left that could tell them apart.
    oblivious = any(tensors[k].shape[axis] <= 1 for k, axes in enumerate(dynamic) if axes
                    for axis in axes)

    def export():
        with fx_config.patch(backed_size_oblivious=oblivious):
            return torch.export.export(_Replay(graph_module), tensors,
                                       dynamic_shapes=(tuple(dynamic),), strict=False)

    reads = _shape_reads(graph_module)  # none left when static: capture_tracing fixed them
    try:
        return export()
    except Exception as error:
        if reads and any(dynamic):
            raise CaptureError(
                f"the traced model computes {len(reads)} size(s) with tensor ops and reads "
                f"them back as Python numbers (first at {_source_of(reads[0])}); torch.export "
                "cannot keep those dynamic, and fixing them to this example's values would "
                "contradict the dynamic axes asked for. Export without dynamic_axes (one model "
                f"per input size), or use dynamo=True. torch.export's error: "
                f"{type(error).__name__}: {_first_lines(str(error), 3)}"
            ) from error
        raise CaptureError(
            f"the traced graph could not be captured by torch.export: {type(error).__name__}: "
            f"{_first_lines(str(error))}\nThe stage that failed is capture (tracing)."
        ) from error


def _run_keeping_inputs(target: Any, args: tuple, kwargs: dict) -> Any:
    """``target(*args, **kwargs)`` on fake values, where an op that writes into its first
    argument writes into a new alias of it: an in-place op that changes metadata (squeeze_,
    transpose_, t_, resize_) would otherwise change the value recorded for the node that
    made its argument, and that node was then translated with the new shape ([3] for the
    [1, 3] of ``x.unsqueeze(0)`` before ``squeeze_(0)``: the squeeze was dropped)."""
    schema = getattr(target, "_schema", None)
    if schema is not None and schema.arguments and args and \
            isinstance(args[0], torch.Tensor) and \
            (alias := schema.arguments[0].alias_info) is not None and alias.is_write:
        args = (args[0].detach(), *args[1:])
    return target(*args, **kwargs)


class _ReadsValues(Exception):
    """The graph reads a tensor's value as a number: the tracer's types, which fix what
    follows from it to this run's sizes, cannot stand for fake runs."""


def _propagated(graph_module: torch.fx.GraphModule, tensors: tuple, dynamic: list,
                hints: Mapping[str, Any] | None = None, trust_trace: bool = True,
                ) -> torch.export.ExportedProgram | None:
    """The converted graph as an ExportedProgram without exporting it again: each node is run
    once on fake tensors whose dynamic dims are symbols, which gives every node its
    ``meta["val"]`` as torch.export would (the traced program is straight-line ATen calls
    already, so tracing it again only costs time: 60-70% of a ``dynamo=False`` export).

    Without dynamic dims, the type the tracer recorded for a node's result stands for its fake
    run (:func:`_record_traced_type`), unless sizes in the graph depend on values
    (``trust_trace`` False: when a read of a value is reached, the pass starts again so).

    Returns None when the graph needs what only torch.export does (Python helpers to trace
    through, sizes read back from tensors, a dynamic dim that the graph fixes or equates to
    another), so that :func:`_export_traced` decides, with its errors.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.export.graph_signature import (
        ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec, TensorArgument)
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic, ShapeEnv, StatelessSymbolicContext)
    from torch._export.verifier import TrainingIRVerifier

    attributes: list[tuple[torch.fx.Node, str, torch.Tensor]] = []
    graph = _aten_graph(graph_module, attributes)
    if graph is None:
        return None
    bodies = {node.target: _aten_module(_attribute(graph_module, node.target))
              for node in graph.nodes if node.op == "get_attr"
              and isinstance(_attribute(graph_module, node.target), torch.fx.GraphModule)}
    if None in bodies.values() or any(node.op == "get_attr" and node.target not in bodies
                                      for node in graph.nodes):
        return None  # (an attribute neither a tensor nor a loop body)
    state_dict, constants, weight_specs, weight_values = {}, {}, [], []
    weight_dtypes: dict[torch.fx.Node, torch.dtype] = {}
    for placeholder, target, value in attributes:
        kind, _ = _weight_kind(graph_module, target)
        (constants if kind == InputKind.CONSTANT_TENSOR else state_dict)[target] = value
        weight_dtypes[placeholder] = value.dtype
        weight_specs.append(InputSpec(kind, TensorArgument(placeholder.name), target,
                                      persistent=True if kind == InputKind.BUFFER else None))
        weight_values.append(value)
    inputs = [n for n in graph.nodes if n.op == "placeholder"][len(attributes):]
    if len(inputs) != len(tensors):
        return None
    output = next(n for n in graph.nodes if n.op == "output")
    results, out_spec = pytree.tree_flatten(output.args[0])
    if not all(isinstance(result, torch.fx.Node) for result in results):
        return None
    output.args = (tuple(results),)  # flat, as in any exported program; out_spec nests them

    oblivious = any(tensors[k].shape[axis] <= 1 for k, axes in enumerate(dynamic) if axes
                    for axis in axes)
    shape_env = ShapeEnv()
    kept_numbers = [  # the numbers the tracer kept as constant tensors (read before faking)
        int(weight) if spec.kind == InputKind.CONSTANT_TENSOR and weight.dim() == 0
        and weight.dtype in _INDEX_TYPES else None
        for weight, spec in zip(weight_values, weight_specs)]
    # A fake weight made from an empty meta tensor of its size costs a tenth of one made by
    # FakeTensorMode.from_tensor (a fifth of densenet121's capture); constants, whose values
    # the graph may read, and unusual tensors still go through from_tensor.
    metas = [_meta_like(weight) if spec.kind != InputKind.CONSTANT_TENSOR else None
             for weight, spec in zip(weight_values, weight_specs)]
    # Without dynamic dims, the tracer's types are the fake results (a fake run of each op,
    # its kernel and cache, was most of this pass); with them, sizes are computed as symbols.
    # (Their meta tensors are made here: under the fake mode, each would be a fake op.)
    traced = {} if not trust_trace or any(dynamic) or bodies or \
        not _sizes_follow_from_sizes(graph, weight_dtypes) else {
        node: _traced_meta(node.meta[_TRACED_TYPE]) for node in graph.nodes
        if _TRACED_TYPE in node.meta}
    try:
        from torch._dispatch.python import enable_python_dispatcher

        # (The python dispatcher lets composite ops take sizes read from tensors, as a graph
        # with a loop has, or one whose read-back sizes are hinted symbols.)
        with fx_config.patch(backed_size_oblivious=oblivious), torch.no_grad(), \
                enable_python_dispatcher() if bodies or hints else contextlib.nullcontext(), \
                FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True) as mode:
            def fake(tensor, axes):  # only the dims asked for become symbols
                if not axes and (meta := _meta_like(tensor)) is not None:  # as the weights
                    return mode.fake_tensor_converter.from_meta_and_device(
                        mode, meta, tensor.device)
                return mode.from_tensor(tensor, symbolic_context=StatelessSymbolicContext(
                    dynamic_sizes=[DimDynamic.DYNAMIC if axis in axes else DimDynamic.STATIC
                                   for axis in range(tensor.dim())]))

            fakes = [fake(tensor, dynamic[k] or {}) for k, tensor in enumerate(tensors)]
            values: dict[torch.fx.Node, Any] = {}
            numbers: dict[torch.fx.Node, Any] = {}  # 0-d integer tensors holding a size
            read_backs = _ReadBackSizes(shape_env, hints)
            weights = iter(zip(weight_values, kept_numbers, metas))
            for node in graph.nodes:
                if node.op == "placeholder" and len(values) < len(attributes):
                    weight, number, meta = next(weights)
                    value = (mode.from_tensor(weight, static_shapes=True) if meta is None else
                             mode.fake_tensor_converter.from_meta_and_device(
                                 mode, meta, weight.device))
                    if number is not None:
                        numbers[node] = number
                elif node.op == "placeholder":
                    value = fakes[len(values) - len(attributes)]
                elif node.op == "get_attr":  # a loop body, propagated with its loop
                    value = bodies[node.target]
                elif node.target is prim_loop:
                    args = torch.fx.node.map_arg(node.args, lambda n: values[n])
                    value = _propagate_loop(shape_env, *args)
                elif node.target is torch.ops.higher_order.cond and bodies:
                    args = torch.fx.node.map_arg(node.args, lambda n: values[n])
                    value = _propagate_cond(shape_env, *args)
                elif node.op == "call_function":
                    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs),
                                                         lambda n: values[n])
                    number = _size_number(node, args, kwargs, numbers)
                    if traced and number is None and node.target in _NUMBER_READS:
                        raise _ReadsValues()
                    if node.target is torch.ops.aten._shape_as_tensor.default:
                        value = _shape_as_tensor(*args)
                    elif number is None and read_backs.has(node):
                        value = read_backs.symbol(node)
                    elif node.target in _NUMBER_READS and number is not None:
                        value = number
                        if isinstance(number, int):  # a static size: the number itself
                            _replace_uses(node, number)
                        else:  # a symbolic one: still read from the tensor at run time
                            node.target = torch.ops.aten._local_scalar_dense.default
                    elif number is None and node in traced and (
                            value := _fake_of_type(mode, traced[node], args)) is not None:
                        pass
                    else:
                        value = _run_keeping_inputs(node.target, args, kwargs)
                        if number is not None:
                            numbers[node] = number
                else:
                    continue
                values[node] = value
                if node.op != "get_attr":
                    node.meta["val"] = value
                read_backs.check(node)
    except _ReadsValues:
        return _propagated(graph_module, tensors, dynamic, hints, trust_trace=False)
    except Exception as error:  # torch.export tells what is wrong, or copes
        if bodies:  # torch.export cannot run a prim_loop: say what failed here
            raise CaptureError(
                f"the traced graph, which has a loop or branch of scripted code, could not be "
                f"propagated at {node.format_node()} ({_source_of(node)}): "
                f"{type(error).__name__}: {_first_lines(str(error), 2)}") from error
        return None
    read_backs.warn(graph_module, tensors, dynamic)
    for node in graph.nodes:
        node.meta.pop(_TRACED_TYPE, None)
        node.meta.pop(_TRACED_SHAPE, None)
    for node in [n for n in graph.nodes if n.target in _NUMBER_READS and not n.users]:
        graph.erase_node(node)
    constant_of = {spec.arg.name: constants[spec.target] for spec in weight_specs
                   if spec.kind == InputKind.CONSTANT_TENSOR}
    for name, value in _fold_filled_constants(graph, inputs[0] if inputs else None, constant_of):
        constants[name] = value
        weight_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), name))
        weight_values.append(value)
    for node in list(graph.nodes):
        # Dropout outside training (the tracer's flag is 0) is its input (functionalization's decompositions, which
        # this graph may skip now, removed it; translated, it would leave an Identity).
        if node.target in _DROPOUTS and len(node.args) == 3 \
                and not isinstance(node.args[2], torch.fx.Node) and not node.args[2]:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
    _eliminate_dead_code(graph)
    # Symbols read from tensors are bound to the nodes that made them; translation's
    # decompositions trace with this shape env again and must not find them pending.
    shape_env.pending_fresh_unbacked_symbols.clear()
    symbols = []
    for k, axes in enumerate(dynamic):
        for axis in axes or {}:
            size = values[inputs[k]].shape[axis]
            if not isinstance(size, torch.SymInt) or not size.node.expr.is_Symbol:
                return None
            symbols.append(size.node.expr)
    if any(shape_env.replace(symbol) != symbol for symbol in symbols) or (any(
            str(symbol).startswith("u") for symbol in shape_env.var_to_range) and not bodies):
        # Fixed or equated by the graph, or read back from a tensor. (A graph with a loop
        # has no other way: its sizes read back from tensors stay data-dependent.)
        return None

    results = list(output.args[0])  # (an output that was a Dropout is its input now)
    user_specs = [InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None)
                  for node in inputs]
    output_specs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(node.name), None)
                    for node in results]
    in_spec = pytree.tree_flatten((tuple(tensors), {}))[1]
    try:  # the weights are inputs now: the graph needs no attribute of a root module
        with _code_generated_when_called(shape_env):
            return torch.export.ExportedProgram(
                dict(bodies), graph,
                ExportGraphSignature(weight_specs + user_specs, output_specs), state_dict,
                {symbol: shape_env.var_to_range[symbol] for symbol in symbols},
                [ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec))],
                constants=constants, verifiers=[TrainingIRVerifier])
    except Exception:
        return None


def _eliminate_dead_code(graph: torch.fx.Graph) -> None:
    """``graph.eliminate_dead_code()``, less its lint of the whole graph (this one was built in
    order) and with the purity of each op looked up once, not once per node: a call's purity
    depends on its op alone, but for a higher-order op, whose operands tell."""
    impure: dict[Any, bool] = {}
    for node in reversed(graph.nodes):
        if node.users:
            continue
        target = node.target
        if node.op == "call_function" and not isinstance(target, torch._ops.HigherOrderOperator):
            if target not in impure:
                impure[target] = node.is_impure()
            if impure[target]:
                continue
        elif node.is_impure():
            continue
        graph.erase_node(node)


def _weight_kind(graph_module: torch.fx.GraphModule, target: str) -> tuple[Any, str]:
    """The input kind of the converted graph's tensor attribute ``target`` in an exported
    program, and the prefix of its placeholder's name (torch.export's)."""
    from torch.export.graph_signature import InputKind

    if target in getattr(graph_module, "_onnxport_parameters", ()):
        return InputKind.PARAMETER, "p_"
    if target in getattr(graph_module, "_onnxport_buffers", ()):
        return InputKind.BUFFER, "b_"
    return InputKind.CONSTANT_TENSOR, "c_"


@contextlib.contextmanager
def _code_generated_when_called(shape_env: Any):
    """ExportedProgram wraps its graph in a torch.fx.GraphModule, which generates the Python
    code of the whole graph at once (30 ms on convnext_tiny) though translation only walks the
    graph; within this block it gets a lazy one, which generates its code when first run.
    And it writes the guards of ``shape_env``, the one all the graph's fake values come
    from, as code: with none (a static export has none), that is no code, without first
    looking through every node's value for the shape env."""
    from torch.export import exported_program
    from torch.fx._lazy_graph_module import _LazyGraphModule

    create = exported_program._create_graph_module_for_export
    guards_to_code = exported_program._convert_guards_to_code
    exported_program._create_graph_module_for_export = _LazyGraphModule
    exported_program._convert_guards_to_code = \
        lambda graph_module: guards_to_code(graph_module) if shape_env.guards else []
    try:
        yield
    finally:
        exported_program._create_graph_module_for_export = create
        exported_program._convert_guards_to_code = guards_to_code


_DROPOUTS = (torch.ops.aten.dropout.default, torch.ops.aten.feature_dropout.default,
             torch.ops.aten.alpha_dropout.default, torch.ops.aten.feature_alpha_dropout.default)

# Ops that allocate a tensor from sizes alone (``new_*`` read only their input's dtype).
_FRESH = {torch.ops.aten.new_zeros.default, torch.ops.aten.new_ones.default,
          torch.ops.aten.new_full.default, torch.ops.aten.new_empty.default,
          torch.ops.aten.zeros.default, torch.ops.aten.ones.default,
          torch.ops.aten.full.default, torch.ops.aten.empty.memory_format}


@functools.cache
def _written_positions(target: Any) -> tuple[int, ...]:
    """The positions of the arguments ``target`` writes into (none for a pure op or no ATen
    op); read from its schema once per op, not once per call."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return ()
    return tuple(k for k, argument in enumerate(schema.arguments)
                 if argument.alias_info is not None and argument.alias_info.is_write)


def _fold_filled_constants(graph: torch.fx.Graph, first_input: torch.fx.Node | None,
                           constants: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """Replace each tensor that is allocated and written into through views with constants of
    static size (swin's shifted-window attention mask) by its final value, as a new constant
    placeholder before ``first_input``.

    Such writes are the only reason these graphs need functionalizing, which traces the whole
    program again (most of a ``dynamo=False`` export of swin_t); the values are the same.
    Returns the (name, value) of each constant made; each placeholder's ``meta["val"]`` is set.
    ``constants`` holds the values of the graph's constant placeholders by name (a fill value
    the tracer lifted as a tensor).
    """
    order = {node: k for k, node in enumerate(graph.nodes)}
    roots: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        positions = _written_positions(node.target)
        if not positions:
            continue
        written = [node.args[k] for k in positions if k < len(node.args)]
        if len(written) != 1 or not isinstance(written[0], torch.fx.Node):
            continue  # left to functionalization
        root = written[0]
        while _is_view(root) and isinstance(root.args[0], torch.fx.Node):
            root = root.args[0]
        roots.setdefault(root, []).append(node)
    folded = []
    for root, writers in roots.items():
        value = _filled_value(root, writers, order, constants)
        if value is None:
            continue
        name = f"c_filled_{root.name}"
        with graph.inserting_before(first_input):
            placeholder = graph.placeholder(name)
        placeholder.meta["val"] = root.meta["val"]
        for writer in reversed(writers):
            graph.erase_node(writer)
        root.replace_all_uses_with(placeholder)
        graph.erase_node(root)
        folded.append((name, value))
    return folded


def _filled_value(root: torch.fx.Node, writers: list[torch.fx.Node],
                  order: dict, constants: dict[str, Any]) -> torch.Tensor | None:
    """The value ``root`` holds after ``writers``, when it is freshly allocated, every size,
    index and value involved is a constant, and nothing reads it before the last write."""
    if root.target not in _FRESH:
        return None
    aliases = _aliases(root)
    region = set(aliases) | set(writers)
    last = max(order[writer] for writer in writers)
    if any(order[user] < last for alias in aliases for user in alias.users
           if user not in region):
        return None  # read while still being written

    def constant(node):
        value = node.meta.get("val")
        if isinstance(value, (int, float, bool)) and not isinstance(value, torch.SymInt):
            return value
        lifted = constants.get(node.name) if node.op == "placeholder" else None
        if isinstance(lifted, torch.Tensor) and lifted.numel() == 1:
            return lifted  # a fill value the tracer lifted as a tensor (torch 2.14)
        raise LookupError(node.name)

    values: dict[torch.fx.Node, Any] = {}
    try:
        for node in sorted(region, key=order.__getitem__):
            if node is root and root.target.__name__.startswith("new_"):
                dtype = root.args[0].meta["val"].dtype
                args = (torch.empty(0, dtype=dtype),) + torch.fx.node.map_arg(
                    root.args[1:], constant)
                kwargs = torch.fx.node.map_arg(root.kwargs, constant)
            else:
                args, kwargs = torch.fx.node.map_arg(
                    (node.args, node.kwargs),
                    lambda n: values[n] if n in values else constant(n))
            values[node] = node.target(*args, **kwargs)
    except LookupError:  # a size or value from the run: functionalization handles it
        return None
    value = values[root]
    fake = root.meta.get("val")
    if not isinstance(fake, torch.Tensor) or tuple(fake.shape) != tuple(value.shape):
        return None
    return value


_DATA_DEPENDENT = {torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output}


def _sizes_follow_from_sizes(graph: torch.fx.Graph, weight_dtypes: dict) -> bool:
    """True when every op of ``graph`` is an ATen op whose result sizes follow from its
    inputs' sizes. Otherwise (a boolean index, nonzero, NMS, a value read back) the fake run
    gives the sizes that depend on values as symbols, which the tracer's types fix to this
    run's: the graph is then propagated op by op."""
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if target is torch.ops.aten.index.Tensor and _integer_indices(node, weight_dtypes) \
                or target in _NUMBER_READS:
            # (An index's size is its indices': swin's relative position bias. A read of a
            # number is a size or stops the propagation from the trace when it is reached.)
            continue
        if isinstance(target, torch._ops.OpOverload):
            if target.namespace != "aten" or _DATA_DEPENDENT.intersection(target.tags):
                return False
        elif isinstance(target, torch._ops.OperatorBase):
            return False
    return True


def _integer_indices(node: torch.fx.Node, weight_dtypes: dict) -> bool:
    """True when every index of an ``aten.index.Tensor`` node is an integer tensor (a traced
    result or a weight; a boolean one selects a number of elements known only from values)."""
    def dtype(index):
        if index in weight_dtypes:
            return weight_dtypes[index]
        return index.meta[_TRACED_SHAPE][0] if _TRACED_SHAPE in index.meta else None

    indices = node.args[1] if len(node.args) > 1 else None
    return isinstance(indices, (list, tuple)) and all(
        index is None or isinstance(index, torch.fx.Node) and dtype(index) in _INDEX_TYPES
        for index in indices)


def _traced_meta(traced: tuple) -> tuple:
    """The type the tracer recorded as an empty meta tensor and its device; for an op writing
    into its first argument, that type as recorded (compared with the argument's)."""
    dtype, sizes, strides, device, in_place = traced
    if in_place:
        return traced
    return torch.empty_strided(sizes, strides, dtype=dtype, device="meta"), device


def _fake_of_type(mode: Any, traced: tuple, args: tuple) -> torch.Tensor | None:
    """A fake tensor of the type the tracer recorded (:func:`_traced_meta`): a new one, or
    for an op writing into its first argument that argument itself, when the write left its
    type as recorded (else None: the op changed its metadata, and is run on fake tensors)."""
    if len(traced) == 2:
        meta, device = traced
        return mode.fake_tensor_converter.from_meta_and_device(mode, meta, device)
    dtype, sizes, strides, device, _ = traced
    written = args[0] if args else None
    if isinstance(written, torch.Tensor) and written.dtype == dtype and \
            tuple(written.shape) == sizes and tuple(written.stride()) == strides and \
            written.device == device:
        return written
    return None


def _meta_like(tensor: torch.Tensor) -> torch.Tensor | None:
    """An empty meta tensor with ``tensor``'s size, strides, dtype and requires_grad; None for
    anything but a plain dense tensor or parameter."""
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter) or \
            tensor.layout != torch.strided or tensor.is_quantized or tensor.is_meta:
        return None
    meta = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype,
                               device="meta")
    return meta.requires_grad_(tensor.requires_grad) if tensor.requires_grad else meta


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
    remap: dict[torch.fx.Node, torch.fx.Node] = {}
    first_input = None
    for node in graph_module.graph.nodes:
        if weights is not None and node.op == "get_attr":
            value = _attribute(graph_module, node.target)
            if isinstance(value, torch.Tensor):
                _, prefix = _weight_kind(graph_module, node.target)
                with graph.inserting_before(first_input) if first_input is not None else \
                        contextlib.nullcontext():  # (before any input: in order, at the end)
                    remap[node] = graph.placeholder(prefix + node.target.replace(".", "_"))
                weights.append((remap[node], node.target, value))
                continue
        if node.target is operator.getitem and isinstance(node.args[0], (list, tuple)):
            # An item of a list the converter built (a list unpacked): that item itself.
            item = node.args[0][node.args[1]]
            if not isinstance(item, torch.fx.Node):
                return None
            remap[node] = remap[item]
            continue
        size = _size_read_back(node)
        if size is not None:
            remap[node] = remap[size]
            continue
        scalar = _scalar_tensor_call(node)
        if scalar is not None:
            remap[node] = graph.call_function(torch.ops.aten.scalar_tensor.default, *scalar)
            remap[node].meta = dict(node.meta)
            continue
        if node.op == "call_function":
            target = (prim_loop if node.target is prim_loop else
                      torch.ops.higher_order.cond if node.target is torch.cond else
                      # One op, which translation makes one Shape (propagation runs the
                      # replacement: a fake tensor has no data for the ATen op to read).
                      torch.ops.aten._shape_as_tensor.default
                      if node.target is _shape_as_tensor else _overload_of(node))
            if target is None:
                return None
        elif node.op not in ("placeholder", "get_attr", "output"):
            return None  # a call_module: a branch or loop body of a scripted model
        if node.op == "call_function" and target is torch.ops.aten.IntImplicit.default:
            # A tensor's value as an int (a box's size in torchvision's paste loop): on fake
            # tensors IntImplicit guards on the value, _local_scalar_dense makes it a symbol.
            target = torch.ops.aten._local_scalar_dense.default
        remap[node] = graph.node_copy(node, lambda n: remap[n])
        if node.op == "placeholder" and first_input is None:
            first_input = remap[node]
        if node.op == "call_function":
            remap[node].target = target
        if node.target is torch.cond and not _returns_several(_attribute(graph_module,
                                                                         node.args[1].target)):
            # The converter uses a one-output cond as that output; torch's cond returns a
            # tuple.
            with graph.inserting_after(remap[node]):
                remap[node] = graph.call_function(operator.getitem, (remap[node], 0))
    return graph


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
    dtype = (_TORCH_ENUM_TO_DTYPE[dtype] if dtype is not None else
             torch.bool if isinstance(number, bool) else
             torch.int64 if isinstance(number, int) else torch.get_default_dtype())
    return (number,), {"dtype": dtype}


def _returns_several(module: torch.fx.GraphModule) -> bool:
    output = next(n for n in module.graph.nodes if n.op == "output")
    return isinstance(output.args[0], (list, tuple))


def _attribute(module: torch.nn.Module, path: str) -> Any:
    for part in path.split("."):
        module = getattr(module, part)
    return module


def _aten_module(body: torch.fx.GraphModule) -> torch.fx.GraphModule | None:
    graph = _aten_graph(body)
    if graph is None or any(node.op == "get_attr" and not isinstance(
            _attribute(body, node.target), torch.Tensor) for node in graph.nodes):
        return None  # (a loop in a loop, a branch in a loop: not yet)
    return torch.fx.GraphModule(body, graph)


def _propagate_loop(shape_env: Any, body: torch.fx.GraphModule, trip_count: Any,
                    carried: tuple, outer: tuple) -> tuple:
    """What :data:`prim_loop` returns, on fake tensors; each body node gets its
    ``meta["val"]``. A dim of a carried tensor that the body changes (a tensor grown by one
    row per iteration) is a new symbol, in the body and in the results."""
    index = shape_env.create_unbacked_symint()
    torch._check_is_size(index)

    def run(state):
        return _run_subgraph(body, [*outer, index, *state])[1:1 + len(state)]

    general = _generalized(shape_env, list(carried), run(list(carried)), "a loop")
    if any(g is not c for g, c in zip(general, carried)):
        run(general)
    return tuple(general)


def _propagate_cond(shape_env: Any, pred: Any, true_branch: torch.fx.GraphModule,
                    false_branch: torch.fx.GraphModule, operands: tuple) -> tuple:
    """What ``cond`` returns, on fake tensors, each branch's nodes given their
    ``meta["val"]``: where the branches' results differ in size (an empty result for no
    boxes), the size is a new symbol."""
    return tuple(_generalized(shape_env, _run_subgraph(true_branch, list(operands)),
                              _run_subgraph(false_branch, list(operands)), "a branch"))


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
        elif node.op == "call_function":
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: values[n])
            try:
                value = _run_keeping_inputs(node.target, args, kwargs)
            except CaptureError:
                raise
            except Exception as error:
                raise CaptureError(
                    f"in a loop body or branch, {node.format_node()} failed: "
                    f"{type(error).__name__}: {_first_lines(str(error), 2)}") from error
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


def _generalized(shape_env: Any, first: list, second: list, what: str) -> list:
    """``first``, with a new symbol for each dim where ``second`` has another size."""
    general = []
    for before, after in zip(first, second):
        if not isinstance(before, torch.Tensor) or before.shape == after.shape:
            general.append(before)
            continue
        if before.dim() != after.dim() or before.dtype != after.dtype:
            raise CaptureError(f"{what} changes the rank or dtype of a tensor, which ONNX "
                               "cannot express")
        sizes = [b if b == a else shape_env.create_unbacked_symint()
                 for b, a in zip(before.shape, after.shape)]
        general.append(torch.empty(sizes, dtype=before.dtype, device=before.device))
    return general


class _ReadBackSizes:
    """Sizes the traced graph computes from the input's shape with tensor ops and reads back
    as numbers, while propagating with dynamic dims: each read is a new symbol with the
    example's value as its hint, so that the read stays computed at run time instead of being
    fixed to this example; and the op that fixes one anyway (it needs the exact value: a
    broadcast against a fixed size) is found and named in a warning."""

    def __init__(self, shape_env: Any, hints: Mapping[str, Any] | None):
        self._shape_env = shape_env
        self._hints = hints or {}
        self._reads: dict[Any, torch.fx.Node] = {}  # symbol -> the read it stands for
        self._fixed: dict[Any, torch.fx.Node] = {}  # symbol -> the node that fixed it
        self._replacements = 0

    def has(self, node: torch.fx.Node) -> bool:
        return node.name in self._hints

    def symbol(self, node: torch.fx.Node) -> Any:
        """A new backed symbol for ``node``'s read: guards on it are decided by the hint (the
        traced graph has no branch left to take), and it is never merged with a size of the
        same value (no duck sizing) nor specialized for being 0 or 1."""
        from torch._dynamo.source import ConstantSource
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        hint = self._hints[node.name]
        source = ConstantSource(f"read_back_{node.name}")
        symbol = self._shape_env.create_unspecified_symbol(hint, source,
                                                           dynamic_dim=DimDynamic.DYNAMIC)
        self._reads[symbol] = node
        if isinstance(hint, float):
            return self._shape_env.create_symfloatnode(symbol, hint=hint, source=source)
        return self._shape_env.create_symintnode(symbol, hint=hint, source=source)

    def check(self, node: torch.fx.Node) -> None:
        """Note the reads that ``node``'s propagation fixed to a number (cheap when none: a
        fixed symbol is a new replacement)."""
        replacements = len(self._shape_env.replacements)
        if not self._reads or replacements == self._replacements:
            return
        self._replacements = replacements
        for symbol in self._reads:
            if symbol not in self._fixed and self._shape_env.replace(symbol).is_number:
                self._fixed[symbol] = node

    def warn(self, graph_module: torch.fx.GraphModule, tensors: tuple, dynamic: list) -> None:
        """Warn for each fixed read whose value changes with the dynamic dims (an extra run
        at other sizes tells: torchvision pads the channels by 3 - 3, which convolution
        fixes to 0, rightly); for every fixed read when that run fails."""
        if not self._fixed:
            return
        names = {self._reads[symbol].name for symbol in self._fixed}
        try:
            other = _read_back_values(graph_module, _other_sizes(tensors, dynamic), names)
        except Exception:
            other = {}
        for symbol, fixer in self._fixed.items():
            read = self._reads[symbol]
            if other.get(read.name, object()) == self._hints[read.name]:
                continue
            warnings.warn(
                f"a size that the model computes from the input's shape with tensor ops and "
                f"reads back as a number (at {_source_of(_first_located(read))}) was fixed to "
                f"this example's value {self._shape_env.replace(symbol)} by "
                f"{_overload_name(fixer)}, which needs it exact (at {_source_of(fixer)}): the "
                "ONNX model does not follow the dynamic axes there", TracingWarning)


def _other_sizes(tensors: tuple, dynamic: list) -> tuple:
    """The example inputs grown by about half along each dynamic axis (repeating their
    values, so that data-dependent steps see alike data)."""
    grown = []
    for tensor, axes in zip(tensors, dynamic):
        for axis in axes or {}:
            size = tensor.shape[axis]
            tensor = torch.cat([tensor, tensor], axis).narrow(axis, 0, size + size // 2 + 1)
        grown.append(tensor)
    return tuple(grown)


def _first_located(node: torch.fx.Node) -> torch.fx.Node:
    """``node`` when it knows its source line, else its first user that does (the converter
    gives the reads it inserts for a traced size no stack)."""
    if node.meta.get("stack_trace"):
        return node
    return next((user for user in node.users if user.meta.get("stack_trace")), node)


def _overload_name(node: torch.fx.Node) -> str:
    target = node.target
    return str(target.name()) if isinstance(target, torch._ops.OpOverload) else node.name


def _read_back_hints(graph_module: torch.fx.GraphModule, tensors: tuple) -> dict[str, Any]:
    """The number each read-back of a size computed with tensor ops (torchvision's resize
    scale, interpolate's output size, the anchors' strides) gives on the example, by node
    name: the hints of :class:`_ReadBackSizes`."""
    names = {node.name for node in _shape_reads(graph_module)}
    return _read_back_values(graph_module, tensors, names) if names else {}


def _read_back_values(graph_module: torch.fx.GraphModule, tensors: tuple,
                      names: set[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if node.name in names and isinstance(result, (int, float)) \
                    and not isinstance(result, bool):
                values[node.name] = result
            return result

    with torch.no_grad():
        Recorder(graph_module).run(*tensors)
    return values


def _size_number(node: torch.fx.Node, args: tuple, kwargs: dict,
                 numbers: dict[torch.fx.Node, Any]) -> Any:
    """The integer a node's 0-d integer tensor holds, or that a read of such a tensor gives,
    when it is computed from sizes alone (the tracer keeps ``x.size(-1) // 2`` as tensors), so
    that reading it back is that size (symbolic or not) rather than an unknown number; else
    None."""
    target = node.target
    if target in _SCALAR_TENSORS:
        number = args[0] if args else None
        dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
        if isinstance(number, (int, torch.SymInt)) and not isinstance(number, bool) and \
                dtype in (None, *_INDEX_TYPES):
            return number
        return None
    if target in _NUMBER_READS or (target is torch.ops.aten._to_copy.default and set(kwargs) <=
                                   {"dtype"} and kwargs.get("dtype") in _INDEX_TYPES):
        source = node.args[0] if len(node.args) == 1 else None
        if isinstance(source, int) and not isinstance(source, bool):
            return source  # a read made a number already
        return numbers.get(source) if isinstance(source, torch.fx.Node) else None
    if target is torch.ops.aten._to_copy.default:
        return None
    operation = _NUMBER_ARITHMETIC.get(target)
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) == 3 else 1)
    if operation is None or len(node.args) not in (2, 3) or alpha != 1 or \
            set(node.kwargs) - {"alpha"}:
        return None
    operands = [numbers.get(a) if isinstance(a, torch.fx.Node) else a for a in node.args[:2]]
    if all(isinstance(o, (int, torch.SymInt)) and not isinstance(o, bool) for o in operands):
        return operation(*operands)
    return None


def _replace_uses(node: torch.fx.Node, number: int) -> None:
    for user in list(node.users):
        user.args, user.kwargs = torch.fx.node.map_arg(
            (user.args, user.kwargs), lambda n: number if n is node else n)


_NUMBER_READS = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default,
                 torch.ops.aten.ScalarImplicit.default)
_NUMBER_ARITHMETIC = {
    torch.ops.aten.add.Tensor: operator.add, torch.ops.aten.sub.Tensor: operator.sub,
    torch.ops.aten.mul.Tensor: operator.mul, torch.ops.aten.floor_divide.default: operator.floordiv,
    torch.ops.aten.add.Scalar: operator.add, torch.ops.aten.sub.Scalar: operator.sub,
    torch.ops.aten.mul.Scalar: operator.mul, torch.ops.aten.rsub.Scalar: lambda a, b: b - a,
    torch.ops.aten.rsub.Tensor: lambda a, b: b - a,
    torch.ops.aten.remainder.Scalar: operator.mod, torch.ops.aten.remainder.Tensor: operator.mod,
}


def _size_read_back(node: torch.fx.Node) -> torch.fx.Node | None:
    """The size node when ``node`` reads back a size the tracer made a tensor
    (``_local_scalar_dense(_to_copy(scalar_tensor(sym_size(x, d))))``, from ``x.size(d)``
    passed to a view): the same integer, kept symbolic."""
    if node.target not in _SCALAR_READS:
        return None
    source = node.args[0]
    while isinstance(source, torch.fx.Node) and source.target is torch.ops.aten._to_copy.default \
            and set(source.kwargs) <= {"dtype"} and source.kwargs.get("dtype") in _INDEX_TYPES:
        source = source.args[0]
    if not (isinstance(source, torch.fx.Node) and source.target in _SCALAR_TENSORS):
        return None
    size = source.args[0]
    if isinstance(size, torch.fx.Node) and size.target in _SHAPE_READS:
        return size
    if isinstance(size, torch.fx.Node) and source.kwargs.get("dtype") in _INDEX_TYPES and \
            node.target is torch.ops.aten.IntImplicit.default:
        # An int made a tensor and read back (torchvision passes the image size to a
        # scripted loop so): that int.
        return size
    return None


_INDEX_TYPES = (torch.int32, torch.int64)
_SCALAR_TENSORS = (torch.ops.aten.scalar_tensor, torch.ops.aten.scalar_tensor.default)


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
                  operator.getitem):
        return target
    return None


_SIZE_PACKETS = (torch.ops.aten.sym_size, torch.ops.aten.sym_stride, torch.ops.aten.sym_numel,
                 torch.ops.aten.sym_storage_offset, torch.ops.aten.scalar_tensor)


def _drop_runtime_asserts(program: torch.export.ExportedProgram) -> None:
    """Remove torch's runtime asserts and the size arithmetic only they use. Sizes read back
    from tensors are symbols torch knows nothing of, so it asserts what the traced shapes
    imply (``Eq(u1, 1) | Eq(u1, 7)``); ONNX Runtime checks shapes itself."""
    graph = program.graph_module.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in _RUNTIME_ASSERTS:
            graph.erase_node(node)
    graph.eliminate_dead_code()
    program.graph_module.recompile()


def _depends_on_shapes_only(node: torch.fx.Node, sized_by_data: set = frozenset()) -> bool:
    """True when ``node`` is computed from input sizes and constants, never input values
    (nor the sizes of ``sized_by_data``, tensors whose size depends on values)."""
    pending, seen = [node], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "placeholder":
            return False
        if current.op == "call_function" and current.target in _SHAPE_READS:
            if current.args and current.args[0] in sized_by_data:
                return False
            continue
        pending.extend(current.all_input_nodes)
    return True


def _shape_reads(graph_module: torch.fx.GraphModule) -> list[torch.fx.Node]:
    sized_by_data = _sized_by_data(graph_module)
    return [node for node in graph_module.graph.nodes
            if node.target in _SCALAR_READS and _depends_on_shapes_only(node, sized_by_data)]


# Ops whose result's size depends on the values of their inputs.
_DATA_SIZED = {torch.ops.aten.nonzero.default, torch.ops.aten.masked_select.default,
               torch.ops.aten.index.Tensor, torch.cond}


def _sized_by_data(graph_module: torch.fx.GraphModule) -> set:
    """In a graph with a loop, the tensors whose size depends on values (after a boolean
    index, NMS, the loop itself...): a read of their size is the loop's count or alike, and
    stays symbolic (it is fixed in other graphs, which torch.export captures again)."""
    nodes = graph_module.graph.nodes
    if not any(node.target is prim_loop for node in nodes):
        return set()
    sized: set = set()
    for node in nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if target in _DATA_SIZED or target is prim_loop or (
                getattr(target, "namespace", None) == "torchvision") or any(
                n in sized for n in node.all_input_nodes if n.target not in _SHAPE_READS):
            sized.add(node)
    return sized


def _fix_scalar_reads(graph_module: torch.fx.GraphModule, tensors: tuple,
                      reads: list[torch.fx.Node]) -> None:
    """Replace each read of a tensor as a number by the number this run reads. Only what
    the reads depend on runs (sizes, mostly), not the whole model again."""
    if not reads:
        return
    values: dict[torch.fx.Node, Any] = {}
    needed: set[torch.fx.Node] = set()
    pending = list(reads)
    while pending:
        node = pending.pop()
        if node not in needed:
            needed.add(node)
            if _traced_size(node) is None:  # (the size of a tensor needs not its value)
                pending.extend(node.all_input_nodes)

    # Run in order, without torch.fx.Interpreter's steps for each node of the graph (most
    # are not needed: GPT-2's 3 ms).
    inputs = iter(tensors)
    with torch.no_grad():
        for node in graph_module.graph.nodes:
            if node.op == "placeholder":
                values[node] = next(inputs)
            elif node not in needed:
                continue
            elif (size := _traced_size(node)) is not None:
                values[node] = size
            elif node.op == "get_attr":
                values[node] = _attribute(graph_module, node.target)
            else:
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
                if node.op == "call_method":  # (each kind run as torch.fx.Interpreter does)
                    values[node] = getattr(args[0], node.target)(*args[1:], **kwargs)
                elif node.op == "call_module":
                    values[node] = _attribute(graph_module, node.target)(*args, **kwargs)
                else:
                    values[node] = node.target(*args, **kwargs)
    for node in reads:
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda n: values[n] if n is node else n)
            user.kwargs = torch.fx.node.map_arg(
                user.kwargs, lambda n: values[n] if n is node else n)
        graph_module.graph.erase_node(node)
    _eliminate_dead_code(graph_module.graph)
    graph_module.recompile()


def _traced_size(node: torch.fx.Node) -> int | None:
    """What ``sym_size(x, axis)`` read while tracing, when the tracer recorded x's sizes."""
    if node.target in (torch.ops.aten.sym_size, torch.ops.aten.sym_size.int) and \
            len(node.args) == 2 and isinstance(node.args[0], torch.fx.Node) and \
            isinstance(node.args[1], int):
        _, sizes = node.args[0].meta.get(_TRACED_SHAPE, (None, None))
        if sizes is not None and -len(sizes) <= node.args[1] < len(sizes):
            return sizes[node.args[1]]
    return None


def _source_of(node: torch.fx.Node) -> str:
    frames = node.meta.get("stack_trace", "").strip().splitlines()
    return frames[-1].strip() if frames else node.name


def _frozen(model: torch.jit.ScriptModule | torch.jit.ScriptFunction):
    """A scripted model with its attributes folded in (``self.training`` and the like are
    then constants and their branches gone), parameters kept as parameters."""
    if isinstance(model, torch.jit.ScriptFunction):
        return model
    frozen = torch._C._freeze_module(model.eval()._c, preserveParameters=True)
    return torch.jit._recursive.wrap_cpp_module(frozen)


def _trace(wrapper: torch.nn.Module, tensors: tuple) -> _ConverterState:
    """One run of the tracer, as torch.jit.trace does but without wrapping every submodule in
    a ScriptModule (most of its time on a model of many small modules): the graph's inputs are
    the tensors, then every parameter and buffer, named by its path."""
    from torch.jit._trace import _create_interpreter_name_lookup_fn

    state = torch.jit._unique_state_dict(wrapper, keep_vars=True)
    # The module paths the tracer records as each call's scope (torch.jit.trace's own names).
    scopes: dict[torch.nn.Module, str] = {}

    def name_children(module, prefix):
        for name, child in module.named_children():
            scopes[child] = f"{prefix}.{name}"
            name_children(child, scopes[child])

    name_children(wrapper, "__module")
    count = len(tensors)
    previous = torch.jit._trace._trace_module_map
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.jit._trace._trace_module_map = scopes
            # Not under no_grad: with gradients off, nn.MultiheadAttention and the
            # Transformer layers take their fused inference kernels (one
            # aten::_native_multi_head_attention), which have no ONNX translation.
            with _warn_on_index(), packed_sequences_as_padded():
                graph, _ = torch._C._create_graph_by_tracing(
                    lambda *inputs: wrapper(*inputs[:count]),
                    [*tensors, *state.values()], _create_interpreter_name_lookup_fn(),
                    False, False)
        except Exception as error:
            raise CaptureError(
                f"torch.jit.trace could not run the model: {type(error).__name__}: "
                f"{_first_lines(str(error))}\nThe stage that failed is capture (tracing)."
            ) from error
        finally:
            torch.jit._trace._trace_module_map = previous
    _report_fixed_values(caught)
    # Functions the model scripts inside a trace (torchvision's batched_nms, through
    # _script_if_tracing) are calls in this graph; the converter takes them inlined, as
    # torch.jit.trace's inlined_graph has them.
    torch._C._jit_pass_inline(graph)
    values = list(graph.inputs())[count:]
    for value, name in zip(values, state):
        value.setDebugName(name)
    if [value.debugName() for value in values] != list(state):
        raise CaptureError(f"the tracer renamed the model's weights ({', '.join(state)}); "
                           "this is a bug of onnxport's tracing, please report it")
    parameters = {n: t for n, t in state.items() if isinstance(t, torch.nn.Parameter)}
    return _ConverterState(None, graph, parameters,
                           {n: t for n, t in state.items() if n not in parameters}, {}, {})


@contextlib.contextmanager
def _warn_on_index():
    """The tracer fixes a tensor used as an index or a count (``range(t)``) silently; it warns
    for ``int(t)`` and ``bool(t)``. Warn for those too, from the line that does it."""
    original = torch.Tensor.__index__
    torch_folder = os.path.dirname(torch.__file__) + os.sep

    def index(tensor):
        # torch's own calls (a size list given to an op) are traced as values, not fixed.
        if torch.jit.is_tracing() and not sys._getframe(1).f_code.co_filename.startswith(
                torch_folder):
            warnings.warn("Using a tensor as a Python index or count might cause the trace to "
                          "be incorrect: its value is treated as a constant",
                          torch.jit.TracerWarning, stacklevel=2)
        return original(tensor)

    torch.Tensor.__index__ = index
    try:
        yield
    finally:
        torch.Tensor.__index__ = original


def _report_fixed_values(caught: list[warnings.WarningMessage]) -> None:
    """One TracingWarning per place where the trace fixed a value, at that place; other
    warnings the model raised are passed on unchanged, torch's deprecation notice for
    ``torch.jit.trace`` dropped (the user did not call it)."""
    seen = set()
    for record in caught:
        if issubclass(record.category, torch.jit.TracerWarning):
            key = (record.filename, record.lineno, str(record.message))
            if key in seen:
                continue
            seen.add(key)
            warnings.warn_explicit(
                f"tracing recorded a value of this example as a constant: "
                f"{record.message} (at {record.filename}:{record.lineno})",
                TracingWarning, record.filename, record.lineno)
        elif issubclass(record.category, FutureWarning) and "torch.jit.trace" in str(record.message):
            continue
        else:
            warnings.warn_explicit(record.message, record.category, record.filename,
                                   record.lineno)


def _script_state(scripted: torch.jit.ScriptModule | torch.jit.ScriptFunction,
                  ) -> _ConverterState:
    """A scripted model's inlined graph, with its parameters and buffers known by name (not by
    comparing values, which takes a buffer equal to a parameter for that parameter)."""
    is_module = isinstance(scripted, torch.jit.ScriptModule)
    return _ConverterState(
        ts_model=scripted, ts_graph=scripted.inlined_graph if is_module else scripted.graph,
        name_to_param=dict(scripted.named_parameters()) if is_module else {},
        name_to_buffer=dict(scripted.named_buffers()) if is_module else {},
        name_to_non_tensor_attributes={}, name_to_constant={})


def _to_fx(state: _ConverterState) -> torch.fx.GraphModule:
    """The TorchScript graph as an FX graph of ATen calls (torch's converter)."""
    # TS2EPConverter's own setup passes the graph through torch.onnx's jit passes (function
    # substitution, parameter listing) and its convert() re-exports with every dim dynamic;
    # only its graph converter is used.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # (A traced graph has no branch: walking its nodes in Python is then time lost.)
            if state.ts_graph.findNode("prim::If", True) is not None and \
                    _drop_raising_branches(state.ts_graph):
                # What the checks were about (a rank, an optional argument) is constant now.
                torch._C._jit_pass_constant_propagation(state.ts_graph)
                torch._C._jit_pass_dce(state.ts_graph)
            paths = _lift_attributes(state)
            blocks, attribute_names = _lifted_attributes(state.ts_graph)
            attribute_names.update(paths)
            graph_converter = _converter_class()(
                state.ts_graph, state.name_to_param, state.name_to_buffer, blocks,
                state.name_to_non_tensor_attributes, state.name_to_constant, attribute_names)
            graph_module = graph_converter.convert()
            graph_module._onnxport_parameters = set(state.name_to_param)
            graph_module._onnxport_buffers = set(state.name_to_buffer)
    except Exception as error:
        cause = error
        while cause is not None and not isinstance(cause, CaptureError):
            cause = cause.__cause__
        if cause is not None:  # ours, naming the construct and its line
            raise CaptureError(str(cause)) from error
        raise CaptureError(
            f"the traced TorchScript graph could not be turned into ATen calls: "
            f"{type(error).__name__}: {_first_lines(str(error))}\nThe stage that failed is "
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
    has none (80 ms of densenet121's conversion)."""
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
    node become the FX nodes' ``nn_module_stack`` and ``stack_trace``, as torch.export's own."""
    from torch._export.converter import (
        TS2FXGraphConverter, get_op_overload, ir_name_to_func_name)

    class Converter(TS2FXGraphConverter):
        def convert(self) -> torch.fx.GraphModule:
            # TS2FXGraphConverter.convert, less two code generations of the whole graph (a
            # tenth of a second each on a mid-size model): the module generates its code when
            # first called, and the size-division rewrite runs only on graphs that have one;
            # and less its lint: the graph is copied node by node in order next
            # (_aten_graph), which finds what lint would.
            from torch._export.converter import inplace_optimize_sym_size_div
            from torch.fx._lazy_graph_module import _LazyGraphModule

            self.convert_graph_inputs()
            for node in self.ts_graph.nodes():
                self.convert_node(node)
            self.convert_graph_outputs()
            graph_module = _LazyGraphModule(
                {**self.subgraphs, **self.name_to_param, **self.name_to_buffer,
                 **self.name_to_non_tensor_attribute, **self.name_to_constant},
                self.fx_graph)
            if any(node.target is torch.ops.aten.div.Scalar_mode
                   for node in self.fx_graph.nodes):
                inplace_optimize_sym_size_div(graph_module)
            return graph_module

        def convert_prim_Loop(self, node):
            _check_loop_condition(self, node)
            trip_count = self.get_fx_value_by_ir_value(next(iter(node.inputs())))
            if isinstance(trip_count, int):
                return super().convert_prim_Loop(node)  # unrolled, as torch's converter does
            _convert_loop(self, node, trip_count)

        def convert_call_function_op(self, node):
            # TS2FXGraphConverter.convert_call_function_op, the overload and its arguments'
            # kinds looked up once per schema.
            schema = node.schema()
            found = _OVERLOADS.get(schema)
            if found is None:
                target = get_op_overload(node)
                found = _OVERLOADS[schema] = (target, tuple(
                    (argument.name, argument.kwarg_only)
                    for argument in target._schema.arguments))
            target, arguments = found
            args, kwargs = [], {}
            for value, (name, kwarg_only) in zip(node.inputs(), arguments):
                if kwarg_only:
                    kwargs[name] = self.get_fx_value_by_ir_value(value)
                else:
                    args.append(self.get_fx_value_by_ir_value(value))
            fx_node = self.fx_graph.call_function(target, tuple(args), kwargs)
            if node.outputsSize() == 1:
                self.name_to_node[node.output().debugName()] = fx_node
            else:
                for k, output in enumerate(node.outputs()):
                    self.name_to_node[output.debugName()] = self.fx_graph.call_function(
                        operator.getitem, (fx_node, k))

        def convert_node(self, node):
            kind = node.kind()
            if kind in _MAKES_NO_CALL:
                try:
                    return getattr(self, _MAKES_NO_CALL[kind])(node)
                except Exception as error:
                    raise RuntimeError(f"TS2EPConverter failed for node {kind}") from error
            last = next(iter(reversed(self.fx_graph.nodes)), None)
            # TS2FXGraphConverter.convert_node, less the text of every node it prints for a
            # debug log (a tenth of the conversion).
            handler = getattr(self, ir_name_to_func_name(kind), self.convert_call_function_op)
            try:
                handler(node)
            except Exception as error:
                raise RuntimeError(f"TS2EPConverter failed for node {kind}") from error
            meta = None  # read only for nodes that made calls: most (constants, lists) make none
            for fx_node in reversed(self.fx_graph.nodes):
                if fx_node is last:
                    break
                if fx_node.op == "call_function":
                    meta = _provenance(node) if meta is None else meta
                    fx_node.meta.update(meta)
            if meta is not None and node.outputsSize() == 1:
                _record_traced_type(node, self.name_to_node.get(node.output().debugName()))

    return Converter


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
    converter's) and its result is either a new tensor or its first argument written into (a
    view must share its base's storage: it is still run on fake tensors)."""
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


@functools.cache
def _traced_type_kind(target: Any, kind: str) -> bool | None:
    """For :func:`_record_traced_type`, once per op: None when the tracer's type of a ``kind``
    node converted to a call of ``target`` cannot stand for its fake run, else whether the
    call returns its first argument written into."""
    schema = getattr(target, "_schema", None)
    if schema is None or schema.name != _CONVERTED_AS.get(kind, kind) or \
            len(schema.returns) != 1:
        return None
    alias = schema.returns[0].alias_info
    in_place = alias is not None and alias.is_write and bool(schema.arguments) and \
        schema.arguments[0].alias_info is not None and \
        schema.arguments[0].alias_info.before_set == alias.before_set
    if alias is not None and not in_place or schema.is_mutable and not in_place:
        return None
    return in_place


def _convert_loop(converter: Any, node: torch._C.Node, trip_count: torch.fx.Node) -> None:
    """A ``for`` loop whose count is a value of the run (``range(masks.size(0))`` in a function
    torchvision scripts when traced: one iteration per detection) as one :data:`prim_loop`
    call, its body a subgraph: ONNX Loop in translation."""
    inputs = list(node.inputs())
    where = _loop_line(node)
    carried = [converter.get_fx_value_by_ir_value(value) for value in inputs[2:]]
    names = list(converter._identify_inputs_as_arguments(node))
    for block in node.blocks():
        names += sorted(set(converter.blocks_to_lifted_attrs[block]) - set(names))
    (body,), (body_converter,) = converter._convert_block_to_subgraph(node, names)
    if body_converter.name_update_from_subblock_to_parent:
        raise CaptureError(
            f"a loop ({where}) writes in place to tensors made "
            "before it, which ONNX Loop cannot express; return the updated tensors instead")
    outer = [converter.get_fx_value_by_fqn(name) for name in names]
    loop = converter.fx_graph.call_function(
        prim_loop, (body, trip_count, tuple(carried), tuple(outer)))
    for k, output in enumerate(node.outputs()):
        converter.name_to_node[output.debugName()] = converter.fx_graph.call_function(
            operator.getitem, (loop, k))


def _loop_line(node: torch._C.Node) -> str:
    return (node.sourceRange().splitlines() or ["?"])[0].strip()


def _check_loop_condition(converter: Any, node: torch._C.Node) -> None:
    inputs = list(node.inputs())
    condition = next(next(node.blocks()).outputs())
    start = converter.get_fx_value_by_ir_value(inputs[1])
    if not (isinstance(start, (bool, int)) and start and (
            condition.node().kind() == "prim::Constant" and condition.toIValue()
            or condition.debugName() == inputs[1].debugName())):
        raise CaptureError(
            f"TorchScript prim::Loop: a `while` loop whose condition is computed in the loop "
            f"({_loop_line(node)}) is not supported yet; a `for` loop over range(n) is")


class _PrimLoop(torch._ops.HigherOrderOperator):
    """``prim_loop(body, trip_count, carried, outer)``: ``trip_count`` times, ``body(*outer, i,
    *carried)`` returns (condition, *carried); the last carried values are the results. Unlike
    torch's while_loop, the carried tensors may change shape from one iteration to the next
    (torchvision grows its pasted masks by one per iteration with cat), as in ONNX Loop."""

    def __init__(self):
        super().__init__("onnxport_prim_loop")

    def __call__(self, body, trip_count, carried, outer):
        carried = list(carried)
        for i in range(int(trip_count)):
            carried = list(body(*outer, i, *carried)[1:1 + len(carried)])
        return tuple(carried)


prim_loop = _PrimLoop()


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


def _provenance(node: torch._C.Node) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    scope = node.scopeName().split("/")[-1].removeprefix("__module.").removeprefix(_PREFIX)
    if scope and scope != _PREFIX.rstrip("."):
        meta["nn_module_stack"] = {scope: (scope, "torch.nn.Module")}
    # The model's frames only, innermost first: from the wrapper that calls it (_TracedCall)
    # outwards the stack is onnxport's and the caller's, which would be taken as the user's
    # line where the model has none of its own (an nn.Sequential of torch's modules, whose
    # line is torch's on the dynamo path).
    frames = []
    for match in _SOURCE_RANGE_LINE.finditer(node.sourceRange()):  # (not read past the model)
        path, line, function = match.groups()
        if path == _THIS_FILE:
            break
        frames.append(f'  File "{path}", line {line}, in {function}')
    if frames:  # innermost first in a source range, last in a Python traceback
        meta["stack_trace"] = "\n".join(reversed(frames)) + "\n"
    return meta


_THIS_FILE = _TracedCall.forward.__code__.co_filename  # as the tracer records it
# A line "<file>(<line>): <function>" of a source range (the others quote the code); one
# search of the text up to the model's outermost frame, not one match per line.
_SOURCE_RANGE_LINE = re.compile(r"^[^\S\n]*(.+)\((\d+)\): (\S+)[^\S\n]*$", re.MULTILINE)


class _Replay(torch.nn.Module):
    """Runs the converted graph node by node so that torch.export copies each node's
    provenance onto the calls it records (running the generated code would not)."""

    def __init__(self, graph_module: torch.fx.GraphModule):
        super().__init__()
        self.graph = graph_module

    def forward(self, *tensors):
        with fx_traceback.preserve_node_meta():
            return torch.fx.Interpreter(self.graph).run(*tensors)


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


_RUNTIME_ASSERTS = (torch.ops.aten._assert_scalar.default,
                    torch.ops.aten.sym_constrain_range_for_size.default)
# (ScalarImplicit: how the tracer reads back a size it made a tensor for arange's end, in
# torchvision's RPN.)
_SCALAR_READS = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default,
                 torch.ops.aten.ScalarImplicit.default, torch.ops.aten.IntImplicit.default)
_SHAPE_READS = (torch.ops.aten.sym_size, torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel,
                torch.ops.aten.sym_numel.default, torch.ops.aten._shape_as_tensor.default,
                _shape_as_tensor)

# Ops the tracer records (torchvision calls them when tracing) that torch.export cannot run
# with symbolic sizes, and the same computation in ops it can.
_SYMBOLIC_REPLACEMENTS = {torch.ops.aten._shape_as_tensor.default: _shape_as_tensor}
# The converter calls the ATen overloads of int arithmetic, which take plain ints only; Python's
# operators also take the symbolic sizes torch.export passes.
_SYMBOLIC_REPLACEMENTS.update({
    getattr(torch.ops.aten, name).int: function
    for name, function in [("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                           ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                           ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                           ("floordiv", operator.floordiv), ("neg", operator.neg)]
    if hasattr(getattr(torch.ops.aten, name), "int")
})


def capture_with_fallback(
    capture_export: Callable[[], CapturedProgram] | None,
    capture_trace: Callable[[], CapturedProgram],
    *,
    fallback: bool,
    trace_name: str = "tracing",
    warn_on_fallback: bool = False,
) -> tuple[CapturedProgram, str, list[tuple[str, str]]]:
    """The captured program, the name of the strategy that produced it, and the (strategy,
    reason) of each one that failed before it.

    ``capture_export`` is the torch.export chain (None when ``dynamo=False``, and for a
    scripted model, whose graph is converted instead: ``trace_name`` "torchscript"); tracing
    comes after it only when ``fallback`` is set, with a :class:`FallbackWarning` when
    ``warn_on_fallback`` (the user chose neither path). A CaptureError may carry ``attempts``
    (the chain's own failed strategies), which are listed in order before its final reason.
    """
    if capture_export is None:
        return capture_trace(), trace_name, []
    try:
        captured = capture_export()
        return captured, _export_strategy(captured.strategy), [
            (_export_strategy(name), reason) for name, reason in captured.failed_strategies]
    except CaptureError as error:
        if not fallback:
            raise
        attempts = [(_export_strategy(name), reason)
                    for name, reason in getattr(error, "attempts", None) or []]
        attempts = attempts or [("torch.export", str(error))]
    try:
        captured = capture_trace()
    except CaptureError as error:
        attempts.append(("tracing", str(error)))
        lines = ["every capture strategy failed (torch.export, then tracing):"]
        for name, reason in attempts:
            lines.append(f"- {name}: " + reason.replace("\n", "\n    "))
        raise CaptureError("\n".join(lines)) from error
    if warn_on_fallback:
        _warn_fallback(attempts)
    return captured, "tracing", attempts


def _warn_fallback(attempts: list[tuple[str, str]]) -> None:
    from onnxport.capture.torch_export import warn_at_caller
    from onnxport.errors import FallbackWarning

    tried = "; ".join(f"{name}: {(reason.strip().splitlines() or [''])[0]}"
                      for name, reason in attempts)
    warn_at_caller(
        f"torch.export could not capture the model ({tried}); it was exported through the "
        "TorchScript path (tracing) instead, which records one run: loops unrolled, the "
        "branches taken, values read from tensors fixed (a TracingWarning names each). "
        "program.capture_attempts lists the failures; pass fallback=False to make them an "
        "error, or dynamo=False to trace without trying torch.export.", FallbackWarning)


def _export_strategy(name: str) -> str:
    """A strategy of the torch.export chain as the program records it: "torch.export (strict)"."""
    return name if name.startswith("torch.export") else f"torch.export ({name})"


def capture_model(model: Any, args: tuple, kwargs: dict, *, dynamo: bool, fallback: bool,
                  dynamic_shapes: Any = None, warn_on_fallback: bool = False, **options: Any,
                  ) -> tuple[CapturedProgram, str, list[tuple[str, str]]]:
    """The capture strategy chain: torch.export (``dynamo=True``), then tracing when
    ``fallback`` is set; tracing alone for ``dynamo=False``; a scripted model's own graph
    (torch.export cannot run TorchScript). Returns what :func:`capture_with_fallback` does.
    ``options`` are those both captures take (dim_names, input_names, output_names...)."""
    scripted = isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))
    if not scripted:  # tracing cannot read quantized modules' packed weights either
        from onnxport.capture.quantized_modules import as_reference

        model = as_reference(model)
    export = None
    if dynamo and not scripted:
        def export():
            return capture_torch_export(model, args, kwargs, dynamic_shapes=dynamic_shapes,
                                        **options)
    return capture_with_fallback(
        export, lambda: capture_tracing(model, args, kwargs, **options), fallback=fallback,
        trace_name="torchscript" if scripted else "tracing", warn_on_fallback=warn_on_fallback)
