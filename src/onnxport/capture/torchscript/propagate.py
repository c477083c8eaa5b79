"""The converted graph made an ExportedProgram by one fake-tensor pass over it
(:func:`_propagated`), loops and branches of scripted code included."""

from __future__ import annotations

import contextlib
import operator
from typing import Any, Mapping

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental import _config as fx_config

from onnxport.dtypes import QUANTIZED_AS_INTEGER
from onnxport.capture.common import first_lines
from onnxport.capture.quirks.recurrent_shapes import calls_recurrent_layers
from onnxport.capture.torchscript.aten_graph import (_aten_graph, _aten_module, _weight_kind,
                                                     branches_return_tuples)
from onnxport.capture.torchscript.constants import _fold_filled_constants
from onnxport.capture.torchscript.convert import (VIEW, _TRACED_SHAPE, _TRACED_TYPE,
                                                  _shape_as_tensor)
from onnxport.capture.torchscript.fake_calls import fake_call
from onnxport.capture.torchscript.fx_helpers import (_attribute, _eliminate_dead_code,
                                                    _results_listed, _source_of)
from onnxport.capture.torchscript.loops import prim_loop
from onnxport.capture.torchscript.subgraphs import _dtype_read, _propagate_cond, _propagate_loop
from onnxport.capture.torchscript.sizes import (
    _INDEX_TYPES, _NUMBER_READS, _ReadBackSizes, _fix_scalar_reads, _replace_uses, _shape_reads,
    _size_number, size_oblivious
)
from onnxport.errors import CaptureError


def _propagated_static(graph_module: torch.fx.GraphModule, tensors: tuple,
                       dynamic: list) -> torch.export.ExportedProgram | None:
    """:func:`_propagated` without dynamic dims. Sizes read back from tensors are fixed to
    this run's values first (exact: they depend on the shapes only, and no shape is dynamic):
    propagation cannot follow them, and finding that out would cost two fake runs of the
    model. A graph with a scripted branch (torchvision's batched NMS)
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


# The meta key of a converted graph of scripted code (not a trace): see _input_symbols.
SCRIPTED = "onnxport.scripted"


class _ReadsValues(Exception):
    """The graph reads a tensor's value as a number: the tracer's types, which fix what
    follows from it to this run's sizes, cannot stand for fake runs."""


