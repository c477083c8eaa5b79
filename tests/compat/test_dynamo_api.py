"""dynamo_export's options beyond the page's examples: fake mode with real weights attached at
save, custom translations on an OnnxRegistry (and only there), option and failure errors."""

import logging
import os

import onnx
import onnxruntime as ort
import json

import pytest
import torch

import onnxport
from onnxport.errors import InvalidExportOptionsError, OnnxExporterError, UnsupportedOpsError
from onnxport.translate import default_registry

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = torch.nn.Linear(8, 16)
        self.fc1 = torch.nn.Linear(16, 16, bias=False)
        self.norm = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.norm(torch.sigmoid(self.fc1(torch.relu(self.fc0(x))))))


def _run(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (name,) = [i.name for i in session.get_inputs()]
    return torch.from_numpy(session.run(None, {name: x.numpy()})[0])


# -- fake mode ------------------------------------------------------------------------------
def _fake_export(dynamic=False):
    with onnxport.enable_fake_mode() as context:
        fake = MLP()
    assert isinstance(fake.fc0.weight, torch._subclasses.fake_tensor.FakeTensor)
    x = torch.rand(4, 8)  # a real input: allowed next to fake weights
    options = onnxport.ExportOptions(fake_context=context, dynamic_shapes=dynamic)
    return onnxport.dynamo_export(fake, x, export_options=options)


def test_fake_mode_program_saved_with_the_real_state_dict(tmp_path):
    program = _fake_export(dynamic=True)
    real = MLP()
    path = tmp_path / "mlp.onnx"
    program.save(path, model_state=real.state_dict(), external_data=True)

    # The weights went to the side file, not into the model (small ones, under
    # serialize.EXTERNAL_THRESHOLD bytes, stay inline).
    assert len(os.listdir(tmp_path)) == 2
    proto = onnx.load(str(path), load_external_data=False)
    locations = {t.name: t.data_location for t in proto.graph.initializer}
    assert locations["fc0.weight"] == locations["fc1.weight"] == onnx.TensorProto.EXTERNAL
    for batch in (4, 7):
        x = torch.rand(batch, 8)
        torch.testing.assert_close(_run(path, x), real(x).detach(), **TOLERANCE)


def test_fake_mode_program_saved_with_a_checkpoint_path(tmp_path):
    program = _fake_export()
    real = MLP()
    checkpoint = tmp_path / "weights.pt"
    torch.save(real.state_dict(), checkpoint)
    program.save(tmp_path / "mlp.onnx", model_state=checkpoint)
    x = torch.rand(4, 8)
    torch.testing.assert_close(_run(tmp_path / "mlp.onnx", x), real(x).detach(), **TOLERANCE)


def test_fake_mode_program_without_a_weight_says_which_and_writes_nothing(tmp_path):
    program = _fake_export()
    state = MLP().state_dict()
    del state["fc1.weight"]
    with pytest.raises(OnnxExporterError, match=r"no value for 1 weight.*: fc1.weight;"):
        program.save(tmp_path / "mlp.onnx", model_state=state)
    assert os.listdir(tmp_path) == []
    with pytest.raises(OnnxExporterError, match="enable_fake_mode"):
        program(torch.rand(4, 8))


# -- OnnxRegistry ---------------------------------------------------------------------------
def _sigmoid_as_exp(g, self):
    """sigmoid(x) = 1 / (1 + exp(-x)), a custom translation that is easy to spot."""
    one = g.const(1.0, self.dtype)
    return g.op("Reciprocal", g.op("Add", one, g.op("Exp", g.op("Neg", self))))


def _op_types(program):
    return [node.op_type for node in program.model.graph]


def test_registered_translation_serves_only_the_exports_given_its_registry():
    registry = onnxport.OnnxRegistry()
    assert not registry.get_op_functions("aten", "sigmoid") == [_sigmoid_as_exp]
    registry.register_op(_sigmoid_as_exp, "aten", "sigmoid")
    assert registry.get_op_functions("aten", "sigmoid")[0] is _sigmoid_as_exp
    assert registry.is_registered_op("aten", "sigmoid")
    assert registry.opset_version == 18

    model, x = MLP(), torch.rand(4, 8)
    custom = onnxport.dynamo_export(
        model, x, export_options=onnxport.ExportOptions(onnx_registry=registry))
    plain = onnxport.dynamo_export(model, x)
    later = onnxport.export(model, (x,))

    assert "Sigmoid" not in _op_types(custom) and "Reciprocal" in _op_types(custom)
    assert "Sigmoid" in _op_types(plain) and "Sigmoid" in _op_types(later)
    assert default_registry().lookup("aten::sigmoid", 18).function is not _sigmoid_as_exp
    for program in (custom, plain):
        torch.testing.assert_close(program(x)[0], model(x).detach(), **TOLERANCE)


torch.library.define("onnxport_test::scaled_add", "(Tensor x, Tensor y, float alpha) -> Tensor")


@torch.library.impl("onnxport_test::scaled_add", "CompositeExplicitAutograd")
def _scaled_add(x, y, alpha):
    return x + alpha * y


@torch.library.register_fake("onnxport_test::scaled_add")
def _scaled_add_fake(x, y, alpha):
    return torch.empty_like(x)


class UsesCustomOp(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.onnxport_test.scaled_add(x, y, 0.5).relu()


def test_custom_op_translated_through_the_registry(tmp_path):
    model, args = UsesCustomOp(), (torch.rand(3, 4), torch.rand(3, 4))
    with pytest.raises(UnsupportedOpsError, match="onnxport_test::scaled_add") as caught:
        onnxport.dynamo_export(model, *args)
    assert caught.value.diagnostics.stage == "translate"
    # As torch.onnx: the failed export's program writes what was recorded, the missing op too.
    path = tmp_path / "failed.sarif"
    caught.value.onnx_program.save_diagnostics(path)
    log = json.loads(path.read_text())
    messages = [r["message"]["text"] for r in log["runs"][0]["results"]]
    assert any("onnxport_test::scaled_add" in m for m in messages)
    assert any("failed during translate" in m for m in messages)
    assert len(caught.value.onnx_program.model_proto.graph.node) == 0

    def scaled_add(g, x, y, alpha):
        return g.op("Add", x, g.op("Mul", g.const(alpha, x.dtype), y))

    registry = onnxport.OnnxRegistry()
    assert not registry.is_registered_op("onnxport_test", "scaled_add")
    registry.register_op(scaled_add, "onnxport_test", "scaled_add", overload="default")
    assert registry.is_registered_op("onnxport_test", "scaled_add")
    program = onnxport.dynamo_export(
        model, *args, export_options=onnxport.ExportOptions(onnx_registry=registry))
    torch.testing.assert_close(program(*args)[0], model(*args), **TOLERANCE)


def test_onnxscript_functions_as_registered_translations():
    onnxscript = pytest.importorskip("onnxscript")
    from onnxscript import opset18 as op

    # The dynamo page's example: aten::add.Tensor as an onnxscript function, alpha an
    # attribute, the model calling it as a function of the custom.aten domain.
    @onnxscript.script(onnxscript.values.Opset(domain="custom.aten", version=1))
    def custom_aten_add(input_x, input_y, alpha: float = 1.0):
        alpha = op.CastLike(alpha, input_y)
        input_y = op.Mul(input_y, alpha)
        return op.Add(input_x, input_y)

    @onnxscript.script(onnxscript.values.Opset(domain="custom.scaled", version=2))
    def scaled_add(x, y, alpha: float):
        return op.Add(x, op.Mul(y, op.CastLike(alpha, y)))

    registry = onnxport.OnnxRegistry()
    registry.register_op(custom_aten_add, "aten", "add", overload="Tensor")
    registry.register_op(scaled_add, "onnxport_test", "scaled_add")
    assert registry.is_registered_op("aten", "add", "Tensor")
    assert registry.get_op_functions("aten", "add", "Tensor")[0] is custom_aten_add

    class Adds(torch.nn.Module):
        def forward(self, x, y):
            return torch.add(x, y, alpha=3.0) + torch.ops.onnxport_test.scaled_add(x, y, 0.5)

    model, args = Adds(), (torch.rand(3, 4), torch.rand(3, 4))
    program = onnxport.dynamo_export(
        model, *args, export_options=onnxport.ExportOptions(onnx_registry=registry))

    calls = [(n.domain, n.op_type) for n in program.model.graph]
    assert calls.count(("custom.aten", "custom_aten_add")) == 2 and \
        ("custom.scaled", "scaled_add") in calls, calls
    first = next(n for n in program.model.graph if n.op_type == "custom_aten_add")
    assert first.attributes["alpha"].value == 3.0
    assert program.model.opset_imports["custom.scaled"] == 2
    assert {("custom.aten", "custom_aten_add", ""), ("custom.scaled", "scaled_add", "")} <= set(
        program.model.functions)
    onnx.checker.check_model(program.model_proto, full_check=True)
    torch.testing.assert_close(program(*args)[0], model(*args), **TOLERANCE)


@pytest.mark.parametrize("call, message", [
    (lambda r: r.register_op("not a function", "aten", "relu"), "def fn"),
    (lambda r: r.register_op(lambda g, x: x, "aten::relu", "relu"), "namespace"),
    (lambda r: r.register_op(lambda g, x: x, "aten", "add", overload="Tensor.out"), "overload"),
    (lambda r: onnxport.OnnxRegistry(opset_version=7), "opset_version=7"),
])
def test_registry_refuses_bad_registrations(call, message):
    with pytest.raises(InvalidExportOptionsError, match=message):
        call(onnxport.OnnxRegistry())


# -- options and failures -------------------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    (dict(dynamic_shapes="yes"), "dynamic_shapes"),
    (dict(dynamic_shapes={"x": {0: "batch"}}), "torch.export.Dim"),
    (dict(fake_context=object()), "enable_fake_mode"),
    (dict(onnx_registry=default_registry()), "OnnxRegistry"),
    (dict(diagnostic_options={"verbosity_level": 10}), "DiagnosticOptions"),
])
def test_invalid_export_options(options, message):
    with pytest.raises(InvalidExportOptionsError, match=message):
        onnxport.ExportOptions(**options)


