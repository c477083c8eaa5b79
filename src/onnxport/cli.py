"""The ``onnxport`` command: builds a model from a SPEC and hands it to ``onnxport.export``.

It sits on top of the API and only calls it; progress goes to stderr, the summary to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib.util
import os
import sys
import time
import warnings
from typing import Any, Sequence

PROG = "onnxport"
SPEC_HELP = (
    "the model: torchvision:NAME (e.g. torchvision:resnet18), timm:NAME (e.g. "
    "timm:resnet18), or path/to/file.py:factory, where factory() returns (model, args) or "
    "(model, args, kwargs). Weights are random; nothing is downloaded."
)
STAGE_TEXT = {
    "capture": "capturing the model with torch.export",
    "translate": "translating ATen calls to ONNX",
    "optimize": "optimizing the ONNX graph",
    "verify": "comparing ONNX Runtime's outputs with PyTorch's",
    "save": "writing {output}",
}


class UsageError(Exception):
    """Bad command line or SPEC: exit code 2."""


class ModelBuildError(Exception):
    """The model could not be built (the user's code or a model library raised): exit code 1."""


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that reports errors as one line instead of printing usage and exiting."""

    def error(self, message: str):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG, description="Export PyTorch models to ONNX with onnxport.")
    from onnxport._version import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)
    export = commands.add_parser(
        "export", help="export a model to an ONNX file",
        description="Export a model to an ONNX file.")
    export.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    export.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the ONNX file to write (weights too large for one file go to "
                             "FILE.data)")
    export.add_argument("--opset", type=int, metavar="N",
                        help="the ONNX opset to target (default: onnxport's default)")
    export.add_argument("--dynamic-batch", action="store_true",
                        help="make axis 0 of every tensor input dynamic, named 'batch' (the "
                             "example batch stays 1)")
    export.add_argument("--no-fallback", action="store_true",
                        help="fail when torch.export cannot capture the model, instead of "
                             "falling back to tracing it (the TorchScript tracer's semantics)")
    export.add_argument("--verify", action="store_true",
                        help="run the exported model in ONNX Runtime and compare with PyTorch")
    export.add_argument("--no-external-data", action="store_true",
                        help="keep the weights inside FILE (fails over protobuf's 2 GB limit)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from rich.console import Console

    errors = Console(stderr=True, highlight=False)
    parser = build_parser()
    try:
        options = parser.parse_args(argv)
    except UsageError as error:
        return _fail(errors, str(error), code=2)
    except SystemExit as exit_:  # --help and --version
        return exit_.code if isinstance(exit_.code, int) else 0
    if options.command is None:
        return _fail(errors, f"give a command, e.g. '{PROG} export SPEC -o FILE' (see "
                             f"'{PROG} --help')", code=2)
    try:
        return run_export(options, errors)
    except KeyboardInterrupt:
        return _fail(errors, "interrupted", code=130)


def run_export(options: argparse.Namespace, errors) -> int:
    import onnxport
    from onnxport.program import side_files

    start = time.perf_counter()
    output = options.output
    try:
        # Before the model is built: a path nothing can be written to is said at once.
        onnxport._arguments.check_destination(output)
        with errors.status(f"building {options.spec}") as status:
            model, args, kwargs = load_spec(options.spec)
            dynamic_axes = batch_axes(model, args, kwargs) if options.dynamic_batch else None

            def on_stage(name: str) -> None:
                text = STAGE_TEXT.get(name, name).format(output=output)
                status.update(f"[bold]{name}[/bold]: {text}")

            with warnings.catch_warnings(record=True) as caught, _quiet_torch_logs():
                warnings.simplefilter("always")
                program = onnxport.export(
                    model, args, output, kwargs=kwargs, dynamic_axes=dynamic_axes,
                    opset_version=options.opset, verify=options.verify,
                    external_data=False if options.no_external_data else None,
                    fallback=not options.no_fallback, on_stage=on_stage)
    except UsageError as error:
        return _fail(errors, str(error), code=2)
    except onnxport.InvalidExportOptionsError as error:
        return _fail(errors, str(error), code=2)
    except ModelBuildError as error:
        return _fail(errors, str(error), code=1)
    except onnxport.OnnxExporterError as error:
        return _fail(errors, str(error), code=1)
    except Exception as error:  # a bug or an error torch raised outside the stages
        return _fail(errors, f"{type(error).__name__}: {error}", code=1)
    seconds = time.perf_counter() - start
    _print_warnings(errors, caught)
    size = sum(os.path.getsize(path) for path in [output, *side_files(output)])
    print_summary(program, output, size, seconds, verified=options.verify)
    return 0


@contextlib.contextmanager
def _quiet_torch_logs():
    """torch logs each failed capture strategy's graph at WARNING; the summary says what failed."""
    import logging

    # torch sets levels on its modules' own loggers, so the parent's level is not enough.
    names = ["torch", *(name for name in logging.root.manager.loggerDict
                        if name.startswith("torch."))]
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _print_warnings(errors, caught) -> None:
    """The export's own warnings (values fixed by tracing, dims left static): the user acts on
    them. torch's deprecation chatter is left out."""
    from onnxport.capture.torchscript import TracingWarning
    from onnxport.errors import DynamicDimensionFixedWarning

    ours = (DynamicDimensionFixedWarning, TracingWarning)
    for warning in caught:
        if issubclass(warning.category, ours):
            place = f" ({os.path.basename(warning.filename)}:{warning.lineno})"
            place = "" if "(at " in str(warning.message) else place
            errors.print(f"{PROG}: warning: {warning.message}{place}", markup=False,
                         soft_wrap=True)


def _fail(errors, message: str, *, code: int) -> int:
    """The reason on one line; any further lines of the message (a report) after it."""
    message = message.strip() or "failed"
    first, _, rest = message.partition("\n")
    errors.print(f"{PROG}: error: {first}", markup=False, soft_wrap=True)
    if rest.strip():
        errors.print(rest, markup=False, soft_wrap=True)
    return code


# -- SPEC -> (model, args, kwargs) ---------------------------------------------------------
def load_spec(spec: str) -> tuple[Any, tuple, dict]:
    """The model in eval mode with example inputs, for ``torchvision:``, ``timm:`` or a file."""
    batch = 1  # a dim asked to be dynamic stays dynamic from a batch of 1
    source, separator, name = spec.partition(":")
    if separator and source == "torchvision":
        return torchvision_model(name, batch)
    if separator and source == "timm":
        return timm_model(name, batch)
    path, separator, factory = spec.rpartition(":")
    if not separator or not path.endswith(".py"):
        raise UsageError(
            f"cannot read SPEC {spec!r}: expected torchvision:NAME, timm:NAME or "
            "path/to/file.py:factory")
    return factory_model(path, factory)


def torchvision_model(name: str, batch: int):
    import torch

    try:
        import torchvision
    except ImportError:
        raise UsageError("torchvision is not installed; run `pip install torchvision`") from None
    known = torchvision.models.list_models()
    if name not in known:
        raise UsageError(f"unknown torchvision model {name!r}{_did_you_mean(name, known)}")
    options: dict[str, Any] = {"weights": None}
    if name in ("inception_v3", "googlenet"):
        options.update(init_weights=False, aux_logits=False)
    try:
        model = torchvision.models.get_model(name, **options).eval()
    except Exception as error:
        raise ModelBuildError(f"building torchvision model {name!r} failed: "
                              f"{type(error).__name__}: {error}") from error
    size = 299 if name == "inception_v3" else 224
    return model, (torch.randn(batch, 3, size, size),), {}


def timm_model(name: str, batch: int):
    import torch

    try:
        import timm
    except ImportError:
        raise UsageError("timm is not installed; run `pip install timm` to export timm "
                         "models") from None
    if not timm.is_model(name):
        raise UsageError(f"unknown timm model {name!r}{_did_you_mean(name, timm.list_models())}")
    try:
        model = timm.create_model(name, pretrained=False).eval()
    except Exception as error:
        raise ModelBuildError(f"building timm model {name!r} failed: "
                              f"{type(error).__name__}: {error}") from error
    config = getattr(model, "default_cfg", None) or getattr(model, "pretrained_cfg", None) or {}
    input_size = tuple(config.get("input_size") or (3, 224, 224))
    return model, (torch.randn(batch, *input_size),), {}


def factory_model(path: str, factory_name: str):
    import torch

    if not factory_name.isidentifier():
        raise UsageError(f"{factory_name!r} in SPEC is not a function name; write "
                         f"{path}:FACTORY")
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path!r}")
    stem = "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(path))[0])
    module_name = f"_onnxport_factory_{stem}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up here
    with _importable_beside(path):
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop(module_name, None)
            raise ModelBuildError(f"loading {path!r} failed: {type(error).__name__}: "
                                  f"{error}") from error
        factory = getattr(module, factory_name, None)
        if factory is None:
            defined = [n for n, v in vars(module).items()
                       if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module_name]
            raise UsageError(f"{path!r} has no function {factory_name!r}"
                             f"{_did_you_mean(factory_name, defined)}")
        if not callable(factory):
            raise UsageError(f"{path}:{factory_name} is not a function (it is of type "
                             f"{type(factory).__name__})")
        try:
            result = factory()
        except Exception as error:
            raise ModelBuildError(f"{path}:{factory_name}() raised {type(error).__name__}: "
                                  f"{error}") from error
    shape = (f"{path}:{factory_name}() must return (model, args) or (model, args, kwargs) "
             "with args a tuple of inputs and kwargs a dict")
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise UsageError(f"{shape}; it returned {_describe(result)}")
    model, args = result[0], result[1]
    kwargs = result[2] if len(result) == 3 else {}
    if isinstance(args, torch.Tensor):
        args = (args,)
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple) or not isinstance(kwargs, dict):
        raise UsageError(f"{shape}; it returned ({', '.join(_describe(r) for r in result)})")
    if not callable(model):
        raise UsageError(f"{shape}; its model is a {type(model).__name__}")
    if isinstance(model, torch.nn.Module):
        model.eval()
    return model, args, kwargs


