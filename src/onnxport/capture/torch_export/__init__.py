"""Capture with ``torch.export``: a graph of ATen calls with dtype/shape metadata and sources.

The program is taken as torch.export returns it (no ``run_decompositions``): the translator
decomposes, one node at a time, only what the op library does not translate. One module per
phase: signature (the forward torch.export sees), strategies (non-strict, strict, sizes 0 and 1,
fixed dims), eager_check (the program against eager at the example), cleanup (asserts,
functionalization) and naming (the inputs', outputs' and dims' ONNX names).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import torch
from torch.export import ExportedProgram

from onnxport.capture.dynamic import tensor_input_slots
from onnxport.capture import quirks
from onnxport.capture.specialization import describe
from onnxport.capture.torch_export.cleanup import (drop_runtime_asserts, functionalize,
                                                   needs_functionalization)
from onnxport.capture.torch_export.naming import (CapturedProgram, input_display_names,
                                                  named_program)
from onnxport.capture.torch_export.signature import (module_for_function, parameter_names,
                                                     var_positional)
from onnxport.capture.torch_export.strategies import capture_with_strategies

__all__ = ["CapturedProgram", "capture_torch_export", "drop_runtime_asserts", "functionalize",
           "needs_functionalization", "parameter_names", "var_positional"]


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
    strategy, attempts, fixed, bounded = "given ExportedProgram", [], [], []
    if isinstance(model, ExportedProgram):
        program = model
    else:
        module = model if isinstance(model, torch.nn.Module) else module_for_function(model)
        module = quirks.prepared(module)
        names = parameter_names(model)
        display = input_display_names(args, kwargs, names, input_names)
        program, strategy, attempts, fixed, bounded = capture_with_strategies(
            module, args, kwargs, dynamic_shapes, names,
            describe_dim=lambda d: describe(d, display(d.position),
                                            (dim_names or {}).get((d.position, d.axis))))
    if needs_functionalization(program):
        from torch.fx.experimental import _config as shapes_config

        oblivious = bool(program.graph_module.meta.get("backed_size_oblivious"))
        # Functionalizing traces the graph again: as it was captured, with the same patches.
        with shapes_config.patch(backed_size_oblivious=oblivious), quirks.applied("functionalize"):
            program = functionalize(program, keep_op or (lambda op: False))
        program.graph_module.meta["backed_size_oblivious"] = oblivious
    drop_runtime_asserts(program.graph_module)
    nested_names = None
    if not isinstance(model, ExportedProgram):
        # Tensors inside a cache, list or dict are named after their path in it.
        slots = tensor_input_slots(args, kwargs, parameter_names(model))
        nested_names = [slot.name if slot.path else None for slot in slots]
    captured = named_program(program, dim_names or {}, input_names, output_names,
                         output_dim_names or {}, nested_names)
    captured.strategy, captured.failed_strategies, captured.fixed_dims = strategy, attempts, fixed
    captured.bounded_dims = bounded
    return captured