def test_export_options_must_be_export_options():
    with pytest.raises(InvalidExportOptionsError, match="onnxport.ExportOptions"):
        onnxport.dynamo_export(MLP(), torch.rand(2, 8), export_options={"dynamic_shapes": True})


def test_diagnostic_options_are_checked_and_kept():
    options = onnxport.DiagnosticOptions(verbosity_level=logging.DEBUG, warnings_as_errors=True)
    assert (options.verbosity_level, options.warnings_as_errors) == (logging.DEBUG, True)
    with pytest.raises(InvalidExportOptionsError, match="warnings_as_errors"):
        onnxport.DiagnosticOptions(warnings_as_errors="yes")
    program = onnxport.dynamo_export(
        MLP(), torch.rand(2, 8),
        export_options=onnxport.ExportOptions(diagnostic_options=options))
    assert program.diagnostic_options is options


class FailsInForward(torch.nn.Module):
    def forward(self, x):
        raise ValueError("broken on purpose")


def test_a_failure_is_an_onnx_exporter_error_with_diagnostics(tmp_path):
    with pytest.raises(OnnxExporterError, match="(?s)capture.*broken on purpose") as caught:
        onnxport.dynamo_export(FailsInForward(), torch.rand(2))
    assert caught.value.diagnostics.stage == "capture"
    caught.value.onnx_program.save_diagnostics(tmp_path / "failed.sarif")
    assert "the export failed during capture" in (tmp_path / "failed.sarif").read_text()


class WithNonPersistentBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        # Computed at construction and left out of state_dict, like a rotary inv_freq.
        self.register_buffer("scale", torch.arange(1, 5, dtype=torch.float32), persistent=False)

    def forward(self, x):
        return self.linear(x) * self.scale


def test_fake_mode_non_persistent_buffer_is_named_and_can_be_given(tmp_path):
    with onnxport.enable_fake_mode() as context:
        fake = WithNonPersistentBuffer()
    x = torch.rand(2, 4)
    program = onnxport.dynamo_export(
        fake, x, export_options=onnxport.ExportOptions(fake_context=context))
    real = WithNonPersistentBuffer()
    with pytest.raises(OnnxExporterError, match=r": scale;.*named_buffers"):
        program.save(tmp_path / "m.onnx", model_state=real.state_dict())
    assert os.listdir(tmp_path) == []
    program.save(tmp_path / "m.onnx",
                 model_state={**real.state_dict(), **dict(real.named_buffers())})
    torch.testing.assert_close(_run(tmp_path / "m.onnx", x), real(x).detach(), **TOLERANCE)


def test_fake_mode_small_llama_with_its_buffers(tmp_path):
    # A Llama's state includes buffers the graph does not use (original_inv_freq): passing
    # the whole model's state must work.
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        use_cache=False)
    with onnxport.enable_fake_mode() as context:
        fake = transformers.LlamaForCausalLM(config)
    input_ids = torch.randint(0, 1000, (1, 16))
    program = onnxport.dynamo_export(
        fake, input_ids, export_options=onnxport.ExportOptions(fake_context=context))
    real = transformers.LlamaForCausalLM(config).eval()
    program.save(tmp_path / "llama.onnx",
                 model_state={**real.state_dict(), **dict(real.named_buffers())})
    session = ort.InferenceSession(str(tmp_path / "llama.onnx"),
                                   providers=["CPUExecutionProvider"])
    (name,) = [i.name for i in session.get_inputs()]
    logits = torch.from_numpy(session.run(None, {name: input_ids.numpy()})[0])
    torch.testing.assert_close(logits, real(input_ids).logits.detach(), **TOLERANCE)


class TakesKeywords(torch.nn.Module):
    def forward(self, x, y=None, scale=2.0):
        return x * scale + y


def test_dynamic_shapes_true_covers_keyword_tensors():
    model = TakesKeywords()
    program = onnxport.dynamo_export(
        model, torch.rand(2, 3), y=torch.rand(2, 3),
        export_options=onnxport.ExportOptions(dynamic_shapes=True))
    for shape in ((2, 3), (4, 5)):
        x, y = torch.rand(shape), torch.rand(shape)
        torch.testing.assert_close(program(x, y=y)[0], model(x, y), **TOLERANCE)
