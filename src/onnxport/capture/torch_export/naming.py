"""The captured program and the names of its inputs, outputs, weights and dynamic dims."""

from __future__ import annotations

import dataclasses

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from onnxport.capture.dynamic import onnx_input_names, tensor_input_slots
from onnxport.errors import CaptureError, InvalidExportOptionsError
from onnxport.pytree_names import bookkeeping_outputs
from onnxport.pytree_names import output_names as output_names_of


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
    # (input placeholder, axis) -> the largest size the program answers right for, beyond
    # which the ONNX model fails the run (grown_check.bounds_that_bite)
    upper_bounds: dict = dataclasses.field(default_factory=dict)
    # ((position, axis), warning) of each dim torch bounded; warned about where the bound bites
    bounded_dims: list = dataclasses.field(default_factory=list)


def input_display_names(args, kwargs, names, input_names):
    shown = onnx_input_names(input_names, [s.name for s in tensor_input_slots(args, kwargs,
                                                                              names)])

    def display(position: int) -> str:
        return shown[position] if position < len(shown) else f"input {position}"

    return display


def _none_note(count: int) -> str:
    return f" (and returns None {count} time(s), which has no ONNX output)" if count else ""


def named_program(program: ExportedProgram, dim_names, input_names, output_names,
                  output_dim_names, nested_names=None) -> CapturedProgram:
    """The program with the ONNX names of its inputs, weights, outputs and dynamic dims."""
    user_inputs, weights = _inputs_and_weights(program)
    onnx_inputs = _input_names(user_inputs, weights, input_names, nested_names)
    user_outputs, onnx_outputs = _outputs(program, output_names, onnx_inputs)
    symbol_names = _symbol_names(program, user_inputs, onnx_inputs, dim_names)
    return CapturedProgram(program, user_inputs, onnx_inputs, weights, user_outputs,
                           onnx_outputs, symbol_names, dict(output_dim_names))


def _placeholders(program: ExportedProgram) -> dict[str, torch.fx.Node]:
    return {n.name: n for n in program.graph.nodes if n.op == "placeholder"}


def _inputs_and_weights(program: ExportedProgram):
    """The placeholder names of the tensor user inputs, and each weight's (target, tensor)."""
    placeholders = _placeholders(program)
    user_inputs: list[str] = []
    weights: dict[str, tuple[str, torch.Tensor | None]] = {}
    for spec in program.graph_signature.input_specs:
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
    return user_inputs, weights


def _input_names(user_inputs, weights, input_names, nested_names) -> list[str]:
    names = list(input_names or [])
    # Names past the inputs name the weights, as torch.onnx's TorchScript exporter has it
    # (export() gives them out: onnxport.api._name_weights).
    if len(names) > len(user_inputs) + len(weights):
        raise InvalidExportOptionsError(
            f"input_names has {len(names)} names but the model has {len(user_inputs)} tensor "
            f"inputs ({', '.join(user_inputs)}) and {len(weights)} weights; give at most "
            f"{len(user_inputs) + len(weights)} names (the inputs' first, then the weights')"
        )
    defaults = list(user_inputs)
    if nested_names is not None and len(nested_names) == len(user_inputs):
        defaults = [nested or name for nested, name in zip(nested_names, user_inputs)]
    return onnx_input_names(names[:len(user_inputs)], defaults)


def _outputs(program: ExportedProgram, output_names, onnx_inputs) -> tuple[list[int], list[str]]:
    """The positions of the outputs ONNX gets, and their names."""
    signature = program.graph_signature
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
        if name in taken and k >= len(given):  # (an input returned twice: x_output, x_output_1)
            unique, count = f"{name}_output", 0
            while unique in taken:
                count += 1
                unique = f"{name}_output_{count}"
            onnx_outputs[k] = unique
        taken.add(onnx_outputs[k])
    return user_outputs, onnx_outputs


def _symbol_names(program, user_inputs, onnx_inputs, dim_names) -> dict[str, str]:
    """The ONNX name of each input size symbol that dynamic_axes names."""
    placeholders = _placeholders(program)
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
    return symbol_names
