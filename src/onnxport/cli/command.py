"""The command line: parsing and its usage errors (no torch, no rich), the checks that need no
model (the output path above all), then the export, its progress and its summary.

Exit codes: 0 success, 1 the export (or the model's own code) failed, 2 a usage error, 130
interrupted (Ctrl-C). Every failure is one line on stderr, followed by a report when there is
one; a failed or interrupted command leaves no file."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
import signal
import sys
import tempfile
import time
import warnings
from typing import Sequence

from onnxport._version import __version__
from onnxport.cli.errors import ModelBuildError, UsageError

PROG = "onnxport"
# onnxport._arguments's, written out so that --help does not import torch (a test compares)
DEFAULT_OPSET, MIN_OPSET, MAX_OPSET = 18, 13, 23

SPEC_HELP = (
    "the model: torchvision:NAME (e.g. torchvision:resnet18), timm:NAME, "
    "transformers:ID_OR_FOLDER (from_pretrained of a local folder, or a hub id through your "
    "Hugging Face cache), or path/to/file.py:factory, where factory() returns (model, args) or "
    "(model, args, kwargs). torchvision and timm weights are random; nothing is downloaded.")
EXAMPLES = """\
examples:
  onnxport export torchvision:resnet18 -o resnet18.onnx --verify
  onnxport export torchvision:mobilenet_v3_small -o m.onnx --dynamic-batch --opset 17
  onnxport export transformers:path/to/bert -o bert.onnx --verify
  onnxport export transformers:path/to/gpt2 --task text-generation-with-past -o gpt2.onnx
  onnxport export transformers:path/to/vit --shape pixel_values=1x3x224x224 --static -o vit.onnx
  onnxport export models.py:make_model -o model.onnx --dynamic x:0=batch --weights w.safetensors
  onnxport export torchvision:alexnet -o alexnet.onnx --json > summary.json
