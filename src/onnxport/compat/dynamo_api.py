"""The dynamo-page API of ``torch.onnx`` (``dynamo_export``, ``ExportOptions``,
``enable_fake_mode``, ...), kept for code that still calls it: a thin layer over ``export``."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import warnings
from typing import Any, Iterator, Protocol, runtime_checkable

import torch
import torch.utils._pytree as pytree

from onnxport import _arguments, api, pipeline
from onnxport.errors import InvalidExportOptionsError, OnnxExporterError
from onnxport.fake_weights import MissingWeight, no_value_error
from onnxport.program import ONNXProgram
from onnxport.compat.registry_api import OnnxRegistry
from onnxport.passes import MODULE_FUNCTIONS_MIN_OPSET


class DiagnosticOptions:
    """How much the exporter reports: results below ``verbosity_level`` (notes are INFO,
    warnings WARNING) are left out of ``program.diagnostics`` and its SARIF log
    (``program.save_diagnostics(path)``); ``warnings_as_errors`` fails the export on a warning."""

    def __init__(self, verbosity_level: int = logging.INFO, warnings_as_errors: bool = False):
        if isinstance(verbosity_level, bool) or not isinstance(verbosity_level, int):
            raise InvalidExportOptionsError(
                f"verbosity_level must be a logging level such as logging.INFO, got "
                f"{verbosity_level!r}")
        if not isinstance(warnings_as_errors, bool):
            raise InvalidExportOptionsError(
                f"warnings_as_errors must be True or False, got {warnings_as_errors!r}")
        self.verbosity_level = verbosity_level
        self.warnings_as_errors = warnings_as_errors

    def __repr__(self) -> str:
        return (f"DiagnosticOptions(verbosity_level={self.verbosity_level}, "
                f"warnings_as_errors={self.warnings_as_errors})")


@dataclasses.dataclass(frozen=True)
class ONNXFakeContext:
    """What ``enable_fake_mode`` yields: the fake-tensor mode the model was created in."""

    fake_mode: Any
    state_dict_paths: tuple = ()


@contextlib.contextmanager
def enable_fake_mode() -> Iterator[ONNXFakeContext]:
    """Create models inside this block with fake weights (shape and dtype, no memory), to
    export one bigger than memory: pass the yielded context as ``ExportOptions(fake_context=)``
    and the real weights to ``ONNXProgram.save(path, model_state=state_dict or checkpoint)``.

    Real tensors may be mixed in (``allow_non_fake_inputs``), as in ``torch.onnx``."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    with fake_mode:
        yield ONNXFakeContext(fake_mode=fake_mode)


class ExportOptions:
    """Options of ``dynamo_export``.

    ``dynamic_shapes=True`` makes every dimension of every input dynamic (torch.export keeps
    static those the model needs static); False or None exports the example's shapes.
    ``fake_context`` is what ``enable_fake_mode`` yielded, ``onnx_registry`` an
    ``OnnxRegistry`` with custom translations, ``diagnostic_options`` a ``DiagnosticOptions``.
    """

    def __init__(self, *, dynamic_shapes: bool | None = None,
                 fake_context: ONNXFakeContext | None = None,
                 onnx_registry: OnnxRegistry | None = None,
                 diagnostic_options: DiagnosticOptions | None = None):
        if dynamic_shapes is not None and not isinstance(dynamic_shapes, bool):
            raise InvalidExportOptionsError(
                f"ExportOptions(dynamic_shapes=) takes True, False or None, got "
                f"{dynamic_shapes!r}; for per-dimension control use "
                "onnxport.export(model, args, dynamic_shapes=...) with torch.export.Dim")
        _check_type("fake_context", fake_context, ONNXFakeContext,
                    "the context yielded by `with onnxport.enable_fake_mode() as ctx:`")
        _check_type("onnx_registry", onnx_registry, OnnxRegistry, "an onnxport.OnnxRegistry()")
        _check_type("diagnostic_options", diagnostic_options, DiagnosticOptions,
                    "an onnxport.DiagnosticOptions()")
        self.dynamic_shapes = dynamic_shapes
        self.fake_context = fake_context
        self.onnx_registry = onnx_registry
        self.diagnostic_options = diagnostic_options or DiagnosticOptions()

    def __repr__(self) -> str:
        return (f"ExportOptions(dynamic_shapes={self.dynamic_shapes}, "
                f"fake_context={self.fake_context}, onnx_registry={self.onnx_registry}, "
                f"diagnostic_options={self.diagnostic_options})")


