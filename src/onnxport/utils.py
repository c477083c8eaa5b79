"""``onnxport.utils``: the functions of ``torch.onnx.utils`` under the same names."""

from __future__ import annotations

from typing import Any

import torch

from onnxport.compat.model_mode import select_model_mode_for_export
from onnxport.api import export, export_to_pretty_string, is_in_onnx_export
from onnxport.compat.custom_symbolics import (register_custom_op_symbolic,
                                              unregister_custom_op_symbolic)

__all__ = ["export", "export_to_pretty_string", "is_in_onnx_export",
           "register_custom_op_symbolic", "select_model_mode_for_export",
           "unconvertible_ops", "unregister_custom_op_symbolic"]


def unconvertible_ops(model: Any, args: Any, training: Any = None,
                      opset_version: int | None = None) -> tuple[torch.fx.Graph, list[str]]:
    """Capture ``model`` as ``export(..., dynamo=False)`` does and return its graph with the
    names of every op in it (or in the decompositions of its ops) that has no translation at
    ``opset_version``, without translating anything: all of them at once, where a failed
    export stops at the translation stage."""
    from onnxport import _arguments
    from onnxport.api import EXPORT_LOCK
    from onnxport.capture.quirks.autograd_functions import keep_autograd_functions
    from onnxport.capture.strategies import capture_model
    from onnxport.errors import UnsupportedOpsError
    from onnxport.translate import TranslationContext, default_registry
    from onnxport.compat.autograd_functions import kept_autograd_functions
    from onnxport.translate.graph import missing_translations
    from onnxport.translate.registry import aten_name

    opset = _arguments.check_opset(opset_version)
    args, kwargs = _arguments.check_args(args, None)
    mode = _arguments.check_training(training)
    registry = default_registry()
    operator_export_type = _arguments.check_operator_export_type(None)
    # Under the export lock: capture is not thread-safe (torch.export's state, the
    # Function.apply patch).
    with EXPORT_LOCK, select_model_mode_for_export(model, mode), \
            keep_autograd_functions(kept_autograd_functions(opset, operator_export_type)):
        captured, _, _ = capture_model(
            model, args, kwargs, dynamo=False, fallback=False,
            keep_op=lambda op: registry.lookup(aten_name(op), opset) is not None)
    context = TranslationContext(
        graph_module=captured.exported_program.graph_module,
        user_inputs=captured.user_inputs, onnx_input_names=captured.input_names,
        weights=captured.weights, user_outputs=captured.user_outputs,
        onnx_output_names=captured.output_names, symbol_names=captured.symbol_names)
    return captured.exported_program.graph, missing_translations(context, registry, opset)