"""
TASKS_HELP = ("feature-extraction, text-classification, text-generation, "
              "text-generation-with-past, text2text-generation (or seq2seq), image-classification, "
              "object-detection, automatic-speech-recognition, zero-shot-image-classification")
# Options of other exporters (torch.onnx, optimum-cli) that users type, and ours for them.
HINTS = {
    "--dynamic-axes": "--dynamic-batch (axis 0 of every input) or --dynamic NAME:AXIS=LABEL",
    "--dynamic-shapes": "--dynamic-batch (axis 0 of every input) or --dynamic NAME:AXIS=LABEL",
    "--model": "SPEC, the first argument (e.g. onnxport export transformers:ID -o FILE)",
    "--fp16": "--dtype fp16",
    "--library-name": "the SPEC's prefix (transformers:ID, timm:NAME, torchvision:NAME)",
}


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises one-line errors (instead of printing usage and exiting) and, for an
    unknown option, names the closest known one."""

    known_options: list[str] = []

    def error(self, message: str):
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if unknown:
            for token in unknown.group(1).split():
                if token.startswith("-"):
                    raise UsageError(f"unknown option {token}{self._suggestion(token)} "
                                     f"(see '{PROG} export --help')")
            raise UsageError(f"unexpected argument(s): {unknown.group(1)} (see '{PROG} --help')")
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def _suggestion(self, token: str) -> str:
        option = token.split("=", 1)[0].replace("_", "-")
        if option in HINTS:
            return f"; did you mean {HINTS[option]}?"
        close = difflib.get_close_matches(option, self.known_options, n=1, cutoff=0.5)
        return f"; did you mean {close[0]}?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG, description="Export PyTorch models to ONNX with onnxport.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     parser_class=_ArgumentParser)
    export = commands.add_parser(
        "export", help="export a model to an ONNX file",
        description="Export a model to an ONNX file.", epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    export.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    export.add_argument(
        "-o", "--output", required=True, metavar="FILE",
        help="the ONNX file to write; weights over protobuf's 2 GB limit go beside it to "
             "FILE.<hash>.data (<hash> from their content). Checked for writability first.")
    export.add_argument(
        "--opset", type=int, metavar="N",
        help=f"the ONNX opset to target, {MIN_OPSET} to {MAX_OPSET} (default: {DEFAULT_OPSET})")
    _add_model_options(export)
    _add_input_options(export)
    _add_export_options(export)
    shown = export.add_argument_group("output of the command")
    shown.add_argument("-q", "--quiet", action="store_true",
                       help="print nothing but errors")
    shown.add_argument("--json", action="store_true",
                       help="print one JSON object on stdout: files, sizes, inputs, outputs, "
                            "stage times, verification (errors too, as {\"error\": ...})")
    _ArgumentParser.known_options = sorted(
        {o for p in (parser, export) for a in p._actions for o in a.option_strings})
    return parser


def _add_model_options(export: argparse.ArgumentParser) -> None:
    model = export.add_argument_group("model (transformers:, and --weights/--dtype/--device for any)")
    model.add_argument("--task", metavar="TASK",
                       help=f"what the transformers model is loaded for: {TASKS_HELP}; "
                            "inferred from the config's architectures when left out")
    model.add_argument("--weights", metavar="CHECKPOINT",
                       help="load a state dict into the model first: .safetensors, or a "
                            "torch.save file (read with weights_only=True)")
    model.add_argument("--dtype", choices=["fp32", "fp16", "bf16"],
                       help="the model's floating-point dtype (default: as built, fp32)")
    model.add_argument("--device", metavar="cpu|cuda[:N]",
                       help="where the model runs while it is captured (default: cpu)")
    model.add_argument("--trust-remote-code", action="store_true",
                       help="let from_pretrained run the model's own code from its folder or "
                            "the hub (only for a source you trust)")
    model.add_argument("--cache-dir", "--cache_dir", metavar="FOLDER",
                       help="from_pretrained's cache folder for hub ids (default: Hugging "
                            "Face's)")
    model.add_argument("--revision", metavar="REV",
                       help="the hub revision to load: a branch, tag or commit (default: main)")
    model.add_argument("--subfolder", metavar="PATH",
                       help="the model's folder inside the hub repository or local folder")


def _add_input_options(export: argparse.ArgumentParser) -> None:
    from onnxport.cli.transformers_source import SIZE_OPTIONS

    inputs = export.add_argument_group("inputs and outputs")
    inputs.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS",
                        type=_parse_shape,
                        help="the example shape of an input, e.g. pixel_values=1x3x224x224 "
                             "(repeatable)")
    for option, label in SIZE_OPTIONS.items():  # optimum-cli's spelling is taken too
        spellings = dict.fromkeys([f"--{option.replace('_', '-')}", f"--{option}"])
        inputs.add_argument(*spellings, type=_positive, metavar="N", dest=option,
                            help=f"the example size of every input's {label} dim "
                                 "(transformers models)")
    inputs.add_argument("--dynamic", action="append", default=[], metavar="NAME:AXIS=LABEL",
                        type=_parse_dynamic,
                        help="make an axis of an input (or output) dynamic, named LABEL, e.g. "
                             "input_ids:1=sequence (repeatable)")
    inputs.add_argument("--dynamic-batch", action="store_true",
                        help="make axis 0 of every tensor input dynamic, named 'batch' (the "
                             "example batch stays 1)")
    inputs.add_argument("--static", "--no-dynamic-axes", action="store_true",
                        help="no dynamic axes: transformers models get dynamic batch and "
                             "sequence (or image size) by default")
    inputs.add_argument("--input-names", type=_parse_names, metavar="A,B,..",
                        help="the ONNX names of the inputs, in order")
    inputs.add_argument("--output-names", type=_parse_names, metavar="A,B,..",
                        help="the ONNX names of the outputs, in order")


def _add_export_options(export: argparse.ArgumentParser) -> None:
    exporting = export.add_argument_group("export")
    exporting.add_argument("--optimize", action=argparse.BooleanOptionalAction, default=True,
                           help="run onnxport's graph optimizations (default: on)")
    exporting.add_argument("--verify", action="store_true",
                           help="run the model in ONNX Runtime and compare with PyTorch (rtol "
                                "1e-3, atol 1e-4); on a mismatch FILE is not written")
    exporting.add_argument("--atol", type=_tolerance, metavar="X",
                           help="--verify's absolute tolerance (default: 1e-4 on the CPU, "
                                "1e-3 on an accelerator)")
    exporting.add_argument("--rtol", type=_tolerance, metavar="X",
                           help="--verify's relative tolerance (default: 1e-3 on the CPU, "
                                "1e-2 on an accelerator)")
    exporting.add_argument("--no-fallback", action="store_true",
                           help="fail when torch.export cannot capture the model, instead of "
                                "falling back to tracing it (the TorchScript tracer's semantics)")
    exporting.add_argument("--no-external-data", action="store_true",
                           help="keep the weights inside FILE (fails over protobuf's 2 GB limit)")


