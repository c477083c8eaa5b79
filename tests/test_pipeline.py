"""The export plan and its one runner: ``_arguments.plan_export`` turns a call of ``export`` into
per-stage settings, and ``pipeline.run`` runs the stages from them; every front door goes
through it (no thread-locals, no second copy of the glue)."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import torch

import onnxport
from onnxport import _arguments, api, pipeline

TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.fc1 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc1(torch.sigmoid(self.norm(self.fc0(x))))


def _plan(model, args, **options):
    return _arguments.plan_export(_arguments.bound_options(onnxport.export, model, args,
                                                           **options), {})


def _run_in_onnxruntime(program, *inputs):
    session = ort.InferenceSession(program.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feeds = {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds)


def test_plan_has_one_settings_object_per_stage(tmp_path):
    model, x = Net().eval(), torch.rand(2, 8)
    path = tmp_path / "m.onnx"
    plan = _plan(model, (x,), f=str(path), opset_version=17, fused_ops=False, optimize=False,
                 input_names=["x"], dynamic_axes={"x": {0: "batch"}}, dynamo=False)
    assert (plan.capture.dynamo, plan.capture.fallback, plan.capture.input_names) == \
        (False, False, ["x"])
    assert plan.capture.dim_names  # dynamic_axes resolved against the inputs
    assert plan.translation.opset == 17
    assert plan.translation.graph_options()["fused_ops"] is False
    assert (plan.passes.optimize, plan.passes.fused_ops) == (False, False)
    assert plan.save.f == str(path)
    assert plan.diagnostics.name.startswith("onnx_export_")
    assert not path.exists()  # planning writes nothing


def test_pipeline_run_matches_eager_in_onnxruntime_with_a_dynamic_batch(tmp_path):
    model, x = Net().eval(), torch.rand(2, 8)
    stages = []
    program = pipeline.run(_plan(model, (x,), f=str(tmp_path / "m.onnx"),
                                 dynamic_axes={"x": {0: "batch"}}, on_stage=stages.append))
    assert stages == ["capture", "translate", "passes", "check", "save"]
    assert (tmp_path / "m.onnx").exists()
    for batch in (1, 5):
        y = torch.rand(batch, 8)
        (actual,) = _run_in_onnxruntime(program, y)
        np.testing.assert_allclose(actual, model(y).detach().numpy(), **TOLERANCE)


def test_export_is_the_plan_run_by_the_pipeline():
    model, x = Net().eval(), torch.rand(3, 8)
    for dynamo in (True, False):
        by_export = onnxport.export(model, (x,), dynamo=dynamo).model_proto
        by_plan = pipeline.run(_plan(model, (x,), dynamo=dynamo)).model_proto
        assert by_export.SerializeToString() == by_plan.SerializeToString()


def _sigmoid_as_exp(g, self):
    one = g.const(1.0, self.dtype)
    return g.op("Reciprocal", g.op("Add", one, g.op("Exp", g.op("Neg", self))))


def test_dynamo_export_registry_travels_in_the_plan_not_in_the_thread():
    assert not hasattr(api, "_state") and not hasattr(api, "translations_from")
    registry = onnxport.OnnxRegistry()
    registry.register_op(_sigmoid_as_exp, "aten", "sigmoid")
    model, x = Net().eval(), torch.rand(2, 8)
    seen = {}

    def export_plainly():  # in another thread, while the custom export ran in this one
        seen["ops"] = {n.op_type for n in onnxport.export(model, (x,)).model_proto.graph.node}

    custom = onnxport.dynamo_export(
        model, x, export_options=onnxport.ExportOptions(onnx_registry=registry))
    thread = threading.Thread(target=export_plainly)
    thread.start()
    thread.join()
    # dynamo_export keeps each submodule a function: look into them too.
    ops = {n.op_type for n in custom.model_proto.graph.node} | {
        n.op_type for f in custom.model_proto.functions for n in f.node}
    assert "Reciprocal" in ops and "Sigmoid" not in ops
    assert "Sigmoid" in seen["ops"] and "Reciprocal" not in seen["ops"]
    plain = {n.op_type for n in onnxport.export(model, (x,)).model_proto.graph.node}
    assert "Sigmoid" in plain  # nothing of the custom export stayed behind
    (actual,) = _run_in_onnxruntime(custom, x)
    np.testing.assert_allclose(actual, model(x).detach().numpy(), **TOLERANCE)


def test_unconvertible_ops_captures_through_the_pipeline_and_restores_the_mode():
    model, x = Net().train(), torch.rand(2, 8)
    graph, missing = onnxport.utils.unconvertible_ops(model, (x,))
    assert isinstance(graph, torch.fx.Graph) and missing == []
    assert model.training  # captured in eval mode (the default), then put back
    assert not pipeline.is_in_onnx_export()


class _WithLargeBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.full((80,), 2.0))  # a weight over 256 bytes

    def forward(self, x):
        return self.linear(x) * self.scale[:3] + torch.arange(3)


def test_the_export_saves_the_model_it_checked_without_serializing_it_again(tmp_path,
                                                                           monkeypatch):
    # The check serializes the model (weights apart) for onnx.checker; the save wrote the
    # same proto again from the graph (a tenth of a small model's export).
    import onnx_ir as ir

    calls = []
    to_proto = ir.to_proto
    monkeypatch.setattr(ir, "to_proto", lambda *a, **k: calls.append(1) or to_proto(*a, **k))
    model, x = _WithLargeBuffer().eval(), torch.randn(2, 4)
    program = onnxport.export(model, (x,), f=str(tmp_path / "a.onnx"), dynamo=False)
    assert len(calls) == 1
    monkeypatch.setattr(ir, "to_proto", to_proto)
    program.save(str(tmp_path / "b.onnx"))  # serialized anew from the graph
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
    session = ort.InferenceSession(str(tmp_path / "a.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0],
                               model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_verified_export_is_serialized_again_for_its_save(tmp_path, monkeypatch):
    from onnxport import serialize

    entered = []
    known = serialize.header_known
    monkeypatch.setattr(serialize, "header_known",
                        lambda *a: entered.append(1) or known(*a))
    model, x = _WithLargeBuffer().eval(), torch.randn(2, 4)
    onnxport.export(model, (x,), f=str(tmp_path / "a.onnx"), dynamo=False, verify=True)
    assert not entered
    onnxport.export(model, (x,), f=str(tmp_path / "b.onnx"), dynamo=False)
    assert entered
    assert (tmp_path / "a.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()