def _propagated(graph_module: torch.fx.GraphModule, tensors: tuple, dynamic: list,
                hints: Mapping[str, Any] | None = None, trust_trace: bool = True,
                fixed: list | None = None) -> torch.export.ExportedProgram | None:
    """The converted graph as an ExportedProgram without exporting it again: each node is run
    once on fake tensors whose dynamic dims are symbols, which gives every node its
    ``meta["val"]`` as torch.export would (the traced program is straight-line ATen calls
    already, so tracing it again would only cost time).

    Without dynamic dims, the type the tracer recorded for a node's result stands for its fake
    run (:func:`_record_traced_type`), unless sizes in the graph depend on values
    (``trust_trace`` False: when a read of a value is reached, the pass starts again so).

    Returns None when the graph needs what only torch.export does (Python helpers to trace
    through, sizes read back from tensors, a dynamic dim that the graph fixes or equates to
    another), so that :func:`_export_traced` decides, with its errors; then the (input, axis)
    of each dynamic dim the run fixed to a number are added to ``fixed``.
    """
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    attributes: list[tuple[torch.fx.Node, str, torch.Tensor]] = []
    graph = _aten_graph(graph_module, attributes)
    if graph is None:
        return None
    bodies = _loop_bodies(graph_module, graph)
    if bodies is None:
        return None  # (an attribute neither a tensor nor a loop body)
    weights = _Weights.of(graph_module, attributes)
    inputs = [n for n in graph.nodes if n.op == "placeholder"][len(attributes):]
    if len(inputs) != len(tensors):
        return None
    output = next(n for n in graph.nodes if n.op == "output")
    # A None among the results (scripted ``return y, None``) holds its place with no output,
    # as the tensors alone are outputs.
    results, out_spec = pytree.tree_flatten(pytree.tree_map(
        lambda leaf: () if leaf is None else leaf, output.args[0]))
    if not all(isinstance(result, torch.fx.Node) for result in results):
        return None
    output.args = (tuple(results),)  # flat, as in any exported program; out_spec nests them

    shape_env = ShapeEnv()
    # Without dynamic dims, the tracer's types are the fake results (a fake run of each op,
    # its kernel and cache, was most of this pass); with them, sizes are computed as symbols.
    # (Their meta tensors are made here: under the fake mode, each would be a fake op.)
    # A view's type stands for its run only where no op writes into a tensor: a write into a
    # view or its base must then be seen by both, and only a fake run shares their storage.
    traced = {} if not trust_trace or any(dynamic) or bodies or \
        not _sizes_follow_from_sizes(graph, weights.dtypes) else _traced_metas(graph)
    run = _FakeRun(shape_env, weights, bodies, traced, hints)
    try:
        values = run.run(graph, tensors, dynamic)
    except _ReadsValues:
        return _propagated(graph_module, tensors, dynamic, hints, trust_trace=False,
                           fixed=fixed)
    except _FailedAt as failure:  # torch.export tells what is wrong, or copes
        if bodies:  # torch.export cannot run a prim_loop: say what failed here
            node, error = failure.node, failure.error
            where = f" at {node.format_node()} ({_source_of(node)})" if node is not None else ""
            raise CaptureError(
                f"the traced graph, which has a loop or branch of scripted code, could not be "
                f"propagated{where}: "
                f"{type(error).__name__}: {first_lines(str(error), 2)}") from error
        return None
    run.read_backs.warn(graph_module, tensors, dynamic)
    out_spec = _results_listed(graph, out_spec)
    _cleaned(graph, inputs, weights)
    # Symbols read from tensors are bound to the nodes that made them; translation's
    # decompositions trace with this shape env again and must not find them pending.
    shape_env.pending_fresh_unbacked_symbols.clear()
    symbols = _input_symbols(shape_env, values, inputs, dynamic,
                             bool(bodies) or graph_module.meta.get(SCRIPTED, False),
                             run.piece_counts)
    if symbols is None:
        if fixed is not None:
            fixed += _fixed_dims(shape_env, values, inputs, dynamic, run.piece_counts)
        return None
    program = _exported_program(graph, bodies, weights, inputs, list(output.args[0]),
                                tensors, out_spec, shape_env, symbols)
    if program is not None:
        # A later trace of the program (functionalizing writes into views) must treat a
        # dynamic dim that was 1 in the example as this run did: else it is fixed to 1 there
        # (swin_v2's attention from a batch of 1 got static batch shapes, which ONNX
        # Runtime's optimizer then took as the shapes).
        program.graph_module.meta["backed_size_oblivious"] = size_oblivious(tensors, dynamic)
    return program


def _loop_bodies(graph_module: torch.fx.GraphModule,
                 graph: torch.fx.Graph) -> dict[str, torch.fx.GraphModule] | None:
    """The ATen form of each loop body or branch the graph reads as an attribute, or None when
    one cannot be had or an attribute is something else."""
    bodies = {node.target: _aten_module(_attribute(graph_module, node.target))
              for node in graph.nodes if node.op == "get_attr"
              and isinstance(_attribute(graph_module, node.target), torch.fx.GraphModule)}
    if None in bodies.values() or any(node.op == "get_attr" and node.target not in bodies
                                      for node in graph.nodes):
        return None
    branches_return_tuples(graph, bodies)
    return bodies


class _Weights:
    """The graph's weights as an ExportedProgram takes them: specs, values, state dict and
    constants, with what the fake run needs of them."""

    def __init__(self):
        self.state_dict: dict[str, torch.Tensor] = {}
        self.constants: dict[str, torch.Tensor] = {}
        self.specs: list = []
        self.values: list[torch.Tensor] = []
        self.dtypes: dict[torch.fx.Node, torch.dtype] = {}

    @classmethod
    def of(cls, graph_module: torch.fx.GraphModule, attributes: list) -> "_Weights":
        from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

        weights = cls()
        for placeholder, target, value in attributes:
            kind, _ = _weight_kind(graph_module, target)
            (weights.constants if kind == InputKind.CONSTANT_TENSOR
             else weights.state_dict)[target] = value
            weights.dtypes[placeholder] = value.dtype
            weights.specs.append(InputSpec(kind, TensorArgument(placeholder.name), target,
                                           persistent=True if kind == InputKind.BUFFER else None))
            weights.values.append(value)
        return weights

    def fake_inputs(self):
        """For each weight: (value, the number it holds when the tracer kept a size as a
        constant tensor, a meta tensor of its size or None)."""
        from torch.export.graph_signature import InputKind

        kept_numbers = [  # the numbers the tracer kept as constant tensors (read before faking)
            int(weight) if spec.kind == InputKind.CONSTANT_TENSOR and weight.dim() == 0
            and weight.dtype in _INDEX_TYPES else None
            for weight, spec in zip(self.values, self.specs)]
        # A fake weight is made from an empty meta tensor of its size, which is much cheaper
        # than FakeTensorMode.from_tensor; constants, whose values the graph may read, and
        # unusual tensors still go through from_tensor.
        metas = [_meta_like(weight) if spec.kind != InputKind.CONSTANT_TENSOR else None
                 for weight, spec in zip(self.values, self.specs)]
        return list(zip(self.values, kept_numbers, metas))

    def add_constant(self, name: str, value: torch.Tensor) -> None:
        from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

        self.constants[name] = value
        self.specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), name))
        self.values.append(value)