@contextlib.contextmanager
def _importable_beside(path: str):
    """Let the factory file import its neighbours, as ``python file.py`` would."""
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def _did_you_mean(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


# -- dynamic batch -------------------------------------------------------------------------
def batch_axes(model: Any, args: tuple, kwargs: dict) -> dict[str, dict[int, str]]:
    """``dynamic_axes`` naming axis 0 of every tensor input "batch"."""
    import torch

    from onnxport.capture import parameter_names

    names = parameter_names(model)
    axes = {}
    for name, value in [*zip(names, args), *kwargs.items()]:
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            axes[name] = {0: "batch"}
    return axes


# -- summary -------------------------------------------------------------------------------
def print_summary(program, output: str, size: int, seconds: float, *, verified: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"exported {output}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("nodes", str(len(program.model.graph)))
    table.add_row("file size", _human_size(size))
    table.add_row("seconds", f"{seconds:.2f}")
    strategy = getattr(program, "capture_strategy", None)
    if strategy:
        table.add_row("captured by", strategy)
    for failed, reason in getattr(program, "capture_attempts", None) or []:
        table.add_row(f"  {failed} failed", reason.splitlines()[0][:120], style="dim")
    for stage, stage_seconds in (getattr(program, "stage_seconds", None) or {}).items():
        table.add_row(f"  {stage}", f"{stage_seconds:.2f}", style="dim")
    if verified:
        results = getattr(program, "verification", None) or []
        worst = max((r.max_abs_diff for r in results), default=0.0)
        passed = all(r.passed for r in results)
        table.add_row("max abs diff", f"{worst:.3g} ({'passed' if passed else 'FAILED'})")
    Console(highlight=False).print(table)


def _human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            return f"{value:.1f} {unit} ({size:,} bytes)"
    raise AssertionError("unreachable")
