"""onnxport: a PyTorch -> ONNX exporter whose API mirrors ``torch.onnx``.

The names below are imported on first use (PEP 562), so that ``import onnxport`` alone, and the
``onnxport`` command's ``--help``, ``--version`` and usage errors, do not import torch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from onnxport._version import __version__
from onnxport._versions import UnsupportedVersionWarning, warn_if_unsupported

warn_if_unsupported()  # before anything that a version out of range could break (metadata only)

# public name -> the module that defines it
_LAZY = {
    "export": "onnxport.api",
    "export_to_pretty_string": "onnxport.api",
    "is_in_onnx_export": "onnxport.api",
    "CaptureError": "onnxport.errors",
    "InvalidExportOptionsError": "onnxport.errors",
    "OnnxExporterError": "onnxport.errors",
    "TranslationError": "onnxport.errors",
    "UnsupportedOpsError": "onnxport.errors",
    "VerificationError": "onnxport.errors",
    "ONNXProgram": "onnxport.program",
    "ONNXRuntimeOptions": "onnxport.program",
    "OperatorExportTypes": "onnxport.compat.enums",
    "TrainingMode": "onnxport.compat.enums",
    "JitScalarType": "onnxport.compat.jit_scalar_type",
    "register_custom_op_symbolic": "onnxport.compat.custom_symbolics",
    "unregister_custom_op_symbolic": "onnxport.compat.custom_symbolics",
    "select_model_mode_for_export": "onnxport.compat.model_mode",
    "set_training": "onnxport.compat.model_mode",
    "disable_log": "onnxport.verification",
    "enable_log": "onnxport.verification",
    "OnnxRegistry": "onnxport.compat.registry_api",
    "DiagnosticOptions": "onnxport.compat.dynamo_api",
    "ExportOptions": "onnxport.compat.dynamo_api",
    "ONNXProgramSerializer": "onnxport.compat.dynamo_api",
    "dynamo_export": "onnxport.compat.dynamo_api",
    "enable_fake_mode": "onnxport.compat.dynamo_api",
}
_SUBMODULES = ("operators", "symbolic_helper", "utils", "verification")

__all__ = sorted([*_LAZY, *_SUBMODULES, "UnsupportedVersionWarning"])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES or not name.startswith("__"):
        # A public submodule, or any other one code reaches as onnxport.<name>.
        try:
            value = importlib.import_module(f"onnxport.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"onnxport.{name}":
                raise
            raise AttributeError(f"module 'onnxport' has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module 'onnxport' has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and IDEs see
    from onnxport import operators, symbolic_helper, utils, verification  # noqa: F401
    from onnxport.compat.enums import OperatorExportTypes, TrainingMode  # noqa: F401
    from onnxport.compat.model_mode import select_model_mode_for_export, set_training  # noqa: F401
    from onnxport.compat.jit_scalar_type import JitScalarType  # noqa: F401
    from onnxport.api import export, export_to_pretty_string, is_in_onnx_export  # noqa: F401
    from onnxport.compat.dynamo_api import (DiagnosticOptions, ExportOptions,  # noqa: F401
                                     ONNXProgramSerializer, dynamo_export, enable_fake_mode)
    from onnxport.errors import (CaptureError, InvalidExportOptionsError,  # noqa: F401
                                 OnnxExporterError, TranslationError, UnsupportedOpsError,
                                 VerificationError)
    from onnxport.program import ONNXProgram, ONNXRuntimeOptions  # noqa: F401
    from onnxport.compat.registry_api import OnnxRegistry  # noqa: F401
    from onnxport.compat.custom_symbolics import (register_custom_op_symbolic,  # noqa: F401
                                                  unregister_custom_op_symbolic)
    from onnxport.verification import disable_log, enable_log  # noqa: F401
