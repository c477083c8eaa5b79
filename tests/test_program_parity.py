"""torch.onnx 2.x's ONNXProgram methods and export option on onnxport's: optimize(),
apply_weights(), rename_axes(), compute_values() and export(custom_translation_table=...).
Every result is run in ONNX Runtime and compared with eager."""

from __future__ import annotations

import onnxruntime
import pytest
import torch

import onnxport

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def small_net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                               torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 6 * 6, 5)).eval()


def run_file(path, *tensors):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), tensors)}
    return [torch.from_numpy(o) for o in session.run(None, feeds)]


def test_optimize_after_export():
    model, x = small_net(), torch.randn(2, 3, 8, 8)
    program = onnxport.export(model, (x,), optimize=False)
    before = [n.op_type for n in program.model.graph]
    program.optimize()
    after = [n.op_type for n in program.model.graph]
    assert "BatchNormalization" in before and "BatchNormalization" not in after  # folded
    torch.testing.assert_close(program(x)[0], model(x), **TOLERANCE)


def test_apply_weights_replaces_by_name_and_warns_on_unknown_names():
    model, other, x = small_net(0), small_net(1), torch.randn(2, 3, 8, 8)
    program = onnxport.export(model, (x,), optimize=False)
    assert program(x)[0].shape == (2, 5)  # a session made before the weights change
    with pytest.warns(UserWarning, match="'no.such.weight' not found"):
        program.apply_weights({**other.state_dict(), "no.such.weight": torch.zeros(1)})
    torch.testing.assert_close(program(x)[0], other(x), **TOLERANCE)


def test_rename_axes_by_name_and_by_dim(tmp_path):
    model, x = small_net(), torch.randn(2, 3, 8, 8)
    program = onnxport.export(model, (x,), dynamic_axes={"input": {0: "batch"}})
    graph = program.model.graph
    program.rename_axes({graph.inputs[0].shape[0]: "N"})
    assert str(graph.inputs[0].shape[0]) == "N" and str(graph.outputs[0].shape[0]) == "N"
    program.rename_axes({"N": "images"})
    assert str(graph.outputs[0].shape[0]) == "images"
    program.save(tmp_path / "renamed.onnx")
    for batch in (1, 3):
        x = torch.randn(batch, 3, 8, 8)
        torch.testing.assert_close(run_file(tmp_path / "renamed.onnx", x)[0], model(x),
                                   **TOLERANCE)


def test_compute_values_of_intermediate_values():
    model, x = small_net(), torch.randn(2, 3, 8, 8)
    program = onnxport.export(model, (x,), optimize=False)
    relu = next(n for n in program.model.graph if n.op_type == "Relu").outputs[0]
    conv = next(n for n in program.model.graph if n.op_type == "Conv").outputs[0]
    relu_value, conv_value = program.compute_values([relu.name, conv.name], (x,))
    torch.testing.assert_close(relu_value, model[:3](x), **TOLERANCE)
    torch.testing.assert_close(conv_value, model[0](x), **TOLERANCE)
    assert len(program.model.graph.outputs) == 1  # the graph is as it was
    torch.testing.assert_close(program(x)[0], model(x), **TOLERANCE)
    with pytest.raises(ValueError, match="not found"):
        program.compute_values(["no_such_value"], (x,))


class GeluNet(torch.nn.Module):
    def forward(self, x, y):
        return torch.nn.functional.gelu(x) + y


def test_custom_translation_table_with_a_g_function():
    def gelu_as_tanh_free(g, x, approximate="none"):  # x * sigmoid(1.702 x): close to gelu
        return g.op("Mul", x, g.op("Sigmoid", g.op("Mul", x, g.const(1.702, x.dtype))))

    def exact_gelu(g, x, approximate="none"):
        half = g.const(0.5, x.dtype)
        erf = g.op("Erf", g.op("Mul", x, g.const(0.5 ** 0.5, x.dtype)))  # no Div, unlike ours
        return g.op("Mul", g.op("Mul", x, half), g.op("Add", erf, g.const(1.0, x.dtype)))

    model, args = GeluNet(), (torch.randn(3, 4), torch.randn(3, 4))
    program = onnxport.export(model, args,
                              custom_translation_table={torch.ops.aten.gelu.default: exact_gelu})
    ops = [n.op_type for n in program.model.graph]
    assert "Erf" in ops and "Div" not in ops, ops
    assert "Div" in [n.op_type for n in onnxport.export(model, args).model.graph]
    torch.testing.assert_close(program(*args)[0], model(*args), **TOLERANCE)
    # a packet covers every overload; a list's first function is used; the table is per export
    program = onnxport.export(model, args, custom_translation_table={
        torch.ops.aten.gelu: [gelu_as_tanh_free]})
    assert "Sigmoid" in [n.op_type for n in program.model.graph]
    assert "Sigmoid" not in [n.op_type for n in onnxport.export(model, args).model.graph]


def test_custom_translation_table_with_an_onnxscript_function():
    onnxscript = pytest.importorskip("onnxscript")
    from onnxscript import opset18 as op

    @onnxscript.script(onnxscript.values.Opset(domain="custom.gelu", version=1))
    def erf_gelu(x):
        return op.Mul(op.Mul(x, op.CastLike(0.5, x)),
                      op.Add(op.Erf(op.Div(x, op.CastLike(1.4142135623730951, x))),
                             op.CastLike(1.0, x)))

    model, args = GeluNet(), (torch.randn(3, 4), torch.randn(3, 4))
    program = onnxport.export(model, args,
                              custom_translation_table={"aten::gelu": erf_gelu})
    assert ("custom.gelu", "erf_gelu") in [(n.domain, n.op_type) for n in program.model.graph]
    torch.testing.assert_close(program(*args)[0], model(*args), **TOLERANCE)


def test_custom_translation_table_refuses_what_is_not_an_op():
    with pytest.raises(onnxport.InvalidExportOptionsError, match="is not a torch op"):
        onnxport.export(GeluNet(), (torch.randn(2), torch.randn(2)),
                        custom_translation_table={"gelu": lambda g, x: x})
