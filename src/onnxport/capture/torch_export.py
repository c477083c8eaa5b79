"""Capture with ``torch.export``: a graph of ATen calls with dtype/shape metadata and sources.

The program is taken as torch.export returns it (no ``run_decompositions``): the translator
decomposes, one node at a time, only what the op library does not translate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import operator
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from onnxport.capture.dynamic import tensor_input_slots
from onnxport.capture.pytree_names import output_names as output_names_of
from onnxport.errors import CaptureError, InvalidExportOptionsError


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


def parameter_names(model: Any) -> list[str]:
    """The names of ``model``'s forward parameters, for dynamic_axes and input naming."""
    function = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [
        name for name, p in signature.parameters.items()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


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
    if isinstance(model, ExportedProgram):
        program = model
    else:
        module = model if isinstance(model, torch.nn.Module) else _module_for_function(model)
        try:
            with _patched_for_export():
                program = torch.export.export(
                    module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False
                )
        except Exception as error:  # torch raises many kinds; all mean "could not capture"
            raise CaptureError(
                f"torch.export could not capture the model: {type(error).__name__}: "
                f"{_first_lines(str(error))}\nThe stage that failed is capture; the model's "
                "forward must be traceable by torch.export (see its error above)."
            ) from error
    if needs_functionalization(program):
        program = functionalize(program, keep_op or (lambda op: False))
    nested_names = None
    if not isinstance(model, ExportedProgram):
        # Tensors inside a cache, list or dict are named after their path in it.
        slots = tensor_input_slots(args, kwargs, parameter_names(model))
        nested_names = [slot.name if slot.path else None for slot in slots]
    return _describe(program, dim_names or {}, input_names, output_names, output_dim_names or {},
                     nested_names)


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
            for alias in _aliases(value):
                if alias is not value and any(order[user] > order[node] for user in alias.users):
                    return True
    return False


def _aliases(node: torch.fx.Node) -> list[torch.fx.Node]:
    """Every node sharing storage with ``node``: its root base and all views taken from it."""
    root = node
    while _is_view(root) and isinstance(root.args[0], torch.fx.Node):
        root = root.args[0]
    found, pending = [], [root]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(user for user in current.users if _is_view(user) and user.args and user.args[0] is current)
    return found


def _is_view(node: torch.fx.Node) -> bool:
    if node.target is operator.getitem:
        return isinstance(node.args[0], torch.fx.Node) and _is_view(node.args[0])
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns:
        return False
    alias = schema.returns[0].alias_info
    return alias is not None and not alias.is_write


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
            f"{type(error).__name__}: {_first_lines(str(error))}") from error


def _none_note(count: int) -> str:
    return f" (and returns None {count} time(s), which has no ONNX output)" if count else ""


def _first_lines(text: str, count: int = 12) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:count]) + ("\n..." if len(lines) > count else "")


@contextlib.contextmanager
def _patched_for_export():
    """Register pytree support for transformers' cache classes when transformers is loaded."""
    from onnxport.capture import hf_cache

    hf_cache.register_if_loaded()
    yield


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
    if len(names) > len(user_inputs):
        raise InvalidExportOptionsError(
            f"input_names has {len(names)} names but the model has {len(user_inputs)} tensor "
            f"inputs ({', '.join(user_inputs)}); give at most {len(user_inputs)} names"
        )
    defaults = list(user_inputs)
    if nested_names is not None and len(nested_names) == len(user_inputs):
        defaults = [nested or name for nested, name in zip(nested_names, user_inputs)]
    onnx_inputs = names + defaults[len(names):]

    output_node = next(n for n in program.graph.nodes if n.op == "output")
    results = output_node.args[0]
    every_output = [i for i, spec in enumerate(signature.output_specs)
                    if spec.kind == OutputKind.USER_OUTPUT]
    readable = output_names_of(program.call_spec.out_spec) if program.call_spec.out_spec else []
    if len(readable) != len(every_output):
        readable = [None] * len(every_output)
    # A None the model returns is no value at all: it has no ONNX output, and the outputs after
    # it keep their own names (ONNX Runtime's list is eager's tensors in order, Nones skipped).
    kept = [k for k, i in enumerate(every_output) if results[i] is not None]
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
