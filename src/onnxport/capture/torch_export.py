"""Capture with ``torch.export``: a graph of ATen calls with dtype/shape metadata and sources.

The program is taken as torch.export returns it (no ``run_decompositions``): the translator
decomposes, one node at a time, only what the op library does not translate.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import io
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from onnxport.capture.common import aliases, first_lines, warn_at_caller
from onnxport.capture.dynamic import as_auto, map_dims, requested_dims, tensor_input_slots
from onnxport.capture.quirks import patched_for_torch_export, quantized_modules
from onnxport.capture.data_dependent import DataDependentArguments
from onnxport.capture.quirks.packed_sequences import packed_sequences_as_padded
from onnxport.capture.specialization import (FixedDim, describe, failure_location,
                                              fixed_dims, recording_guards, static_size)
from onnxport.pytree_names import bookkeeping_outputs
from onnxport.pytree_names import output_names as output_names_of
from onnxport.errors import CaptureError, DynamicDimensionFixedWarning, InvalidExportOptionsError


class _FunctionModule(torch.nn.Module):
    """Wraps a plain function so that torch.export can capture it."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args, **kwargs):
        return self.function(*args, **kwargs)


def _module_for_function(function) -> torch.nn.Module:
    """A module whose forward has ``function``'s signature (torch.export matches dynamic_shapes
    keys against the forward's parameter names)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return _FunctionModule(function)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def forward(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    forward.__signature__ = signature.replace(
        parameters=[self_parameter, *signature.parameters.values()])
    wrapper = type("FunctionModule", (_FunctionModule,), {"forward": forward})
    return wrapper(function)


@dataclasses.dataclass
class CapturedProgram:
    """The exported program and the naming decisions made for its inputs and outputs."""

    exported_program: ExportedProgram
    user_inputs: list[str]  # placeholder names of tensor user inputs, in order
    input_names: list[str]  # ONNX names of those inputs
    weights: dict[str, tuple[str, torch.Tensor | None]]
    user_outputs: list[int]
    output_names: list[str]
    symbol_names: dict[str, str]
    output_dim_names: dict[str, dict[int, str]]
    strategy: str = "torch.export non-strict"  # the capture strategy that made the program
    # (strategy, why it was not used) for each tried before
    failed_strategies: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    fixed_dims: list = dataclasses.field(default_factory=list)  # asked dynamic, left static


def parameter_names(model: Any) -> list[str]:
    """The names of ``model``'s forward parameters, for dynamic_axes and input naming."""
    function = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    names = [
        name for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if isinstance(model, torch.jit.ScriptModule) and names[:1] == ["self"]:
        names = names[1:]  # a script method's signature lists self
    return names


def var_positional(model: Any) -> tuple[str, int] | None:
    """The name of ``model``'s ``*args`` parameter and how many positional parameters come
    before it, or None when its forward has none."""
    function = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    for position, parameter in enumerate(parameters):
        if parameter.kind is parameter.VAR_POSITIONAL:
            return parameter.name, position
    return None


def capture_torch_export(
    model: Any,
    args: tuple,
    kwargs: dict,
    *,
    dynamic_shapes: Any = None,
    dim_names: Mapping[tuple[int, int], str] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    output_dim_names: Mapping[str, dict[int, str]] | None = None,
    keep_op: Callable[[Any], bool] | None = None,
) -> CapturedProgram:
    """Run torch.export on ``model`` (unless it is an ExportedProgram already) and name things.

    ``dim_names`` maps (tensor input position, axis) to the ONNX name of that dimension.
    When the graph writes into a view or an input, it is functionalized, decomposing only the
    ops for which ``keep_op`` is false.
    """
    strategy, attempts, fixed = "given ExportedProgram", [], []
    if isinstance(model, ExportedProgram):
        program = model
    else:
        module = model if isinstance(model, torch.nn.Module) else _module_for_function(model)
        module = quantized_modules.as_reference(module)
        names = parameter_names(model)
        display = _input_display_names(args, kwargs, names, input_names)
        program, strategy, attempts, fixed = capture_with_strategies(
            module, args, kwargs, dynamic_shapes, names,
            describe_dim=lambda d: describe(d, display(d.position),
                                            (dim_names or {}).get((d.position, d.axis))))
    if needs_functionalization(program):
        from torch.fx.experimental import _config as shapes_config

        oblivious = bool(program.graph_module.meta.get("backed_size_oblivious"))
        # Functionalizing traces the graph again: as it was captured, with the same patches.
        with shapes_config.patch(backed_size_oblivious=oblivious), patched_for_torch_export():
            program = functionalize(program, keep_op or (lambda op: False))
        program.graph_module.meta["backed_size_oblivious"] = oblivious
    drop_runtime_asserts(program.graph_module)
    nested_names = None
    if not isinstance(model, ExportedProgram):
        # Tensors inside a cache, list or dict are named after their path in it.
        slots = tensor_input_slots(args, kwargs, parameter_names(model))
        nested_names = [slot.name if slot.path else None for slot in slots]
    captured = _describe(program, dim_names or {}, input_names, output_names,
                         output_dim_names or {}, nested_names)
    captured.strategy, captured.failed_strategies, captured.fixed_dims = strategy, attempts, fixed
    return captured


_RUNTIME_ASSERTS = (torch.ops.aten._assert_scalar.default, torch.ops.aten._assert_async.msg,
                    torch.ops.aten.sym_constrain_range_for_size.default)


def drop_runtime_asserts(graph_module: torch.fx.GraphModule) -> None:
    """Remove torch's runtime asserts on sizes and the Python-number arithmetic only they use
    (``x.reshape(y, -1)`` asserts ``not (y == 0)`` through ``torch.sym_not``): the asserts emit
    nothing in ONNX, and their arithmetic may have no translation."""
    graph = graph_module.graph
    asserts = [n for n in graph.nodes if n.op == "call_function" and n.target in _RUNTIME_ASSERTS]
    if not asserts:
        return
    pending = []
    for node in asserts:
        pending.extend(a for a in node.all_input_nodes)
        graph.erase_node(node)
    while pending:
        node = pending.pop()
        if getattr(node, "_erased", False) or node.users or node.op != "call_function":
            continue
        if not _is_number_arithmetic(node):
            continue
        inputs = node.all_input_nodes
        graph.erase_node(node)
        pending.extend(inputs)
    graph_module.recompile()


def _is_number_arithmetic(node: torch.fx.Node) -> bool:
    """A call on Python numbers (operator.eq, torch.sym_not...), never one on tensors."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload) or isinstance(
            node.meta.get("val"), torch.Tensor):
        return False
    return getattr(target, "__module__", None) in ("_operator", "operator", "torch") or \
        target in (torch.sym_not, torch.sym_max, torch.sym_min, torch.sym_float, torch.sym_int)


def capture_with_strategies(module, args, kwargs, dynamic_shapes, names, describe_dim):
    """torch.export, non-strict (Python runs the model) then strict (dynamo traces it).

    A dim asked to be dynamic is given to torch as Dim.AUTO, so that a model fixing it does
    not fail the export but shows in the program. Then, for such dims, a size of 2 when the
    example has 0 or 1 there (kept when the graph still computes eager's results at the
    example's sizes), and else the dims static, with a warning naming the line that fixes them.
    Returns the program, the strategy that made it, the (strategy, reason) of each that did not,
    and the dims left static."""
    requested = requested_dims(dynamic_shapes, args, kwargs, names)
    auto = map_dims(dynamic_shapes, args, kwargs, names,
                    lambda k, axis, dim: as_auto(dim) if (k, axis) in requested else dim)
    small = {key for key in requested if _example_size(args, kwargs, names, key) in (0, 1)}
    attempts: list[tuple[str, str]] = []
    fixed = None
    eager = _EagerShapes(module, args, kwargs)
    non_strict = None
    for strategy, strict in (("non-strict", False), ("strict", True)):
        try:
            program, fixed = _export(module, args, kwargs, auto, strict, requested, bool(small))
        except Exception as error:  # torch raises many kinds; all mean "could not capture"
            attempts.append((strategy, _reason(error)))
            continue
        static = [d for d in fixed if d.upper is None]
        # Sizes 0 and 1 kept symbolic: torch assumes they broadcast and squeeze like larger ones.
        mismatch = eager.mismatch(program, args, kwargs, names) if small and not static else None
        if not static and mismatch is None:
            _warn_bounded(fixed, describe_dim)
            return program, strategy, attempts, []
        attempts.append((strategy, "; ".join(describe_dim(d) for d in static) or mismatch))
        if not strict and static and not {(d.position, d.axis) for d in static} & small:
            # Python running the model reads some sizes as ints (len(x), a size given to a
            # Python function), which fixes them; dynamo traces those as symbols. When it
            # fixes dims too, or fails, the non-strict program goes on as before.
            non_strict = program, fixed, mismatch
            continue
        break
    if non_strict is not None:
        (program, fixed, mismatch), strict = non_strict, False
    if fixed is None and not small:
        raise _capture_error(attempts)
    if fixed is None:  # torch may fail on sizes 0 and 1 kept symbolic: they go the same way
        strict, program = False, None
        mismatch = "torch.export failed with it dynamic at this size (see the strategies above)"
    static = {(d.position, d.axis) for d in fixed or () if d.upper is None}
    if mismatch is not None:
        fixed = [FixedDim(k, axis, _example_size(args, kwargs, names, (k, axis)), None,
                          reason=mismatch) for k, axis in sorted(small)]
        static = set(small)

    if static & small:
        strategy = f"{'strict' if strict else 'non-strict'}, sizes 0 and 1 traced at 2"
        larger, reason = _traced_at_size_two(module, args, kwargs, names, auto, strict, requested,
                                             small, eager, describe_dim)
        if larger is not None:
            return larger, strategy, attempts, []
        attempts.append((strategy, reason))

    strategy = f"{'strict' if strict else 'non-strict'}, fixed dims static"
    if mismatch is None and all(isinstance(_placeholder_size(program, d), int)
                                for d in fixed if d.upper is None):
        final = program  # torch already made them static
    else:
        shapes = map_dims(auto, args, kwargs, names,
                          lambda k, axis, dim: None if (k, axis) in static else dim)
        try:
            final, _ = _export(module, args, kwargs, shapes, strict, requested,
                               bool(small - static))
        except Exception as error:
            attempts.append((strategy, _reason(error)))
            raise _capture_error(attempts) from error
    for d in fixed:
        if d.upper is None:
            advice = " (change that line to keep it dynamic)" if d.location else ""
            warn_at_caller(f"{describe_dim(d)}; the ONNX model takes only size {d.size} there"
                           f"{advice}", DynamicDimensionFixedWarning)
    _warn_bounded(fixed, describe_dim)
    return final, strategy, attempts, [d for d in fixed if d.upper is None]


def _traced_at_size_two(module, args, kwargs, names, shapes, strict, requested, small, eager,
                        describe_dim):
    """The program captured with the example's sizes 0 and 1 of ``small`` dims made 2, when it
    is sound at the example's own sizes; else (None, why not)."""
    try:
        larger_args, larger_kwargs = _with_size_two(args, kwargs, names, small)
        program, fixed = _export(module, larger_args, larger_kwargs, shapes, strict, requested,
                                 False)
    except Exception as error:
        return None, _reason(error)
    static = [d for d in fixed if d.upper is None]
    if static:
        return None, "; ".join(describe_dim(d) for d in static)
    mismatch = eager.mismatch(program, args, kwargs, names)
    if mismatch is not None:
        return None, mismatch
    if not _computes_eager_results(program, module, args, kwargs):
        return None, "its graph computes other values than eager at the example's sizes"
    _warn_bounded(fixed, describe_dim)
    return program, None


def _export(module, args, kwargs, dynamic_shapes, strict, requested, oblivious):
    """One torch.export call, recording where the model fixes sizes. ``oblivious``: sizes of
    0 and 1 stay symbolic (torch otherwise makes them constants), the way torch.onnx does."""
    from torch.fx.experimental import _config as shapes_config

    # A failing torch.export prints its partial graph to stderr; the chain tries several
    # strategies, and its error says what failed in each.
    # Non-strict only: dynamo (strict) traces past a torch function mode.
    rewrites = contextlib.ExitStack()
    if not strict:
        rewrites.enter_context(DataDependentArguments())
        rewrites.enter_context(packed_sequences_as_padded())
    with patched_for_torch_export(), recording_guards() as guards, rewrites, \
            shapes_config.patch(backed_size_oblivious=oblivious), \
            contextlib.redirect_stderr(io.StringIO()):
        program = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes,
                                      strict=strict)
    # Translation re-traces decompositions on these shapes: it must treat 0 and 1 alike.
    program.graph_module.meta["backed_size_oblivious"] = oblivious
    user_inputs = _tensor_user_inputs(program)
    return program, fixed_dims(program, user_inputs, requested, guards)


class _EagerShapes:
    """The model's output shapes at the example, computed once and only when needed."""

    def __init__(self, module, args, kwargs):
        self.module, self.args, self.kwargs = module, args, kwargs
        self.shapes = None

    def mismatch(self, program: ExportedProgram, args, kwargs, names) -> str | None:
        """Why the program's output shapes, at the example's sizes, are not eager's (None when
        they are)."""
        if self.shapes is None:
            try:
                with torch.no_grad():
                    outputs = self.module(*copy.deepcopy(self.args), **copy.deepcopy(self.kwargs))
            except Exception:  # a model that cannot run eagerly here (meta weights): no check
                self.shapes = []
                return None
            self.shapes = [tuple(t.shape) for t in pytree.tree_leaves(outputs)
                           if isinstance(t, torch.Tensor)]
        if not self.shapes:
            return None
        sizes = {}
        placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
        slots = tensor_input_slots(args, kwargs, names)
        for name, slot in zip(_tensor_user_inputs(program), slots):
            for size, example in zip(placeholders[name].meta["val"].shape, slot.tensor.shape):
                if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                    sizes[size.node.expr] = example
        output = next(n for n in program.graph.nodes if n.op == "output")
        specs = program.graph_signature.output_specs
        values = [item.meta.get("val") for item, spec in zip(output.args[0], specs)
                  if spec.kind == OutputKind.USER_OUTPUT and isinstance(item, torch.fx.Node)]
        values = [v for v in values if isinstance(v, torch.Tensor)]
        if len(values) != len(self.shapes):
            return None  # outputs torch does not return as tensors: nothing to compare
        for k, (value, expected) in enumerate(zip(values, self.shapes)):
            shape = tuple(int(d.node.expr.subs(sizes)) if isinstance(d, torch.SymInt) else d
                          for d in value.shape)
            if shape != expected:
                return (f"output {k} would have shape {list(shape)} at the example's sizes, "
                        f"but the model returns {list(expected)} (it treats a size of 0 or 1 "
                        "specially)")
        return None


def _tensor_user_inputs(program: ExportedProgram) -> list[str]:
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    return [spec.arg.name for spec in program.graph_signature.input_specs
            if spec.kind == InputKind.USER_INPUT
            and isinstance(placeholders[spec.arg.name].meta.get("val"), torch.Tensor)]


def _placeholder_size(program: ExportedProgram, fixed) -> Any:
    inputs = _tensor_user_inputs(program)
    node = next(n for n in program.graph.nodes if n.name == inputs[fixed.position])
    return static_size(node.meta["val"].shape[fixed.axis])


def _warn_bounded(fixed, describe_dim) -> None:
    """Warn about dims kept dynamic but bounded."""
    for d in fixed:
        if d.upper is not None:
            warn_at_caller(f"{describe_dim(d)}; the ONNX model keeps it dynamic, but matches "
                           f"PyTorch only up to {d.upper}", DynamicDimensionFixedWarning)


def _example_size(args, kwargs, names, key) -> int | None:
    slots = tensor_input_slots(args, kwargs, names)
    position, axis = key
    if position < len(slots) and axis < slots[position].tensor.dim():
        return slots[position].tensor.shape[axis]
    return None


def _with_size_two(args, kwargs, names, dims):
    """The example inputs with each of ``dims`` (of size 0 or 1) repeated to size 2."""
    slots = tensor_input_slots(args, kwargs, names)
    larger: dict[int, torch.Tensor] = {}
    for position, slot in enumerate(slots):
        tensor = slot.tensor
        for p, axis in sorted(dims):
            if p == position:
                if tensor.shape[axis] == 0:
                    shape = list(tensor.shape)
                    shape[axis] = 2
                    tensor = tensor.new_zeros(shape)
                else:
                    tensor = torch.cat([tensor, tensor], dim=axis)
        larger[id(slot.tensor)] = tensor

    def replace(leaf):
        return larger.get(id(leaf), leaf) if isinstance(leaf, torch.Tensor) else leaf

    return pytree.tree_map(replace, args), pytree.tree_map(replace, kwargs)


def _computes_eager_results(program: ExportedProgram, module, args, kwargs) -> bool:
    """True when the captured graph, run in PyTorch at the example's own sizes, gives the
    model's results there: a graph traced at size 2 may have taken another branch than size 1."""
    graph_module = program.module(check_guards=False)
    graph_module._forward_pre_hooks.clear()  # the range checks of the size-2 capture
    try:
        with torch.no_grad():
            expected = module(*copy.deepcopy(args), **copy.deepcopy(kwargs))
            actual = graph_module(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception:
        return False
    expected = [t for t in pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    actual = [t for t in pytree.tree_leaves(actual) if isinstance(t, torch.Tensor)]
    if len(expected) != len(actual):
        return False
    for e, a in zip(expected, actual):
        if e.shape != a.shape or e.dtype != a.dtype:
            return False
        if e.is_floating_point() or e.is_complex():
            if not torch.allclose(a, e, rtol=1e-3, atol=1e-4, equal_nan=True):
                return False
        elif not torch.equal(a, e):
            return False
    return True


def _reason(error: BaseException) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    reason = f"{type(error).__name__}: {lines[0] if lines else ''}".strip()
    location = failure_location(error)
    return reason + (f" (at {location})" if location else "")


def _capture_error(attempts: list[tuple[str, str]]) -> CaptureError:
    """The error when every strategy failed; it carries them, for fallback=True to list."""
    error = CaptureError(_capture_failure(attempts))
    error.attempts = list(attempts)
    return error


def _capture_failure(attempts: list[tuple[str, str]]) -> str:
    tried = "\n".join(f"  {strategy}: {reason}" for strategy, reason in attempts)
    return (
        "torch.export could not capture the model (the stage that failed is capture). "
        f"Strategies tried:\n{tried}\n"
        "Change the model at the line named above, or export with fallback=True (falls back to "
        "the TorchScript path when torch.export fails) or dynamo=False (the TorchScript path)."
    )


def _input_display_names(args, kwargs, names, input_names):
    slots = tensor_input_slots(args, kwargs, names)
    given = list(input_names or [])

    def display(position: int) -> str:
        if position < len(given):
            return given[position]
        return slots[position].name if position < len(slots) else f"input {position}"

    return display


def needs_functionalization(program: ExportedProgram) -> bool:
    """True when an in-place op writes into a tensor that is read afterwards through another
    alias (a view or the base it is a view of), or into a graph input. Rebinding the written
    value is enough otherwise; these graphs go through torch's functionalization instead."""
    nodes = list(program.graph.nodes)
    order = {node: i for i, node in enumerate(nodes)}
    for node in nodes:
        if node.op != "call_function":
            continue
        schema = getattr(node.target, "_schema", None)
        if schema is None or not schema.is_mutable:
            continue
        for argument, value in zip(schema.arguments, node.args):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            if not isinstance(value, torch.fx.Node):
                continue
            if value.op == "placeholder":
                return True
            for alias in aliases(value):
                if alias is not value and any(order[user] > order[node] for user in alias.users):
                    return True
    return False


def functionalize(program: ExportedProgram, keep_op: Callable[[Any], bool]) -> ExportedProgram:
    """Functionalize ``program``, decomposing only the ops ``keep_op`` does not keep."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if keep_op(op):
            del table[op]
    try:
        return program.run_decompositions(table)
    except Exception as error:
        raise CaptureError(
            f"functionalizing the captured graph (it writes into views) failed: "
            f"{type(error).__name__}: {first_lines(str(error))}") from error


def _none_note(count: int) -> str:
    return f" (and returns None {count} time(s), which has no ONNX output)" if count else ""


def _describe(program, dim_names, input_names, output_names, output_dim_names,
              nested_names=None) -> CapturedProgram:
    signature = program.graph_signature
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    user_inputs: list[str] = []
    weights: dict[str, tuple[str, torch.Tensor | None]] = {}
    for spec in signature.input_specs:
        name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            if isinstance(placeholders[name].meta.get("val"), torch.Tensor):
                user_inputs.append(name)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            target = spec.target
            tensor = program.state_dict.get(target)
            if tensor is None:
                tensor = program.constants.get(target)
            if isinstance(tensor, torch.nn.Parameter):
                tensor = tensor.data
            weights[name] = (target, tensor)
        else:
            raise CaptureError(f"inputs of kind {spec.kind.name} ({name}) are not supported")
    names = list(input_names or [])
    # Names past the inputs name the weights, as torch.onnx's TorchScript exporter has it
    # (export() gives them out: onnxport.api._name_weights).
    if len(names) > len(user_inputs) + len(weights):
        raise InvalidExportOptionsError(
            f"input_names has {len(names)} names but the model has {len(user_inputs)} tensor "
            f"inputs ({', '.join(user_inputs)}) and {len(weights)} weights; give at most "
            f"{len(user_inputs) + len(weights)} names (the inputs' first, then the weights')"
        )
    names = names[:len(user_inputs)]
    defaults = list(user_inputs)
    if nested_names is not None and len(nested_names) == len(user_inputs):
        defaults = [nested or name for nested, name in zip(nested_names, user_inputs)]
    onnx_inputs = names + defaults[len(names):]

    output_node = next(n for n in program.graph.nodes if n.op == "output")
    results = output_node.args[0]
    every_output = [i for i, spec in enumerate(signature.output_specs)
                    if spec.kind == OutputKind.USER_OUTPUT]
    # (program.call_spec.out_spec, less the NamedTuple class call_spec defines at each read)
    calls = program.module_call_graph
    out_spec = calls[0].signature.out_spec if calls and calls[0].signature else None
    readable = output_names_of(out_spec) if out_spec else []
    dropped = bookkeeping_outputs(out_spec) if readable else set()
    if len(readable) != len(every_output):
        readable, dropped = [None] * len(every_output), set()
    # A None the model returns is no value at all: it has no ONNX output, and the outputs after
    # it keep their own names (ONNX Runtime's list is eager's tensors in order, Nones skipped).
    # Neither has a KV cache's bookkeeping (a sliding window's token count).
    kept = [k for k, i in enumerate(every_output) if results[i] is not None and k not in dropped]
    user_outputs = [every_output[k] for k in kept]
    given = list(output_names or [])
    if len(kept) < len(every_output) and len(given) == len(every_output):
        given = [given[k] for k in kept]  # names given for every returned item, Nones included
    if len(given) > len(user_outputs):
        raise InvalidExportOptionsError(
            f"output_names has {len(given)} names but the model has {len(user_outputs)} "
            f"outputs{_none_note(len(every_output) - len(kept))}; give at most "
            f"{len(user_outputs)} names"
        )
    defaults = []
    for k in kept:
        item = results[every_output[k]]
        default = item.name if isinstance(item, torch.fx.Node) else f"output_{k}"
        defaults.append(readable[k] or default)
    onnx_outputs = given + defaults[len(given):]
    taken = set(onnx_inputs)
    for k, name in enumerate(onnx_outputs):
        if name in taken:
            onnx_outputs[k] = f"{name}_output" if k >= len(given) else name
        taken.add(onnx_outputs[k])

    symbol_names: dict[str, str] = {}
    for (position, axis), dim_name in dim_names.items():
        if position >= len(user_inputs):
            continue
        val = placeholders[user_inputs[position]].meta["val"]
        if axis >= val.dim():
            raise InvalidExportOptionsError(
                f"dynamic axis {axis} of input {onnx_inputs[position]!r} does not exist: the "
                f"input has {val.dim()} dimensions"
            )
        size = val.shape[axis]
        if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
            symbol_names.setdefault(str(size.node.expr), dim_name)
    return CapturedProgram(program, user_inputs, onnx_inputs, weights, user_outputs,
                           onnx_outputs, symbol_names, dict(output_dim_names))
