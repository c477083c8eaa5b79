"""The ``onnxport export`` command: every export is run in ONNX Runtime and compared with
PyTorch eager; bad input gives a one-line error, a non-zero exit and no file."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import signal
import time
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from onnxport.cli import main
from onnxport.cli.progress import Stages

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

    def deep():
        torch.manual_seed(0)
        return torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(150)]), (torch.randn(2, 8),)

    class Noisy(torch.nn.Module):
        def forward(self, x):
            return x + torch.rand_like(x)

    def noisy():
        return Noisy(), (torch.randn(2, 8),)

    class Eigenvectors(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.eigh(x)[1]  # EIGH LINE

    def eigenvectors():
        return Eigenvectors(), (torch.randn(3, 3),)

    class Offset(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x, offset):
            return self.fc(x) + offset  # OFFSET LINE

    def misfit():  # an offset of batch 3 for an x of batch 2
        return Offset(), (torch.randn(2, 4), torch.randn(3, 2))

    NOT_A_FUNCTION = 3
""")


def line_of(marker: str) -> int:
    """The line of FACTORY (as written to models.py) that ends with the comment ``marker``."""
    return next(number for number, line in enumerate(FACTORY.splitlines(), 1)
                if line.endswith(f"# {marker}"))


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


PROGRESS = re.compile(r"\d\d:\d\d:\d\d onnxport: ")  # a stage's line on a pipe


def messages(err: str) -> list[str]:
    """stderr without the progress lines."""
    return [line for line in err.strip().splitlines() if not PROGRESS.match(line)]


def error_line(capsys) -> str:
    """The whole of stderr but progress, which must be one line starting with the program name."""
    captured = capsys.readouterr()
    lines = messages(captured.err)
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
    lines = messages(capsys.readouterr().err)
    assert lines[0] == "onnxport: error: 1 unsupported op(s) at opset 18:"
    assert any("aten::geqrf" in line for line in lines[1:])
    assert not output.exists()


def test_a_refused_op_names_the_line_that_uses_it(factory, tmp_path, capsys):
    output = tmp_path / "eigh.onnx"
    assert main(["export", f"{factory}:eigenvectors", "-o", str(output)]) == 1
    line = error_line(capsys)
    assert "eigen vectors are unique only up to sign" in line
    assert f"(used at models.py:{line_of('EIGH LINE')} in forward)" in line
    assert not output.exists()


@pytest.mark.parametrize("path", [[], ["--no-fallback"]])
def test_inputs_that_do_not_fit_the_model_are_said_so(factory, tmp_path, capsys, path):
    output = tmp_path / "misfit.onnx"
    assert main(["export", f"{factory}:misfit", "-o", str(output), *path]) == 1
    line = messages(capsys.readouterr().err)[0]  # each capture strategy's reason follows
    assert line.startswith("onnxport: error: the example inputs do not fit the model")
    assert "size of tensor a (2) must match the size of tensor b (3)" in line
    assert f"models.py:{line_of('OFFSET LINE')} in forward" in line
    assert "fallback=True" in line and "would not help" in line
    assert not output.exists()


def test_a_dynamic_axis_naming_nothing_lists_inputs_and_outputs(factory, tmp_path, capsys):
    output = tmp_path / "mlp.onnx"
    code = main(["export", f"{factory}:with_kwargs", "-o", str(output), "--dynamic", "inp:0=b"])
    assert code == 2
    line = error_line(capsys)
    assert "--dynamic names 'inp', which is neither an input nor an output" in line
    assert "Its inputs are x, scale" in line and "named by --input-names" in line
    assert not output.exists()


@pytest.mark.parametrize("options, expected", [
    (["--atol", "1e-3"], "--atol and --rtol are --verify's tolerances; add --verify"),
    (["--verify", "--atol", "-1"], "'-1' is not a tolerance"),
    (["--batch-size", "4"], "--batch-size is for transformers:ID_OR_FOLDER models"),
    (["--sequence_length", "4"], "--sequence-length is for transformers:ID_OR_FOLDER models"),
    (["--trust-remote-code"], "--trust-remote-code is for transformers:ID_OR_FOLDER models"),
    (["--batch-size", "0"], "'0' is not a positive whole number"),
])
def test_optimum_style_options_are_checked(factory, tmp_path, capsys, options, expected):
    assert main(["export", f"{factory}:mlp", "-o", str(tmp_path / "m.onnx"), *options]) == 2
    assert expected in error_line(capsys)


