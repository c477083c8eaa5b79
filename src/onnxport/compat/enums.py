"""``OperatorExportTypes`` and ``TrainingMode``: the enums of torch.onnx's export options,
under the same names and numbers, so that calls written for torch.onnx pass them unchanged."""

from __future__ import annotations

import enum


class _Enum(enum.IntEnum):
    # "TrainingMode.EVAL" as torch's enums print (an IntEnum prints "0" since Python 3.11).
    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class OperatorExportTypes(_Enum):
    """How ops are exported: ONNX only, or with ATen ops (or raw nodes) where ONNX has none."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


class TrainingMode(_Enum):
    """The mode the model is exported in: eval, left as it is, or training."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2