def _check_type(label: str, value: Any, kind: type, expected: str) -> None:
    if value is not None and not isinstance(value, kind):
        raise InvalidExportOptionsError(
            f"ExportOptions({label}=) must be {expected} or None, got {type(value).__name__}")


@runtime_checkable
class ONNXProgramSerializer(Protocol):
    """Writes a program: ``ONNXProgram.save(destination, serializer=s)`` calls
    ``s.serialize(program, stream)`` with a binary stream open on the destination."""

    def serialize(self, exported_program: ONNXProgram, destination: Any) -> None:
        ...


@dataclasses.dataclass
class ExportDiagnostics:
    """What is known of a failed ``dynamo_export``: the stage it failed in (None: in the
    argument checks) and the seconds spent until then."""

    stage: str | None
    stage_seconds: dict[str, float]
    options: ExportOptions
    recorder: Any = None  # what the export recorded until it failed (onnxport.diagnostics)

    def save_diagnostics(self, destination) -> None:
        """Write what the failed export recorded as a SARIF 2.1.0 log."""
        from onnxport.diagnostics import Recorder, write_sarif

        write_sarif(self.recorder or Recorder(), destination)


def dynamo_export(model: Any, /, *model_args: Any, export_options: ExportOptions | None = None,
                  **model_kwargs: Any) -> ONNXProgram:
    """Export ``model`` called with ``model_args`` and ``model_kwargs``; same call as
    ``torch.onnx.dynamo_export``. A failure raises ``OnnxExporterError`` whose
    ``diagnostics`` says at which stage; its ``onnx_program`` holds an empty model and
    ``save_diagnostics(path)`` writes what was recorded until the failure, as torch.onnx's."""
    if export_options is None:
        export_options = ExportOptions()
    elif not isinstance(export_options, ExportOptions):
        raise InvalidExportOptionsError(
            f"export_options must be an onnxport.ExportOptions, got "
            f"{type(export_options).__name__}")
    registry = export_options.onnx_registry or OnnxRegistry()
    fake = export_options.fake_context is not None
    dynamic_shapes = (_all_dims_dynamic(model, model_args, model_kwargs)
                      if export_options.dynamic_shapes else None)
    stages: list[str] = []
    start = time.perf_counter()
    try:
        options = _arguments.bound_options(
            api.export, model, model_args, kwargs=model_kwargs,
            opset_version=registry.opset_version,
            dynamo=True,  # torch.onnx.dynamo_export never traces instead
            dynamic_shapes=dynamic_shapes, on_stage=stages.append,
            # Passes that compute from weight values cannot run on fake weights.
            optimize=not fake,
            # As torch.onnx's dynamo_export did (and its page shows in Netron): each
            # submodule is a function in the saved model.
            export_modules_as_functions=(
                isinstance(model, torch.nn.Module)
                and registry.opset_version >= MODULE_FUNCTIONS_MIN_OPSET))
        program = pipeline.run(_arguments.plan_export(
            options, {}, registry=registry, fake_weights=fake,
            diagnostic_options=export_options.diagnostic_options))
    except InvalidExportOptionsError:
        raise
    except Exception as error:
        diagnostics = ExportDiagnostics(stages[-1] if stages else None,
                                        {"total": time.perf_counter() - start}, export_options,
                                        getattr(error, "recorder", None))
        failed = _failed_program(diagnostics, registry.opset_version)
        if isinstance(error, OnnxExporterError):
            error.diagnostics, error.onnx_program = diagnostics, failed
            raise
        wrapped = OnnxExporterError(
            f"dynamo_export failed during {diagnostics.stage or 'argument checks'}: "
            f"{type(error).__name__}: {error}")
        wrapped.diagnostics, wrapped.onnx_program = diagnostics, failed
        raise wrapped from error
    if fake:
        program = _with_class(program, FakeModeProgram)
    program.diagnostic_options = export_options.diagnostic_options
    return program