def test_verify_at_the_given_tolerance(factory, tmp_path, capsys):
    output = tmp_path / "noisy.onnx"
    # rand_like differs between the two runs by less than 1: loose enough, it passes
    code = main(["export", f"{factory}:noisy", "-o", str(output), "--verify", "--atol", "1",
                 "--rtol", "0", "--json"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert summary["verification"]["passed"] and 0 < summary["verification"]["max_abs_diff"] < 1
    assert "verify" in summary["stages"] and "save" in summary["stages"]
    assert output.exists()
    output.unlink()
    assert main(["export", f"{factory}:noisy", "-o", str(output), "--verify",
                 "--atol", "1e-6"]) == 1
    lines = messages(capsys.readouterr().err)
    assert lines[0].startswith(f"onnxport: error: --verify failed, so {output} was not written")
    assert "atol 1e-06" in lines[0]
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


@pytest.mark.parametrize("where, expected", [
    ("{dir}/missing/r.onnx", "missing' does not exist"),
    ("{dir}", "is a folder"),
])
def test_output_folder_problems_are_said_first(factory, tmp_path, capsys, where, expected):
    assert main(["export", f"{factory}:broken", "-o", where.format(dir=tmp_path)]) == 2
    assert expected in error_line(capsys)


# -- answering at once -----------------------------------------------------------------------
NO_TORCH = textwrap.dedent("""
    import sys
    from onnxport.cli import main
    for argv in (["--help"], ["--version"], ["export", "--help"],
                 ["export", "m.py:f", "-o", "/proc/r.onnx"],
                 ["export", "m.py:f", "-o", "m.onnx", "--dynamic-axes", "{}"],
                 ["export", "resnet18", "-o", "m.onnx"], ["export", "m.py:f", "-o", "m.onnx",
                 "--task", "text-generaton"]):
        print("EXIT", main(argv), flush=True)
    print("TORCH", "torch" in sys.modules)
""")


def test_help_version_and_usage_errors_do_not_import_torch(tmp_path):
    result = subprocess.run([sys.executable, "-c", NO_TORCH], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert re.findall(r"EXIT (\d+)", result.stdout) == ["0", "0", "0", "2", "2", "2", "2"]
    assert "TORCH False" in result.stdout, result.stdout
    assert "examples:" in result.stdout and "onnxport export transformers:" in result.stdout
    assert "FILE.<hash>.data" in result.stdout
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 4 and all(e.startswith("onnxport: error: ") for e in errors)
    assert "no file can be created in folder '/proc'" in errors[0]
    assert "did you mean --dynamic-batch" in errors[1]
    assert "did you mean text-generation" in errors[3]
    assert not os.listdir(tmp_path)


def test_help_states_the_api_defaults():
    from onnxport import _arguments
    from onnxport.cli import command

    assert (command.DEFAULT_OPSET, command.MIN_OPSET, command.MAX_OPSET) == \
        (_arguments.DEFAULT_OPSET, _arguments.MIN_OPSET, _arguments.MAX_OPSET)
    text = command.build_parser()._subparsers._group_actions[0].choices["export"].format_help()
    assert f"(default: {_arguments.DEFAULT_OPSET})" in text


@pytest.mark.parametrize("option, expected", [
    (["--dynamic-axes", "{}"], "unknown option --dynamic-axes; did you mean --dynamic-batch"),
    (["--verfy"], "unknown option --verfy; did you mean --verify?"),
    (["--no-optimise"], "did you mean --no-optimize?"),
    (["--fp16"], "unknown option --fp16; did you mean --dtype fp16?"),
    (["--library-name", "timm"], "did you mean the SPEC's prefix (transformers:ID, timm:NAME"),
])
def test_an_unknown_option_names_the_closest(factory, tmp_path, capsys, option, expected):
    assert main(["export", f"{factory}:mlp", "-o", str(tmp_path / "m.onnx"), *option]) == 2
    assert expected in error_line(capsys)


# -- Ctrl-C ----------------------------------------------------------------------------------
@pytest.mark.parametrize("when", ["at once", "after the model is built"])
def test_ctrl_c_exits_130_with_one_line_and_no_file(factory, tmp_path, when):
    output = tmp_path / "deep.onnx"
    # -X importtime says when a module is imported: the command is then loading (before
    # Python itself has started, a Ctrl-C is Python's to handle, not ours).
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "onnxport", "export", f"{factory}:deep", "-o",
         str(output)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stderr:  # plain progress lines: a pipe
        lines.append(line)
        if (" onnxport.cli.errors" if when == "at once" else " build ") in line:
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    lines += err.splitlines(keepends=True)
    lines = [line for line in lines if not line.startswith("import time:")]
    assert process.returncode == 130, "".join(lines)
    assert lines[-1].startswith("onnxport: interrupted"), "".join(lines)
    assert "Traceback" not in "".join(lines)
    assert messages("".join(lines)) == [lines[-1].strip()]
    assert sorted(set(os.listdir(tmp_path)) - {"__pycache__"}) == ["models.py"]


def test_ctrl_c_as_main_takes_over_the_handler_is_handled(tmp_path, capsys, monkeypatch):
    """A Ctrl-C that arrives just as main() installs Python's handler (it is raised on the way
    out of signal.signal) still gives one line and 130, not a traceback."""
    from onnxport.__main__ import _interrupted_early

    real, raised = signal.signal, []

    def racing(signum, handler):
        previous = real(signum, handler)
        if handler is signal.default_int_handler and not raised:
            raised.append(True)
            raise KeyboardInterrupt
        return previous

    monkeypatch.setattr(signal, "getsignal", lambda signum: _interrupted_early)
    monkeypatch.setattr(signal, "signal", racing)
    try:
        code = main(["export", "torchvision:resnet18", "-o", str(tmp_path / "r.onnx")])
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt escaped main(): a traceback for the user")
    assert code == 130 and raised
    assert capsys.readouterr().err == "onnxport: interrupted (nothing was written)\n"
    assert not os.listdir(tmp_path)


# -- --verify, --weights, inputs and outputs -------------------------------------------------
def test_a_failed_verify_writes_no_file_and_says_so(factory, tmp_path, capsys):
    output = tmp_path / "noisy.onnx"
    assert main(["export", f"{factory}:noisy", "-o", str(output), "--verify"]) == 1
    lines = messages(capsys.readouterr().err)
    assert lines[0].startswith(f"onnxport: error: --verify failed, so {output} was not written")
    assert not output.exists()


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_weights_names_shapes_and_dynamic_axes(factory, tmp_path, capsys, suffix):
    model, _, _ = load_factory(factory, "mlp")
    torch.manual_seed(1)
    trained = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
    weights = tmp_path / f"trained{suffix}"
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(trained, str(weights))
    else:
        torch.save(trained, weights)
    output = tmp_path / "trained.onnx"
    code = main(["export", f"{factory}:mlp", "-o", str(output), "--weights", str(weights),
                 "--shape", "input=3x8", "--input-names", "features", "--output-names", "scores",
                 "--dynamic", "features:0=rows", "--no-optimize"])
    assert code == 0, capsys.readouterr().err
    proto = onnx.load(str(output))
    assert [i.name for i in proto.graph.input] == ["features"]
    assert [o.name for o in proto.graph.output] == ["scores"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "rows"
    model.load_state_dict(trained)
    for rows in (3, 5):
        assert_matches_eager(output, model, (torch.randn(rows, 8),))


def test_weights_that_do_not_fit_are_refused(factory, tmp_path, capsys):
    weights = tmp_path / "other.pt"
    torch.save({"0.weight": torch.zeros(3, 3), "head.bias": torch.zeros(2)}, weights)
    output = tmp_path / "m.onnx"
    assert main(["export", f"{factory}:mlp", "-o", str(output), "--weights", str(weights)]) == 2
    line = error_line(capsys)
    assert "1 name(s) the model does not have: head.bias" in line
    assert "0.weight [3, 3] (the model's is [16, 8])" in line
    assert not output.exists()


# -- what the command shows ------------------------------------------------------------------
def test_a_pipe_gets_timestamped_stage_lines_and_json_one_object(factory, tmp_path):
    output = tmp_path / "mlp.onnx"
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "onnxport", "export", f"{factory}:mlp", "-o", str(output),
         "--json", "--verify"], capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # the whole of stdout is one object
    assert summary["ok"] and summary["verification"]["passed"]
    assert summary["files"] == [str(output)] and summary["bytes"] == os.path.getsize(output)
    assert [i["name"] for i in summary["inputs"]] == ["input"]
    stages = summary["stages"]
    assert list(stages)[:4] == ["import", "build", "arguments", "capture"]
    assert {"translate", "verify", "save"} <= set(stages)
    assert abs(sum(stages.values()) - summary["seconds"]) < 0.01
    assert summary["seconds"] <= wall
    lines = result.stderr.strip().splitlines()
    shown = [re.fullmatch(r"\d\d:\d\d:\d\d onnxport: (\w+) +[\d.]+ s  \(total [\d.]+ s\)", line)
             for line in lines]
    assert all(shown), lines
    assert [m.group(1) for m in shown] == list(stages)
    model, args, kwargs = load_factory(factory, "mlp")
    assert_matches_eager(output, model, args, kwargs)


def test_quiet_prints_nothing(factory, tmp_path, capsys):
    output = tmp_path / "mlp.onnx"
    assert main(["export", f"{factory}:mlp", "-o", str(output), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    model, args, kwargs = load_factory(factory, "mlp")
    assert_matches_eager(output, model, args, kwargs)


def test_a_terminal_gets_a_live_display():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    stages = Stages(time.perf_counter(), output="m.onnx", quiet=False, stream=screen)
    for name in ("import", "build", "capture"):
        stages.begin(name)
    stages.end()
    stages.stop()
    stages.stop()  # after a failure the command and its Ctrl-C handling both stop it
    assert list(stages.seconds) == ["import", "build", "capture"]
    for text in ("import", "building the model", "capturing the model", "0:00:00"):
        assert text in screen.getvalue()


def test_json_reports_a_failure_as_one_object_too(factory, tmp_path, capsys):
    assert main(["export", f"{factory}:broken", "-o", str(tmp_path / "m.onnx"), "--json"]) == 1
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["ok"] is False and result["exit_code"] == 1
    assert "ValueError: no model today" in result["error"]
    assert messages(captured.err) == [f"onnxport: error: {result['error']}"]
