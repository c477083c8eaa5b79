"""``onnxport.utils``: the registration functions of ``torch.onnx.utils`` under the same name."""

from __future__ import annotations

from onnxport.api import export, export_to_pretty_string, is_in_onnx_export
from onnxport.translate.custom import register_custom_op_symbolic, unregister_custom_op_symbolic

__all__ = ["export", "export_to_pretty_string", "is_in_onnx_export",
           "register_custom_op_symbolic", "unregister_custom_op_symbolic"]