class _FailedAt(Exception):
    """A node's fake run failed."""

    def __init__(self, node: torch.fx.Node | None, error: BaseException):
        super().__init__(str(error))
        self.node, self.error = node, error


class _FakeRun:
    """One run of the graph's nodes on fake tensors, recording each node's ``meta["val"]``."""

    def __init__(self, shape_env, weights: _Weights, bodies: dict, traced: dict, hints):
        self.shape_env, self.weights, self.bodies = shape_env, weights, bodies
        self.traced, self.hints = traced, hints
        self.read_backs = _ReadBackSizes(shape_env, hints)
        self.piece_counts: set[int] = set()  # the guards on how many pieces a split made

    def run(self, graph: torch.fx.Graph, tensors: tuple, dynamic: list) -> dict:
        """The fake value of each node; raises _ReadsValues, or _FailedAt naming the node."""
        from torch._dispatch.python import enable_python_dispatcher
        from torch._subclasses.fake_tensor import FakeTensorMode

        oblivious = size_oblivious(tensors, dynamic)
        weights = iter(self.weights.fake_inputs())  # (before the fake mode: real ops)
        metas = [None if axes else _meta_like(tensor) for tensor, axes in zip(tensors, dynamic)]
        node = None
        try:
            # (The python dispatcher lets composite ops take sizes read from tensors, as a graph
            # with a loop has, or one whose read-back sizes are hinted symbols; and recurrent
            # layers run by their shapes, not over the steps of the example's sequence.)
            dispatcher = self.bodies or self.hints or \
                calls_recurrent_layers(node.target for node in graph.nodes)
            with fx_config.patch(backed_size_oblivious=oblivious), torch.no_grad(), \
                    enable_python_dispatcher() if dispatcher else contextlib.nullcontext(), \
                    FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=True) as mode:
                self.mode = mode
                fakes = [self._fake_input(tensor, dynamic[k] or {}, metas[k])
                         for k, tensor in enumerate(tensors)]
                values: dict[torch.fx.Node, Any] = {}
                self.numbers: dict[torch.fx.Node, Any] = {}  # 0-d integer tensors holding a size
                for node in graph.nodes:
                    if node.op == "placeholder" and len(values) < len(self.weights.values):
                        value = self._fake_weight(node, *next(weights))
                    elif node.op == "placeholder":
                        value = fakes[len(values) - len(self.weights.values)]
                    elif node.op == "get_attr":  # a loop body, propagated with its loop
                        value = self.bodies[node.target]
                    elif node.op == "call_function":
                        value = self._call(node, values)
                    else:
                        continue
                    values[node] = value
                    if node.op != "get_attr":
                        node.meta["val"] = value
                    self.read_backs.check(node)
        except _ReadsValues:
            raise
        except Exception as error:
            raise _FailedAt(node, error) from error
        return values

    def _fake_input(self, tensor: torch.Tensor, axes, meta: torch.Tensor | None) -> Any:
        """A fake of a user input: only the dims asked for become symbols. ``meta``: its empty
        meta tensor when no dim is, made before the fake mode (under it, one more fake op)."""
        from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

        mode = self.mode
        if not axes and meta is not None:  # as the weights
            return mode.fake_tensor_converter.from_meta_and_device(mode, meta, tensor.device)
        return mode.from_tensor(tensor, symbolic_context=StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC if axis in axes else DimDynamic.STATIC
                           for axis in range(tensor.dim())]))

    def _fake_weight(self, node, weight, number, meta) -> Any:
        mode = self.mode
        value = (mode.from_tensor(weight, static_shapes=True) if meta is None else
                 mode.fake_tensor_converter.from_meta_and_device(mode, meta, weight.device))
        if number is not None:
            self.numbers[node] = number
        return value

    def _call(self, node: torch.fx.Node, values: dict) -> Any:
        if node.target is prim_loop:
            args = torch.fx.node.map_arg(node.args, lambda n: values[n])
            return _propagate_loop(self.shape_env, *args)
        if node.target is torch.ops.higher_order.cond and self.bodies:
            args = torch.fx.node.map_arg(node.args, lambda n: values[n])
            return _propagate_cond(self.shape_env, *args)
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: values[n])
        number = _size_number(node, args, kwargs, self.numbers)
        if self.traced and number is None and node.target in _NUMBER_READS:
            raise _ReadsValues()
        if node.target is torch.ops.aten._shape_as_tensor.default:
            return _shape_as_tensor(*args)
        if number is None and self.read_backs.has(node):
            return self.read_backs.symbol(node)
        if node.target in _NUMBER_READS and number is not None:
            if isinstance(number, int):  # a static size: the number itself
                _replace_uses(node, number)
            else:  # a symbolic one: still read from the tensor at run time
                node.target = torch.ops.aten._local_scalar_dense.default
            return number
        if number is None and node in self.traced and (
                value := _fake_of_type(self.mode, self.traced[node], args)) is not None:
            return value
        guards = len(self.shape_env.guards)
        value = fake_call(node.target, args, kwargs)
        _dtype_read(node, value)
        if node.target in _PIECE_COUNTING and len(self.shape_env.guards) > guards and \
                len(value) > 1:
            # The number of pieces of a dynamic axis: translation computes the pieces at run
            # time, and checks the count where the last piece is read (with a warning). (One
            # piece stays a guard that fixes the axis: its [-1] would be silently the first.)
            self.piece_counts.update(id(g) for g in self.shape_env.guards[guards:])
        if number is not None:
            self.numbers[node] = number
        return value


