"""``export()``: the front door of torch.onnx's call; checks its arguments into a plan
(``_arguments``) and runs it (``pipeline``)."""

from __future__ import annotations

import io
import os
from typing import Any, Callable, Mapping, Sequence

from onnxport import _arguments, pipeline
from onnxport._arguments import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET  # noqa: F401 (kept public)
from onnxport.errors import OnnxExporterError
from onnxport.pipeline import EXPORT_LOCK, is_in_onnx_export  # noqa: F401 (kept public)
from onnxport.pipeline import pretty_string as export_to_pretty_string_from
from onnxport.program import ONNXProgram


def export(
    model: Any,
    args: Any = (),
    f: str | os.PathLike | io.IOBase | None = None,
    *,
    kwargs: Mapping[str, Any] | None = None,
    export_params: bool = True,
    verbose: bool | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
    dynamic_axes: Mapping[str, Any] | None = None,
    keep_initializers_as_inputs: bool = False,
    dynamo: bool | None = None,
    external_data: bool | None = None,
    dynamic_shapes: Any = None,
    report: bool = False,
    optimize: bool = True,
    fused_ops: bool = True,
    verify: bool = False,
    profile: bool = False,
    dump_exported_program: bool = False,
    artifacts_dir: str | os.PathLike = ".",
    fallback: bool | None = None,
    training: Any = None,
    operator_export_type: Any = None,
    do_constant_folding: bool = True,
    custom_opsets: Mapping[str, int] | None = None,
    export_modules_as_functions: Any = False,
    autograd_inlining: bool = True,
    on_stage: Callable[[str], None] | None = None,
    custom_translation_table: Mapping[Any, Any] | None = None,
    **unknown_options: Any,
) -> ONNXProgram:
    """Export ``model`` to ONNX; same call as ``torch.onnx.export``.

    ``dynamo`` and ``fallback`` left at None: torch.export, and the TorchScript path (tracing)
    with a ``FallbackWarning`` when torch.export fails; ``fallback=False`` or ``dynamo=True``
    make that failure an error, ``dynamo=False`` traces only.
    Returns an :class:`ONNXProgram`; writes it to ``f`` when ``f`` is given. A failed export
    leaves no file behind and an existing file at ``f`` untouched. Exports from several
    threads are safe but run one at a time (torch.export is not thread-safe).
    """
    options = dict(locals())
    del options["unknown_options"]
    return pipeline.run(_arguments.plan_export(options, unknown_options))


def export_to_pretty_string(model: Any, args: Any = (), **options) -> str:
    """Export ``model`` without writing a file and return the graph as readable text."""
    options.pop("f", None)
    return export_to_pretty_string_from(export(model, args, None, **options))


__all__ = ["export", "export_to_pretty_string", "is_in_onnx_export", "OnnxExporterError"]
