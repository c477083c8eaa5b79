"""onnxport: a PyTorch -> ONNX exporter whose API mirrors ``torch.onnx``."""

__version__ = "0.1.0"

from onnxport._versions import UnsupportedVersionWarning, warn_if_unsupported  # noqa: E402

warn_if_unsupported()  # before anything that a version out of range could break

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
from onnxport._enums import OperatorExportTypes, TrainingMode  # noqa: E402
from onnxport._type_utils import JitScalarType  # noqa: E402
from onnxport.translate.custom import (  # noqa: E402
    register_custom_op_symbolic,
    unregister_custom_op_symbolic,
)
from onnxport._model_mode import select_model_mode_for_export, set_training  # noqa: E402
from onnxport import operators, symbolic_helper, utils, verification  # noqa: E402
from onnxport.verification import disable_log, enable_log  # noqa: E402
from onnxport.registry_api import OnnxRegistry  # noqa: E402
from onnxport.dynamo_api import (  # noqa: E402
    DiagnosticOptions,
    ExportOptions,
    ONNXProgramSerializer,
    dynamo_export,
    enable_fake_mode,
)

__all__ = [
    "UnsupportedVersionWarning",
    "CaptureError",
    "DiagnosticOptions",
    "ExportOptions",
    "InvalidExportOptionsError",
    "JitScalarType",
    "ONNXProgram",
    "ONNXProgramSerializer",
    "ONNXRuntimeOptions",
    "OnnxExporterError",
    "OperatorExportTypes",
    "TrainingMode",
    "OnnxRegistry",
    "TranslationError",
    "UnsupportedOpsError",
    "VerificationError",
    "disable_log",
    "dynamo_export",
    "enable_fake_mode",
    "enable_log",
    "export",
    "export_to_pretty_string",
    "is_in_onnx_export",
    "operators",
    "register_custom_op_symbolic",
    "select_model_mode_for_export",
    "set_training",
    "symbolic_helper",
    "unregister_custom_op_symbolic",
    "utils",
    "verification",
]