def _parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, separator, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        shape = ()
    if not separator or not name or not shape or min(shape) < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=DIMS, e.g. pixel_values=1x3x224x224")
    return name, shape


def _parse_dynamic(text: str) -> tuple[str, int, str]:
    match = re.fullmatch(r"([^:=]+):(-?\d+)(?:=(.+))?", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME:AXIS=LABEL, e.g. input_ids:1=sequence")
    name, axis, label = match.group(1), int(match.group(2)), match.group(3)
    return name, axis, label or f"{name}_dim{axis}"


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a tolerance (a number >= 0, e.g. 1e-4)")
    return value


def _parse_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of names")
    return names


# -- running -------------------------------------------------------------------------------
class _Run:
    """What a run has started and must undo when it is interrupted."""

    def __init__(self):
        self.stages = None
        self.written: list[str] = []

    def stop_display(self) -> None:
        if self.stages is not None:
            self.stages.stop()

    def remove_written(self) -> list[str]:
        removed = []
        for path in self.written:
            with contextlib.suppress(OSError):
                os.remove(path)
                removed.append(path)
        return removed


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    run = _Run()
    json_output = False
    try:
        # Inside the try: a Ctrl-C that arrives as the handler changes is handled below too.
        if getattr(signal.getsignal(signal.SIGINT), "__name__", "") == "_interrupted_early":
            signal.signal(signal.SIGINT, signal.default_int_handler)  # from here: KeyboardInterrupt
        parser = build_parser()
        try:
            options = parser.parse_args(argv)
        except SystemExit as exit_:  # --help and --version
            return exit_.code if isinstance(exit_.code, int) else 0
        json_output = options.command is not None and options.json
        if options.command is None:
            raise UsageError(f"give a command, e.g. '{PROG} export SPEC -o FILE' (see "
                             f"'{PROG} --help')")
        check_options(options)
        return run_export(options, started, run)
    except UsageError as error:
        return _fail(str(error), code=2, json_output=json_output)
    except KeyboardInterrupt:
        # A second Ctrl-C must not interrupt the clean-up with a traceback.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            run.stop_display()
            removed = run.remove_written()
            note = f" (removed {', '.join(removed)}, written just before)" if removed else \
                " (nothing was written)"
            return _fail(f"interrupted{note}", code=130, json_output=json_output)
        finally:
            signal.signal(signal.SIGINT, previous)


def check_options(options: argparse.Namespace) -> None:
    """What can be refused before importing torch."""
    from onnxport.cli.transformers_source import check_task

    options.task = check_task(options.task)
    if options.static and (options.dynamic or options.dynamic_batch):
        raise UsageError("--static contradicts --dynamic and --dynamic-batch; give one of them")
    if options.device is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", options.device):
        raise UsageError(f"--device {options.device}: expected cpu, cuda or cuda:N")
    if options.weights is not None and not os.path.isfile(options.weights):
        raise UsageError(f"--weights {options.weights}: no such file")
    if options.opset is not None and not MIN_OPSET <= options.opset <= MAX_OPSET:
        raise UsageError(f"--opset {options.opset}: opset_version={options.opset} is not "
                         f"supported; onnxport exports opsets {MIN_OPSET} to {MAX_OPSET}")
    options.shape = dict(options.shape)
    if (options.atol is not None or options.rtol is not None) and not options.verify:
        raise UsageError("--atol and --rtol are --verify's tolerances; add --verify")
    if not options.spec.startswith("transformers:"):
        from onnxport.cli.transformers_source import SIZE_OPTIONS

        for option in [*SIZE_OPTIONS, "trust_remote_code", "cache_dir", "revision",
                       "subfolder"]:
            if getattr(options, option) not in (None, False):
                hint = "; give the example shape with --shape NAME=DIMS" \
                    if option in SIZE_OPTIONS else ""
                raise UsageError(f"--{option.replace('_', '-')} is for transformers:ID_OR_FOLDER "
                                 f"models{hint}")
    check_spec(options.spec)
    check_output(options.output)


def check_spec(spec: str) -> None:
    from onnxport.cli.sources import SPEC_FORMS

    source, separator, _ = spec.partition(":")
    if separator and source in ("torchvision", "timm", "transformers"):
        return
    path, separator, _ = spec.rpartition(":")
    if not separator or not path.endswith(".py"):
        raise UsageError(f"cannot read SPEC {spec!r}: expected {SPEC_FORMS}")


def check_output(path: str) -> None:
    """Refuse an output path that cannot be written, naming the user's path (never the
    temporary file the probe makes, which is removed at once)."""
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        raise UsageError(f"-o {path}: is a folder; give a file name, e.g. "
                         f"{os.path.join(path, 'model.onnx')}")
    folder = os.path.dirname(path) or "."
    parent = folder
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent) or "."
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {path}: {parent!r} is a file, not a folder")
    if parent != folder:
        raise UsageError(f"cannot write {path}: folder {folder!r} does not exist; create it first")
    try:
        handle, probe = tempfile.mkstemp(prefix=".onnxport-probe-", dir=folder)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise UsageError(f"cannot write {path}: no file can be created in folder {folder!r} "
                         f"({reason})") from None
    os.close(handle)
    os.remove(probe)


