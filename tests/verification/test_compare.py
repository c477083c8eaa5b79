"""verify=True: the eager run leaves the model as it was, non-tensor outputs are compared by
value, and every failure, ONNX Runtime refusing the model included, is a VerificationError."""

from __future__ import annotations

import contextlib
import tempfile

import onnx_ir
import pytest
import torch

import onnxport
from onnxport import VerificationError
from onnxport.errors import InvalidModelError
from onnxport.translate.ops import elementwise  # noqa: F401  (registers aten::add)
from onnxport.translate.registry import default_registry


class Counter(torch.nn.Module):
    """Moves a buffer on every call, as a step counter or running statistics do."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.scale = torch.nn.Parameter(torch.full((3,), 2.0))

    def forward(self, x):
        self.count.add_(1)
        return x * self.scale + self.count


@contextlib.contextmanager
def translated_as(name: str, function):
    registry = default_registry()
    original = registry.lookup(name, 18)
    registry.register(name.split(".")[0], function, since_opset=1)
    try:
        yield
    finally:
        registry.register(name.split(".")[0], original.function,
                          since_opset=original.since_opset)


def test_verify_leaves_buffers_as_they_were():
    model = Counter()
    x = torch.randn(2, 3)
    program = onnxport.export(model, (x,), verify=True)
    assert model.count.item() == 0
    assert all(r.passed for r in program.verification)
    # The export and the model still agree after verification: count is 0 in both.
    torch.testing.assert_close(program(x)[0], x * 2 + 1, rtol=1e-3, atol=1e-4)


def test_state_is_restored_when_verification_fails():
    model = Counter()

    def wrong_mul(g, self, other):
        return g.op("Add", self, other)

    with translated_as("aten::mul.Tensor", wrong_mul):
        with pytest.raises(VerificationError, match="MISMATCH"):
            onnxport.export(model, (torch.randn(2, 3),), verify=True)
    assert model.count.item() == 0


def test_state_is_restored_when_the_eager_run_raises():
    from onnxport.verification.compare import preserved_state

    model = Counter()
    with pytest.raises(ZeroDivisionError):
        with preserved_state(model):
            model(torch.randn(3))
            model.count = torch.tensor(5.0)  # rebinding the buffer is undone as well
            raise ZeroDivisionError
    assert model.count.item() == 0 and model._buffers["count"] is model.count
    assert model.scale.tolist() == [2.0, 2.0, 2.0]


def test_number_output_is_compared_by_value():
    x = torch.randn(2, 3)
    program = onnxport.export(lambda z: (z + 1, 3), (x,), verify=True)
    assert [r.passed for r in program.verification] == [True, True]
    torch.testing.assert_close(program(x)[0], x + 1, rtol=1e-3, atol=1e-4)
    assert program(x)[1].item() == 3


def test_number_output_that_differs_is_named():
    from onnxport.verification.compare import compare_outputs

    results = compare_outputs(["y", "n"], [torch.ones(2), 3], [torch.ones(2), torch.tensor(4)])
    assert [r.passed for r in results] == [True, False]
    assert compare_outputs(["f"], [0.5], [torch.tensor(0.50001)])[0].passed


def test_model_refused_by_onnx_runtime_is_a_verification_error():
    # A translation emitting an op of a domain ONNX Runtime has no kernel for: valid ONNX (the
    # checker knows no schema for the domain), which ONNX Runtime refuses to load.
    def add_without_kernel(g, self, other, alpha=1):
        return g.op("test.domain::NoKernel", self, other)

    with translated_as("aten::add.Tensor", add_without_kernel):
        with pytest.raises(VerificationError) as caught:
            onnxport.export(lambda z: z + 1, (torch.randn(2, 3),), verify=True)
    message = str(caught.value)
    assert "ONNX Runtime refused the exported model" in message
    assert "test.domain:NoKernel" in message
    assert tempfile.gettempdir() not in message and "model.onnx" not in message


def wrong_dtype_add(g, self, other, alpha=1):
    # An int64 result where the graph (torch) says float.
    return g.op("Cast", g.op("Add", self, other), to_i=7)


def test_invalid_model_from_a_translation_of_the_library_is_an_onnxport_bug():
    # The validity gate refuses it before ONNX Runtime sees it, and says whose fault it is.
    with translated_as("aten::add.Tensor", wrong_dtype_add):
        with pytest.raises(InvalidModelError) as caught:
            onnxport.export(lambda z: z + 1, (torch.randn(2, 3),), verify=True)
    message = str(caught.value)
    assert message.startswith("The exported ONNX model is invalid. After the export")
    assert "onnx.checker: [ShapeInferenceError]" in message
    assert "onnxport bug" in message and "not onnxport's own" not in message


def test_invalid_model_from_a_users_symbolic_names_the_symbolic_not_onnxport():
    onnxport.register_custom_op_symbolic("aten::add", wrong_dtype_add, 9)
    try:
        with pytest.raises(InvalidModelError) as caught:
            onnxport.export(lambda z: z + 1, (torch.randn(2, 3),), verify=True)
    finally:
        onnxport.unregister_custom_op_symbolic("aten::add", 9)
    message = str(caught.value)
    assert message.startswith("The exported ONNX model is invalid. After the export")
    assert "(7) vs (1)" in message
    assert "node 'Cast': made by the symbolic function registered for aten::add.Tensor " \
           "(wrong_dtype_add)" in message
    assert "bug" not in message and "please report" not in message


def test_invalid_model_from_an_onnx_registry_translation_names_it():
    registry = onnxport.OnnxRegistry()
    registry.register_op(wrong_dtype_add, "aten", "add", "Tensor")
    with pytest.raises(InvalidModelError) as caught:
        onnxport.dynamo_export(lambda z: z + 1, torch.randn(2, 3),
                               export_options=onnxport.ExportOptions(onnx_registry=registry))
    message = str(caught.value)
    assert "made by the translation registered on an OnnxRegistry for aten::add.Tensor " \
           "(wrong_dtype_add)" in message
    assert "bug" not in message


def test_model_writing_into_its_input_is_verified_on_the_given_input():
    def add_in_place(z):
        return z.add_(1) * 2

    x = torch.randn(2, 3)
    before = x.clone()
    program = onnxport.export(add_in_place, (x.clone(),), verify=True)
    assert all(r.passed for r in program.verification)
    torch.testing.assert_close(program(before)[0], (before + 1) * 2, rtol=1e-3, atol=1e-4)


def test_none_output_is_skipped():
    x = torch.randn(2, 3)
    program = onnxport.export(lambda z: (z + 1, None, z * 2), (x,), verify=True)
    assert len(program.verification) == 2 and all(r.passed for r in program.verification)


def test_eager_outputs_skip_none_and_keep_numbers():
    from onnxport.verification.compare import eager_outputs

    x = torch.randn(2)
    outputs = eager_outputs(lambda z: (z + 1, None, {"n": 3, "y": z * 2}), (x,), {})
    assert len(outputs) == 3 and outputs[1] == 3


def test_nested_outputs_with_numbers_and_flags():
    x = torch.randn(2, 3)
    program = onnxport.export(lambda z: {"a": z + 1, "n": 2.5, "b": [z * 2, True]}, (x,),
                              verify=True)
    assert [(r.name, r.passed) for r in program.verification] == [
        ("a", True), ("n", True), ("b.0", True), ("b.1", True)]


def test_verify_with_weights_as_inputs():
    # export_params=False: the weights are inputs of the ONNX model; verification feeds them.
    model = Counter()
    x = torch.randn(2, 3)
    program = onnxport.export(model, (x,), export_params=False, verify=True)
    assert [r.passed for r in program.verification] == [True]
    assert model.count.item() == 0


def test_output_count_mismatch_is_said_plainly():
    from onnxport.verification.compare import compare_outputs, format_report

    results = compare_outputs(["y"], [torch.ones(2), torch.ones(3)], [torch.ones(2)])
    assert "the number of outputs: PyTorch gives 2 (tensors and numbers, None left out), the " \
        "ONNX model 1" in format_report(results)


def test_inputs_that_do_not_fit_are_a_verification_error():
    from onnxport.verification.compare import run_in_onnx_runtime

    program = onnxport.export(lambda a, b: a + b, (torch.randn(2), torch.randn(2)))
    with pytest.raises(VerificationError, match=r"cannot verify: the ONNX model takes inputs "
                       r"\['b'\] beyond the 1 given"):
        run_in_onnx_runtime(program, (torch.randn(2),), {})
    with pytest.raises(VerificationError, match="cannot verify: the ONNX model takes 2 inputs"):
        run_in_onnx_runtime(program, (torch.randn(2),) * 3, {})


class _DuplicatingPass(onnx_ir.passes.InPlacePass):
    """Renames a node as another is named: a broken pass."""

    def call(self, model):
        nodes = list(model.graph)
        if len(nodes) < 2 or nodes[1].name == nodes[0].name:
            return onnx_ir.passes.PassResult(model, False)
        nodes[1].name = nodes[0].name
        return onnx_ir.passes.PassResult(model, True)


def test_a_pass_that_breaks_the_model_is_named(monkeypatch):
    # An export checks the model once, at the end; when that fails, it runs again checked
    # after each pass, so that the error names the pass that broke it.
    from onnxport.passes import presets

    default = presets.PRESETS["default"]
    monkeypatch.setitem(presets.PRESETS, "default", (
        lambda fused_ops=True: [*default[0](fused_ops=fused_ops), _DuplicatingPass()],
        default[1], default[2]))
    with pytest.raises(InvalidModelError) as caught:
        onnxport.export(lambda z: (z + 1).relu() * 2, (torch.randn(2, 3),))
    message = str(caught.value)
    assert "After the pass _DuplicatingPass" in message and "two nodes named" in message
    # (and a model the passes keep valid is checked once: no pass is named)
    monkeypatch.setitem(presets.PRESETS, "default", default)
    onnxport.export(lambda z: (z + 1).relu() * 2, (torch.randn(2, 3),))
