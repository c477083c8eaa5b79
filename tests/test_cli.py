"""The ``onnxport export`` command: every export is run in ONNX Runtime and compared with
PyTorch eager; bad input gives a one-line error, a non-zero exit and no file."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from onnxport.cli import main

FACTORY = textwrap.dedent("""
    import torch

    class WithScale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

        def forward(self, x, scale):
            return self.body(x) * scale

    def mlp():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        return model, (torch.randn(1, 8),)

    def with_kwargs():
        torch.manual_seed(0)
        return WithScale(), (torch.randn(1, 8),), {"scale": torch.rand(1, 4)}

    class RunningMax(torch.nn.Module):
        def forward(self, x):
            return torch.geqrf(x)[0]

    def unsupported():
        return RunningMax(), (torch.randn(2, 5),)

    def broken():
        raise ValueError("no model today")

    NOT_A_FUNCTION = 3
""")


@pytest.fixture
def factory(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(FACTORY)
    return path


def load_factory(path, name):
    spec = importlib.util.spec_from_file_location("_test_cli_factory", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = getattr(module, name)()
    return result[0].eval(), tuple(result[1]), (result[2] if len(result) == 3 else {})


def run_onnx(path, args, kwargs):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    tensors = [*args, *kwargs.values()]
    feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), tensors)}
    assert len(feeds) == len(session.get_inputs())
    return session.run(None, feeds)


def assert_matches_eager(path, model, args, kwargs=None):
    kwargs = kwargs or {}
    with torch.no_grad():
        expected = model(*args, **kwargs)
    actual = run_onnx(path, args, kwargs)
    assert len(actual) == 1
    np.testing.assert_allclose(actual[0], expected.numpy(), rtol=1e-3, atol=1e-4)


def error_line(capsys) -> str:
    """The whole of stderr, which must be one line starting with the program name."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("onnxport: error: "), captured.err
    return lines[0]


def test_factory_export_matches_eager(factory, tmp_path, capsys):
    output = tmp_path / "mlp.onnx"
    assert main(["export", f"{factory}:mlp", "-o", str(output)]) == 0
    captured = capsys.readouterr()
    assert "error" not in captured.err
    for word in ("nodes", "file size", "seconds"):
        assert word in captured.out
    size = os.path.getsize(output)
    assert f"{size} B" in captured.out or f"{size:,} bytes" in captured.out
    assert not os.path.exists(f"{output}.data")
    model, args, kwargs = load_factory(factory, "mlp")
    assert_matches_eager(output, model, args, kwargs)
    batch = onnx.load(str(output)).graph.input[0].type.tensor_type.shape.dim[0]
    assert batch.dim_value == 1  # static unless --dynamic-batch


def test_opset_and_no_external_data(factory, tmp_path, capsys):
    output = tmp_path / "mlp17.onnx"
    code = main(["export", f"{factory}:mlp", "-o", str(output), "--opset", "17",
                 "--no-external-data"])
    assert code == 0, capsys.readouterr().err
    proto = onnx.load(str(output), load_external_data=False)
    assert {o.domain: o.version for o in proto.opset_import}[""] == 17
    assert not os.path.exists(f"{output}.data")
    model, args, kwargs = load_factory(factory, "mlp")
    assert_matches_eager(output, model, args, kwargs)


def test_factory_kwargs_dynamic_batch(factory, tmp_path, capsys):
    output = tmp_path / "scaled.onnx"
    assert main(["export", f"{factory}:with_kwargs", "-o", str(output), "--dynamic-batch"]) == 0
    capsys.readouterr()
    proto = onnx.load(str(output))
    assert [i.name for i in proto.graph.input] == ["x", "scale"]
    for value in proto.graph.input:
        assert value.type.tensor_type.shape.dim[0].dim_param == "batch"
    model, _, _ = load_factory(factory, "with_kwargs")
    for batch in (1, 3, 5):
        args, kwargs = (torch.randn(batch, 8),), {"scale": torch.rand(batch, 4)}
        assert_matches_eager(output, model, args, kwargs)