def _failed_program(diagnostics: "ExportDiagnostics", opset: int) -> ONNXProgram:
    """What torch.onnx's failed dynamo_export gives as ``error.onnx_program``: a program with an
    empty model whose ``save_diagnostics(path)`` writes what the export recorded until it
    failed (the SARIF log to read or attach to an issue)."""
    import onnx_ir as ir

    program = ONNXProgram(ir.Model(ir.Graph([], [], nodes=[], opset_imports={"": opset}),
                                   ir_version=8))
    if diagnostics.recorder is not None:
        program.diagnostics = diagnostics.recorder
    program.export_diagnostics = diagnostics
    return program


def _all_dims_dynamic(model: Any, args: tuple, kwargs: dict) -> Any:
    """dynamic_shapes for torch.export with every dimension of every input tensor left to it
    (``Dim.AUTO``: dynamic unless the model needs it static), like the old exporter's
    ``dynamic_shapes=True``."""

    def spec(leaf):
        if isinstance(leaf, torch.Tensor):
            return {axis: torch.export.Dim.AUTO for axis in range(leaf.dim())} or None
        return None

    args_spec = tuple(pytree.tree_map(spec, arg) for arg in args)
    if not kwargs:
        return args_spec
    import inspect

    forward = model.forward if isinstance(model, torch.nn.Module) else model
    names = list(inspect.signature(forward).parameters)
    shapes = {name: value for name, value in zip(names, args_spec)}
    shapes.update({key: pytree.tree_map(spec, value) for key, value in kwargs.items()})
    return shapes


class FakeModeProgram(ONNXProgram):
    """A program exported under ``enable_fake_mode``: its weights have shapes, not values.

    ``save(path)`` writes the architecture alone (no initializers) as ``torch.onnx`` did;
    ``save(path, model_state=...)`` writes it with those weights."""

    def missing_weights(self) -> list[str]:
        return [name for name, value in self.model.graph.initializers.items()
                if isinstance(value.const_value, MissingWeight)]

    def save(self, destination, *, include_initializers: bool = True, model_state=None,
             **options) -> None:
        missing = self.missing_weights()
        if model_state is not None and include_initializers and missing:
            from onnxport.program import _read_state

            model_state = _read_state(model_state)  # once: a checkpoint may be large
            not_given = [name for name in missing if name not in model_state]
            if not_given:
                raise OnnxExporterError(
                    f"model_state has no value for {len(not_given)} weight(s) of this "
                    f"fake-mode export: {', '.join(not_given[:10])}"
                    f"{' ...' if len(not_given) > 10 else ''}; nothing was written. Buffers "
                    "registered with persistent=False (a rotary embedding's inv_freq) are not "
                    "in state_dict(): pass model_state={**model.state_dict(), "
                    "**dict(model.named_buffers())}")
            # The whole model's state: buffers the graph does not use are no error here.
            initializers = self.model.graph.initializers
            model_state = {k: v for k, v in model_state.items() if k in initializers}
        if model_state is None and include_initializers and missing:
            warnings.warn(
                f"saving {destination!r} without weights: the model was exported under "
                "enable_fake_mode() and has none; pass model_state=model.state_dict() (or a "
                "checkpoint path) to save with them", stacklevel=2)
            include_initializers = False
        super().save(destination, include_initializers=include_initializers,
                     model_state=model_state, **options)

    def __call__(self, *args, **kwargs):
        missing = self.missing_weights()
        if missing:
            raise no_value_error(missing[0])
        return super().__call__(*args, **kwargs)


def _with_class(program: ONNXProgram, kind: type) -> ONNXProgram:
    new = kind(program.model, program.exported_program, input_names=program.input_names,
               output_names=program.output_names)
    for key, value in vars(program).items():
        setattr(new, key, value)
    return new


__all__ = ["DiagnosticOptions", "ExportOptions", "FakeModeProgram", "MissingWeight", "ONNXFakeContext",
           "ONNXProgramSerializer", "dynamo_export", "enable_fake_mode"]