def run_export(options: argparse.Namespace, started: float, run: _Run) -> int:
    from onnxport.cli.progress import Stages

    stages = run.stages = Stages(started, output=options.output,
                                 quiet=options.quiet or False)
    output = options.output
    try:
        stages.begin("import")
        import onnxport  # noqa: F401
        import onnxport.api
        from onnxport.cli import sources

        if options.spec.startswith("transformers:"):
            import transformers  # noqa: F401 (its import is most of a small model's time)
        stages.begin("build")
        built = sources.load_spec(options.spec, options)
        if options.weights:
            sources.load_weights(built.model, options.weights)
        if built.task is None:  # transformers' models are loaded in their dtype, on their device
            sources.place(built, options.dtype, options.device)
        names = sources.tensor_input_names(built)
        if options.shape and built.task is None:
            sources.reshape_inputs(built, options.shape)
        dynamic_axes = dynamic_axes_of(built, options, names)
        stages.begin("arguments")
        # With tolerances of its own, --verify is the command's: export, compare, then save.
        own_tolerance = options.verify and (options.atol is not None or options.rtol is not None)
        with warnings.catch_warnings(record=True) as caught, _quiet_torch_logs():
            warnings.simplefilter("always")
            # The API warns (one dynamic_axes dict may serve several calls); a command's
            # --dynamic that names nothing is a mistake.
            warnings.filterwarnings("error", message="dynamic_axes names ", category=UserWarning)
            program = onnxport.api.export(
                built.model, built.args, None if own_tolerance else output, kwargs=built.kwargs,
                dynamic_axes=dynamic_axes or None, input_names=options.input_names,
                output_names=options.output_names, opset_version=options.opset,
                verify=options.verify and not own_tolerance, optimize=options.optimize,
                external_data=False if options.no_external_data else None,
                fallback=not options.no_fallback, on_stage=stages.begin)
            if own_tolerance:
                _verify_and_save(program, built, options, stages.begin)
        from onnxport.program import side_files

        files = [output, *side_files(output)]
        run.written = files
        stages.end()
    except BaseException as error:
        stages.stop()
        if isinstance(error, KeyboardInterrupt):
            raise
        return _export_failed(error, options)
    stages.stop()
    if not options.quiet:
        _print_warnings(caught)
    from onnxport.cli.progress import print_json, print_table, summary

    size = sum(os.path.getsize(path) for path in files)
    result = summary(program, output, files, size, stages, verified=options.verify,
                     extra={"task": built.task} if built.task else {})
    if options.json:
        print_json({"ok": True, **result})
    elif not options.quiet:
        print_table(result)
    run.written = []  # done: an interrupt from here on leaves the files
    return 0


