"""``onnxport.utils``: the functions of ``torch.onnx.utils`` under the same names."""

from __future__ import annotations

from typing import Any

import torch

from onnxport.api import export, export_to_pretty_string, is_in_onnx_export
from onnxport.compat.custom_symbolics import (register_custom_op_symbolic,
                                              unregister_custom_op_symbolic)
from onnxport.compat.model_mode import select_model_mode_for_export

__all__ = ["export", "export_to_pretty_string", "is_in_onnx_export",
           "register_custom_op_symbolic", "select_model_mode_for_export",
           "unconvertible_ops", "unregister_custom_op_symbolic"]


def unconvertible_ops(model: Any, args: Any, training: Any = None,
                      opset_version: int | None = None) -> tuple[torch.fx.Graph, list[str]]:
    """Capture ``model`` as ``export(..., dynamo=False)`` does and return its graph with the
    names of every op in it (or in the decompositions of its ops) that has no translation at
    ``opset_version``, without translating anything: all of them at once, where a failed
    export stops at the translation stage."""
    from onnxport import _arguments, pipeline
    from onnxport.translate import default_registry

    opset = _arguments.check_opset(opset_version)
    args, kwargs = _arguments.check_args(args, None)
    capture = _arguments.CaptureSettings(dynamo=False, fallback=False,
                                         training=_arguments.check_training(training))
    translation = _arguments.TranslationSettings(
        registry=default_registry(), opset=opset,
        operator_export_type=_arguments.check_operator_export_type(None))
    return pipeline.unconvertible_ops(model, args, kwargs, capture, translation)
