"""The weights of a model exported under ``enable_fake_mode``: shapes and dtypes, no values.
The pipeline puts a :class:`MissingWeight` in place of each fake tensor, so that reading one
says how to give the real weights."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
from onnx_ir.tensor_adapters import TorchTensor

from onnxport.checkpoints import DescribedTensor
from onnxport.errors import OnnxExporterError


class MissingWeight(DescribedTensor):
    """An initializer of a model exported under ``enable_fake_mode``: shape and dtype only.
    Reading it fails with the way out; ``save(path, model_state=...)`` replaces it."""

    __slots__ = ()

    def _missing(self):
        raise no_value_error(self.name)

    def numpy(self):
        self._missing()

    def __array__(self, dtype: Any = None, copy: Any = None):
        self._missing()

    def __dlpack__(self, *, stream: Any = None):
        self._missing()

    def __dlpack_device__(self):
        self._missing()

    def tobytes(self) -> bytes:
        self._missing()

    def tofile(self, file) -> None:
        self._missing()

    def __repr__(self) -> str:
        return f"MissingWeight({self.name!r}, {self._dtype}, {list(self._shape)})"


def no_value_error(name: str) -> OnnxExporterError:
    return OnnxExporterError(
        f"weight {name!r} has no value: the model was exported under enable_fake_mode(); "
        "pass the real weights with onnx_program.save(path, model_state=model.state_dict() or "
        "a checkpoint path)")


def drop_fake_weights(model: ir.Model) -> None:
    from torch._subclasses.fake_tensor import FakeTensor

    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if isinstance(tensor, TorchTensor) and isinstance(tensor.raw, FakeTensor):
            value.const_value = MissingWeight(name, tensor.dtype, tensor.shape)
