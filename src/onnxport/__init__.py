"""onnxport: a PyTorch -> ONNX exporter whose API mirrors ``torch.onnx``."""

__version__ = "0.1.0"

from onnxport.api import export, export_to_pretty_string, is_in_onnx_export  # noqa: E402
from onnxport.errors import (  # noqa: E402
    CaptureError,
    InvalidExportOptionsError,
    OnnxExporterError,
    TranslationError,
    UnsupportedOpsError,
    VerificationError,
)
from onnxport.program import ONNXProgram, ONNXRuntimeOptions  # noqa: E402

__all__ = [
    "CaptureError",
    "InvalidExportOptionsError",
    "ONNXProgram",
    "ONNXRuntimeOptions",
    "OnnxExporterError",
    "TranslationError",
    "UnsupportedOpsError",
    "VerificationError",
    "export",
    "export_to_pretty_string",
    "is_in_onnx_export",
]
