"""The translator's walk over the captured graph (translate/graph.py): what it refuses before
emitting anything."""

from __future__ import annotations

import pytest
import torch

import onnxport
from onnxport.errors import TranslationError


class ComplexBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("phases", torch.randn(4, dtype=torch.complex64))

    def forward(self, x):
        return torch.view_as_real(self.phases * x)  # the complex line


def _complex_cases():
    # Complex inputs never reach translation: export() refuses them with its arguments
    # (tests/test_arguments.py::test_complex_input_is_refused).
    return {
        "complex intermediate": (
            lambda x: torch.view_as_real(torch.polar(x, x)), torch.rand(3),
            ["aten::polar at ", ".py:"]),
        "complex weight": (ComplexBuffer(), torch.rand(4),
                           ["weight 'phases' is a complex64", "in forward"]),
    }


@pytest.mark.parametrize("case", _complex_cases().values(), ids=list(_complex_cases()))
def test_complex_tensors_are_refused_by_name_and_line(case):
    # Before: the export succeeded and ONNX Runtime refused the file.
    from op_check import as_module

    function, x, expected = case
    model = function if isinstance(function, torch.nn.Module) else as_module(function)
    with pytest.raises(TranslationError, match="complex dtypes are not supported") as error:
        onnxport.export(model, (x,))
    for text in expected:
        assert text in str(error.value)
