"""``OperatorExportTypes`` and ``TrainingMode``: the enums of torch.onnx's export options,
under the same names and numbers, so that calls written for torch.onnx pass them unchanged."""

from __future__ import annotations

import enum


class OperatorExportTypes(enum.IntEnum):
    """How ops are exported: ONNX only, or with ATen ops (or raw nodes) where ONNX has none."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


class TrainingMode(enum.IntEnum):
    """The mode the model is exported in: eval, left as it is, or training."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2