def _verify_and_save(program, built, options, begin) -> None:
    """--verify at --atol/--rtol (each left out: the device's default), then the save, which
    happens only when every output matches."""
    from onnxport.errors import VerificationError
    from onnxport.verification.compare import format_report, tolerance_for, verify_program

    begin("verify")
    rtol, atol = tolerance_for(built.model, built.args, built.kwargs)
    rtol = rtol if options.rtol is None else options.rtol
    atol = atol if options.atol is None else options.atol
    program.verification = verify_program(program, built.model, built.args, built.kwargs,
                                          rtol=rtol, atol=atol)
    if not all(result.passed for result in program.verification):
        raise VerificationError(f"ONNX Runtime's outputs differ from PyTorch's (rtol {rtol:g}, "
                                f"atol {atol:g}):\n" + format_report(program.verification))
    begin("save")
    program.save(options.output,
                 external_data=False if options.no_external_data else None)


def dynamic_axes_of(built, options, names: list[str]) -> dict[str, dict[int, str]]:
    """The source's default axes, then --dynamic-batch and --dynamic; none with --static. Keyed
    by the names given in --input-names when there are some."""
    from onnxport.cli import sources

    if options.static:
        return {}
    axes = {name: dict(named) for name, named in built.dynamic_axes.items()}
    if options.dynamic_batch:
        for name, named in sources.batch_axes(built).items():
            axes.setdefault(name, {}).update(named)
    renamed = dict(zip(names, options.input_names or []))
    axes = {renamed.get(name, name): named for name, named in axes.items()}
    for name, axis, label in options.dynamic:
        axes.setdefault(name, {})[axis] = label
    return axes


def _export_failed(error: BaseException, options) -> int:
    from onnxport.errors import InvalidExportOptionsError, OnnxExporterError, VerificationError

    json_output = options.json
    if isinstance(error, UsageError | InvalidExportOptionsError):
        return _fail(str(error), code=2, json_output=json_output)
    if isinstance(error, UserWarning) and str(error).startswith("dynamic_axes names "):
        message = str(error).replace("dynamic_axes names", "--dynamic names", 1)
        message = message.replace("; left out.", ".", 1).replace(
            "named by input_names", "named by --input-names").replace(
            "named by output_names", "named by --output-names")
        return _fail(message, code=2, json_output=json_output)
    if isinstance(error, VerificationError):
        return _fail(f"--verify failed, so {options.output} was not written (export without "
                     f"--verify to keep it): {error}", code=1, json_output=json_output)
    if isinstance(error, ModelBuildError | OnnxExporterError):
        return _fail(str(error), code=1, json_output=json_output)
    if isinstance(error, Exception):  # a bug, or an error torch raised outside the stages
        return _fail(f"{type(error).__name__}: {error}", code=1, json_output=json_output)
    raise error


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


def _print_warnings(caught) -> None:
    """The export's own warnings (values fixed by tracing, dims left static): the user acts on
    them. torch's deprecation chatter is left out."""
    from onnxport.errors import DynamicDimensionFixedWarning, TracingWarning

    ours = (DynamicDimensionFixedWarning, TracingWarning)
    for warning in caught:
        if issubclass(warning.category, ours):
            place = f" ({os.path.basename(warning.filename)}:{warning.lineno})"
            if "(at " in str(warning.message) or warning.filename.startswith("<"):
                place = ""
            sys.stderr.write(f"{PROG}: warning: {warning.message}{place}\n")
    sys.stderr.flush()


def _fail(message: str, *, code: int, json_output: bool = False) -> int:
    """The reason on one line; any further lines of the message (a report) after it."""
    message = message.strip() or "failed"
    first, _, rest = message.partition("\n")
    sys.stderr.write(f"{PROG}: error: {first}\n" if code != 130 else f"{PROG}: {first}\n")
    if rest.strip():
        sys.stderr.write(rest.rstrip() + "\n")
    sys.stderr.flush()
    if json_output:
        import json

        sys.stdout.write(json.dumps({"ok": False, "error": first, "exit_code": code}) + "\n")
        sys.stdout.flush()
    return code