def _cleaned(graph: torch.fx.Graph, inputs: list, weights: _Weights) -> None:
    """The propagated graph without the tracer's records, unused reads of numbers, filled
    constants computed at run time, and Dropout outside training; reads proved to be an
    input's dynamic dim read that dim (:func:`_reads_as_input_sizes`)."""
    from torch.export.graph_signature import InputKind

    for node in graph.nodes:
        node.meta.pop(_TRACED_TYPE, None)
        node.meta.pop(_TRACED_SHAPE, None)
    for node in [n for n in graph.nodes if n.target in _NUMBER_READS and not n.users]:
        graph.erase_node(node)
    constant_of = {spec.arg.name: weights.constants[spec.target] for spec in weights.specs
                   if spec.kind == InputKind.CONSTANT_TENSOR}
    for name, value in _fold_filled_constants(graph, inputs[0] if inputs else None, constant_of):
        weights.add_constant(name, value)
    for node in list(graph.nodes):
        # Dropout outside training (the tracer's flag is 0) is its input (functionalization's
        # decompositions, which this graph may skip now, removed it; translated, it would
        # leave an Identity).
        if node.target in _DROPOUTS and len(node.args) == 3 \
                and not isinstance(node.args[2], torch.fx.Node) and not node.args[2]:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
    _reads_as_input_sizes(graph, inputs)
    _eliminate_dead_code(graph)


def _reads_as_input_sizes(graph: torch.fx.Graph, inputs: list) -> None:
    """Each read of a number that propagation proved to be a dynamic dim of an input (a
    sequence length the model computes with tensor ops, as transformers' masks do) becomes a
    read of that dim: a later trace of the program (functionalizing writes into views) would
    take the read for a new unknown number, which no check of a size against the dim can
    decide (bart's attention failed so)."""
    dims = {}
    for node in inputs:
        for axis, size in enumerate(getattr(node.meta.get("val"), "shape", ())):
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                dims.setdefault(size.node.expr, (node, axis, size))
    if not dims:  # (no dynamic dim)
        return
    for node in [n for n in graph.nodes if n.target in _NUMBER_READS]:
        value = node.meta.get("val")
        found = dims.get(value.node.expr) if isinstance(value, torch.SymInt) else None
        if found is None:
            continue
        source, axis, size = found
        with graph.inserting_before(node):
            read = graph.call_function(torch.ops.aten.sym_size.int, (source, axis))
        read.meta.update(node.meta)
        read.meta["val"] = size
        node.replace_all_uses_with(read)
        graph.erase_node(node)


