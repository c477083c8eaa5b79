"""Dropout in training mode (``export(training=TrainingMode.TRAINING)``): ONNX Dropout with
training_mode true, whose kept values are scaled by 1/(1-p) and whose dropped ones are zero."""

import numpy as np
import onnxruntime as ort
import pytest
import torch

import onnxport


class FunctionalDropout(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return torch.nn.functional.dropout(x, self.p, training=True)


def _session(program):
    return ort.InferenceSession(program.model_proto.SerializeToString(),
                                providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("dynamo", [True, False])
def test_training_dropout_drops_and_scales(dynamo):
    x = torch.rand(64, 64) + 1.0  # no zeros of its own
    program = onnxport.export(torch.nn.Dropout(0.25), (x,), dynamo=dynamo,
                              training=onnxport.TrainingMode.TRAINING)
    (node,) = [n for n in program.model.graph if n.op_type == "Dropout"]
    assert node.inputs[1].const_value.numpy().item() == pytest.approx(0.25)
    session = _session(program)
    (y,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    kept = y != 0
    np.testing.assert_allclose(y[kept], x.numpy()[kept] / 0.75, rtol=1e-5)
    assert 0.15 < 1 - kept.mean() < 0.35  # about p of 4096 values dropped


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_dropout_outside_training_is_identity(p):
    x = torch.randn(3, 4)
    model = torch.nn.Dropout(p)
    program = onnxport.export(model, (x,), training=onnxport.TrainingMode.EVAL)
    assert "Dropout" not in [n.op_type for n in program.model.graph]
    (actual,) = program(x)
    torch.testing.assert_close(actual, x)


def test_functional_dropout_with_zero_ratio_is_identity():
    x = torch.randn(3, 4)
    (actual,) = onnxport.export(FunctionalDropout(0.0), (x,))(x)
    torch.testing.assert_close(actual, x)


@pytest.mark.parametrize("dynamo", [True, False])
def test_eval_dropout_leaves_no_node(dynamo):
    # An Identity per eval-mode Dropout stayed in every classifier head (mobilenet_v2 had one
    # node more than torch.onnx's graph).
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Dropout(0.2)).eval()
    x = torch.randn(2, 4)
    program = onnxport.export(model, (x,), dynamo=dynamo)
    assert [node.op_type for node in program.model.graph] == ["Gemm"]
    got = _session(program).run(None, {program.model_proto.graph.input[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-3, atol=1e-4)