def test_torchvision_verify_dynamic_batch(tmp_path, capsys):
    import torchvision

    output = tmp_path / "squeezenet.onnx"
    torch.manual_seed(0)  # the command builds its model from the global generator
    code = main(["export", "torchvision:squeezenet1_0", "-o", str(output), "--verify",
                 "--dynamic-batch"])
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "max abs diff" in out and "passed" in out
    torch.manual_seed(0)
    model = torchvision.models.get_model("squeezenet1_0", weights=None).eval()
    for batch in (2, 3):
        assert_matches_eager(output, model, (torch.randn(batch, 3, 224, 224),))


def test_export_failure_is_exit_1_with_reason_first(factory, tmp_path, capsys, untranslated):
    output = tmp_path / "running_max.onnx"
    assert main(["export", f"{factory}:unsupported", "-o", str(output)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "onnxport: error: 1 unsupported op(s) at opset 18:"
    assert any("aten::geqrf" in line for line in lines[1:])
    assert not output.exists()


@pytest.mark.parametrize("spec, options, expected", [
    ("torchvision:no_such_net", [], "unknown torchvision model 'no_such_net'"),
    ("{dir}/missing.py:mlp", [], "no such file"),
    ("{factory}:no_such_factory", [], "has no function 'no_such_factory'"),
    ("{factory}:NOT_A_FUNCTION", [], "is not a function (it is of type int)"),
    ("{factory}:mlp", ["--opset", "99"], "opset_version=99 is not supported"),
    ("resnet18", [], "cannot read SPEC 'resnet18'"),
    ("{factory}:mlp", ["--opset", "x"], "invalid int value: 'x'"),
])
def test_bad_usage_is_exit_2_with_one_line(factory, tmp_path, capsys, spec, options, expected):
    output = tmp_path / "out.onnx"
    spec = spec.format(dir=tmp_path, factory=factory)
    assert main(["export", spec, "-o", str(output), *options]) == 2
    assert expected in error_line(capsys)
    assert sorted(os.listdir(tmp_path)) == ["models.py"]  # no output, no leftovers


def test_factory_that_raises_is_exit_1(factory, tmp_path, capsys):
    output = tmp_path / "out.onnx"
    assert main(["export", f"{factory}:broken", "-o", str(output)]) == 1
    assert "ValueError: no model today" in error_line(capsys)
    assert not output.exists()


def test_missing_timm_says_how_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm now raises ImportError
    assert main(["export", "timm:resnet18", "-o", str(tmp_path / "t.onnx")]) == 2
    assert "pip install timm" in error_line(capsys)
    assert not os.listdir(tmp_path)


def test_no_command_and_missing_output(capsys):
    assert main([]) == 2
    error_line(capsys)
    assert main(["export", "torchvision:resnet18"]) == 2
    assert "-o/--output" in error_line(capsys)


def test_python_dash_m(factory, tmp_path):
    output = tmp_path / "sub.onnx"
    result = subprocess.run(
        [sys.executable, "-m", "onnxport", "export", f"{factory}:mlp", "-o", str(output)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "nodes" in result.stdout and "error" not in result.stderr
    model, args, kwargs = load_factory(factory, "mlp")
    assert_matches_eager(output, model, args, kwargs)


@pytest.mark.parametrize("where, expected", [
    ("/proc/r.onnx", "no file can be created in folder '/proc'"),
    ("{dir}/afile/r.onnx", "afile' is a file, not a folder"),
])
def test_an_unwritable_output_is_said_before_the_model_is_built(factory, tmp_path, capsys,
                                                                 where, expected):
    (tmp_path / "afile").write_text("")
    # "broken" raises when built: the output path must be refused first.
    assert main(["export", f"{factory}:broken", "-o", where.format(dir=tmp_path)]) == 2
    line = error_line(capsys)
    assert expected in line and ".tmp" not in line