def _input_symbols(shape_env, values: dict, inputs: list, dynamic: list,
                   reads_values: bool, piece_counts: set[int] = frozenset()) -> list | None:
    """The symbol of each dynamic dim, or None when the graph fixes one or equates it to
    another, or reads sizes back from tensors where it is not expected to (``reads_values``:
    scripted code, or a graph with a loop)."""
    symbols = []
    for k, axes in enumerate(dynamic):
        for axis in axes or {}:
            size = values[inputs[k]].shape[axis]
            if not isinstance(size, torch.SymInt) or not size.node.expr.is_Symbol:
                return None
            symbols.append(size.node.expr)
    if any(shape_env.replace(symbol) != symbol for symbol in symbols) or (any(
            str(symbol).startswith("u") for symbol in shape_env.var_to_range)
            and not reads_values):
        # Fixed or equated by the graph, or read back from a tensor. (Scripted code, and a
        # graph with a loop, have no other way: their sizes read from values stay
        # data-dependent; a trace's were fixed, or are left to torch.export.)
        return None
    if _fixed_by_a_guard(shape_env, symbols, piece_counts):
        return None
    return symbols


def _fixed_dims(shape_env, values: dict, inputs: list, dynamic: list,
                piece_counts: set[int] = frozenset()) -> list:
    """The (input, axis) of each dynamic dim the run fixed to a number (a weight it meets, a
    Python loop over it that the trace unrolled), or that a guard holds at its example's
    size only (features batched as the images, whose count the trace unrolled)."""
    fixed, dims_of = [], {}
    for k, axes in enumerate(dynamic):
        for axis in axes or {}:
            size = values[inputs[k]].shape[axis]
            if not isinstance(size, torch.SymInt) or shape_env.replace(size.node.expr).is_number:
                fixed.append((k, axis))
            elif size.node.expr.is_Symbol:
                dims_of.setdefault(size.node.expr, []).append((k, axis))
    for symbol in _pinned_by_guards(shape_env, set(dims_of), piece_counts):
        fixed += dims_of[symbol]
    return fixed


def _pinned_by_guards(shape_env, wanted: set, piece_counts: set[int]) -> set:
    """The symbols of ``wanted`` that a guard of the run pins to their example's value: the
    guard fails at large sizes of all its symbols (:func:`_fixed_by_a_guard`) and holds with
    that one at its example's value and the others large."""
    pinned = set()
    for expr in _equations_failing_at_large_sizes(shape_env, wanted, piece_counts):
        free = expr.free_symbols
        for symbol in free:
            example = shape_env.var_to_val.get(symbol)
            if example is not None and all(
                    _holds(expr, {**dict.fromkeys(free, size), symbol: example})
                    for size in _LARGE_SIZES):
                pinned.add(symbol)
    return pinned


# Splits whose number of pieces depends on the size split (fake_call guards on it).
_PIECE_COUNTING = {torch.ops.aten.split.Tensor, torch.ops.aten.chunk.default,
                   torch.ops.aten.unsafe_split.Tensor, torch.ops.aten.unsafe_chunk.default,
                   torch.ops.aten.split_copy.Tensor}


def _fixed_by_a_guard(shape_env, symbols: list, piece_counts: set[int] = frozenset()) -> bool:
    """Whether a guard of the run holds for small sizes of the dynamic dims only: it equates
    a dim with a number (bart's embedding scale, a 0-d float64 tensor, broadcast a batch of 1
    to 1) or an expression of dims with one (``x[:, ::2][:, ::2]`` of 3 columns has 1, and
    torch then flattened the wrong axes at every size). Tried at large sizes, every dynamic
    dim alike (so that dims it equates stay equal): it fails at each. A parity holds at some
    of them; a bound (positions up to 512) is no equation."""
    return next(_equations_failing_at_large_sizes(shape_env, set(symbols), piece_counts),
                None) is not None


def _equations_failing_at_large_sizes(shape_env, wanted: set, piece_counts: set[int]):
    """The equations among the run's guards, over ``wanted`` symbols only, that fail at each
    of the large sizes taken by all their symbols alike (:func:`_fixed_by_a_guard`)."""
    import sympy

    for guard in shape_env.guards:
        if id(guard) in piece_counts:
            continue  # (a split's count of pieces: see _PIECE_COUNTING)
        expr = guard.expr
        free = expr.free_symbols
        if not isinstance(expr, sympy.Eq) or not free or not free <= wanted:
            continue  # (a bound; none of the dims; or sizes read from values as well)
        if not any(_holds(expr, dict.fromkeys(free, size)) for size in _LARGE_SIZES):
            yield expr


