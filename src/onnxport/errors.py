"""The errors onnxport raises; each names the problem and the way out."""

from __future__ import annotations


class OnnxExporterError(RuntimeError):
    """An export failed; the message says at which stage and why."""


class InvalidExportOptionsError(ValueError):
    """An argument of ``export`` (or an ``ExportOptions`` field) is not acceptable."""


class CaptureError(OnnxExporterError):
    """torch.export could not capture the model."""


class DynamicDimensionFixedWarning(UserWarning):
    """A dimension asked to be dynamic was exported static (or bounded): the model fixes it; the
    message names the input, the axis and the line of model code."""


class FallbackWarning(UserWarning):
    """torch.export could not capture the model, and the export went on through the TorchScript
    path (tracing), as ``dynamo`` left at its default allows; the message names torch.export's
    failure and the line of model code."""


class TracingWarning(UserWarning):
    """Tracing recorded a value computed from a tensor (a Python bool, int or float, a branch
    taken, a loop count) as a constant: the ONNX model repeats this run's choice."""


class TranslationError(OnnxExporterError):
    """A captured call could not be translated to ONNX."""


class UnsupportedOpsError(TranslationError):
    """The graph uses ops that have no translation; lists every one with where it is used."""

    def __init__(self, missing: dict[str, list[str]], opset: int):
        self.missing = missing
        self.opset = opset
        lines = [f"{len(missing)} unsupported op(s) at opset {opset}:"]
        for name, places in sorted(missing.items()):
            distinct = list(dict.fromkeys(places))  # a line run twice is one place
            shown = "; ".join(distinct[:3])
            more = f" (+{len(distinct) - 3} more)" if len(distinct) > 3 else ""
            lines.append(f"  {name}: used at {shown}{more}")
        lines.append("onnxport has no translation for these, and torch no decomposition into "
                     "ops it can translate (a reason follows the place where there is one). "
                     "Register a symbolic function for each with "
                     "onnxport.register_custom_op_symbolic(name, fn, opset_version), keep them "
                     "as nodes of their own domain with operator_export_type="
                     "OperatorExportTypes.ONNX_FALLTHROUGH (a runtime must then implement "
                     "them), try another opset_version, or express those lines with other "
                     "torch ops. onnxport.utils.unconvertible_ops(model, args) lists them.")
        super().__init__("\n".join(lines))


class VerificationError(OnnxExporterError):
    """ONNX Runtime's outputs differ from PyTorch's beyond the tolerance."""


class ExternalDataError(OnnxExporterError, ValueError):
    """A model's external data is missing, or lies outside its folder (an absolute path,
    ``..``, or a symlink out)."""


class InvalidModelError(OnnxExporterError):
    """The exported model breaks a rule of ONNX (a duplicate name, a missing opset import, a
    checker error): an exporter bug, or a node a user's function (a symbolic, an OnnxRegistry
    translation) made. The message names the stage or pass that broke it, and such a node's
    function."""