_LARGE_SIZES = (64, 65, 1000, 1001)


def _holds(expr, values: dict) -> bool:
    try:
        return bool(expr.xreplace(values))
    except (TypeError, AssertionError, ArithmeticError):
        # (not decided by numbers alone; or torch's sympy functions refuse them: Mod of a
        # negative size difference asserts, as a guard of max_pool1d on cuda gave)
        return True


def _exported_program(graph, bodies, weights: _Weights, inputs, results, tensors, out_spec,
                      shape_env, symbols) -> torch.export.ExportedProgram | None:
    from torch._export.verifier import TrainingIRVerifier
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.export.graph_signature import (
        ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec, TensorArgument)

    for node in graph.nodes:
        if node.op == "placeholder":
            # The generated forward binds each argument by its target: with names shifted
            # from targets (input_1 for "input"), "input_2 = input_1" read the wrong input,
            # and the program's module (a grown check's run) computed with the first one.
            node.target = node.name
    # (an output that was a Dropout is its input now)
    user_specs = [InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None)
                  for node in inputs]
    output_specs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(node.name), None)
                    for node in results]
    in_spec = pytree.tree_flatten((tuple(tensors), {}))[1]
    try:  # the weights are inputs now: the graph needs no attribute of a root module
        with _code_generated_when_called(shape_env):
            return torch.export.ExportedProgram(
                dict(bodies), graph,
                ExportGraphSignature(weights.specs + user_specs, output_specs),
                weights.state_dict,
                {symbol: shape_env.var_to_range[symbol] for symbol in symbols},
                [ModuleCallEntry("", ModuleCallSignature([], [], in_spec, out_spec))],
                constants=weights.constants, verifiers=[TrainingIRVerifier])
    except Exception:
        return None


@contextlib.contextmanager
def _code_generated_when_called(shape_env: Any):
    """ExportedProgram wraps its graph in a torch.fx.GraphModule, which generates the Python
    code of the whole graph at once though translation only walks the
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


def _traced_metas(graph: torch.fx.Graph) -> dict[torch.fx.Node, tuple]:
    """The :func:`_traced_meta` of each node of ``graph`` whose traced type was kept; a view
    only when no op writes into a tensor it may share memory with (:func:`_written_aliases`)."""
    records = {node: node.meta[_TRACED_TYPE] for node in graph.nodes
               if _TRACED_TYPE in node.meta}
    written = _written_aliases(graph, records)
    return {node: _traced_meta(record) for node, record in records.items()
            if not (record[4] == VIEW and node in written)}


def _written_aliases(graph: torch.fx.Graph, records: dict) -> set[torch.fx.Node]:
    """The nodes that may share memory with a tensor that an op writes into. A node may share
    its inputs' memory unless its traced type says it makes a new tensor: a view, a write
    (which returns what it wrote into), a piece of a split and any node without a record
    are grouped with their inputs; a group an op writes into is written as a whole (T5's one
    ``add_`` had every view of the graph run on fake tensors)."""
    parent: dict[torch.fx.Node, torch.fx.Node] = {}

    def root(node: torch.fx.Node) -> torch.fx.Node:
        while node in parent:
            node = parent[node]
        return node

    writes = []
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        if _writes(node.target):
            writes.append(node)
        elif node in records and records[node][4] != VIEW:
            continue  # a new tensor
        for source in node.all_input_nodes:
            if (a := root(node)) is not (b := root(source)):
                parent[a] = b
    written = {root(source) for node in writes for source in (node, *node.all_input_nodes)}
    return {node for node in records if root(node) in written} if written else set()


def _writes(target: Any) -> bool:
    """Whether ``target`` may write into a tensor (an in-place or out= op); unknown targets
    are assumed to."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return target not in _PURE_FUNCTIONS
    return schema.is_mutable


_PURE_FUNCTIONS = {operator.getitem}


def _traced_meta(traced: tuple) -> tuple:
    """The type the tracer recorded as an empty meta tensor and its device; for an op writing
    into its first argument, that type as recorded (compared with the argument's)."""
    dtype, sizes, strides, device, in_place = traced
    if in_place is True:
        return traced
    if dtype in QUANTIZED_AS_INTEGER:  # a float stand-in, as _QUANTIZING gives it
        dtype = torch.float32
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
