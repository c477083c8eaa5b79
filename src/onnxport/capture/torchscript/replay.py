"""torch.export over the traced program, when propagating it alone (:mod:`.propagate`) cannot
make it an ExportedProgram."""

from __future__ import annotations

import contextlib
import io
import warnings

import torch
from torch.fx import traceback as fx_traceback
from torch.fx.experimental import _config as fx_config

from onnxport.capture.common import first_lines
from onnxport.capture.specialization import (holds_at_small_sizes_only, pinning_guard,
                                              size_bounds, static_size)
from onnxport.capture.torchscript.fake_calls import SYMBOLIC_TWINS
from onnxport.capture.torchscript.fx_helpers import _source_of
from onnxport.capture.torchscript.sizes import _shape_reads, size_oblivious
from onnxport.errors import CaptureError


# ... and the prefix of the module that replays the converted graph for torch.export.
# (Not "graph.": a program's module is a GraphModule, whose "graph" is its FX graph, and
# unlifting a buffer of that path failed: "references nonexistent attribute".)
_REPLAY_PREFIX = "replayed."


def _export_traced(graph_module: torch.fx.GraphModule, tensors: tuple, dynamic: list,
                   suspects: list = ()) -> torch.export.ExportedProgram:
    """torch.export over the traced program (``suspects``: the dynamic dims, (input, axis),
    that propagating the graph found pinned by a guard).

    The tracer keeps sizes as 0-d tensors, and some code (torchvision's resize and detection
    heads, interpolate with recompute_scale_factor) computes sizes with tensor ops and reads
    them back as ints, which torch.export cannot see through. With static shapes those reads
    were fixed to this run's values (:func:`capture_tracing`; exact: they depend on the shapes
    only); with dynamic axes they are symbols (:class:`_ReadBackSizes`), and this is reached
    only when propagating them failed otherwise: an error says what to do when torch.export
    cannot follow them either.
    """
    # torch.export specializes a dim of size 0 or 1 unless told to reason about it as any
    # size; the traced program has no branch left that could tell them apart.
    oblivious = size_oblivious(tensors, dynamic)

    # Dim.AUTO, as the default path asks: a dim the model fixes (x + a static bias, a view
    # to a constant shape) is left static with a warning, where Dim.DYNAMIC failed the export.
    auto = [{axis: torch.export.Dim.AUTO for axis in axes} if axes else None
            for axes in dynamic]

    def export():
        # (A failing torch.export prints its partial graph to stderr; its error says enough.)
        with fx_config.patch(backed_size_oblivious=oblivious), \
                contextlib.redirect_stderr(io.StringIO()):
            # (none of a model of number inputs only: torch.export refuses a spec of none)
            program = torch.export.export(_Replay(graph_module), tensors,
                                          dynamic_shapes=(tuple(auto),) if tensors else None,
                                          strict=False)
        # (as capture_torch_export's strategies record it, for a later trace of the program)
        program.graph_module.meta["backed_size_oblivious"] = oblivious
        return program

    reads = _shape_reads(graph_module)  # none left when static: capture_tracing fixed them
    try:
        program = export()
        pinned = _pinned_to_small_sizes(program, dynamic, tensors, graph_module, suspects)
        if pinned:
            # As the default path does: a dim the program holds for sizes up to 2 only (a
            # split into pieces of 2 from an example of 1: one piece there, more beyond) is
            # the example's size, static, so that ONNX Runtime refuses other sizes rather
            # than answer wrongly at them.
            for k, axis in pinned:
                del auto[k][axis]
            program = export()
        _warn_fixed_or_bounded(program, dynamic, pinned)
        return program
    except Exception as error:
        if reads and any(dynamic):
            raise CaptureError(
                f"the traced model computes {len(reads)} size(s) with tensor ops and reads "
                f"them back as Python numbers (first at {_source_of(reads[0])}); torch.export "
                "cannot keep those dynamic, and fixing them to this example's values would "
                "contradict the dynamic axes asked for. Export without dynamic_axes (one model "
                f"per input size), or use dynamo=True. torch.export's error: "
                f"{type(error).__name__}: {first_lines(str(error), 3)}"
            ) from error
        raise CaptureError(
            f"the traced graph could not be captured by torch.export: {type(error).__name__}: "
            f"{first_lines(str(error))}\nThe stage that failed is capture (tracing)."
        ) from error


def _dynamic_input_sizes(program: torch.export.ExportedProgram, dynamic: list):
    """(input position, axis, size in the program, its (lower, upper) bounds) of each dynamic
    dim asked for."""
    inputs = [n for n in program.graph.nodes if n.op == "placeholder"][-len(dynamic):] \
        if dynamic else []
    bounds_of = size_bounds(program)
    for k, (node, axes) in enumerate(zip(inputs, dynamic)):
        for axis in sorted(axes or {}):
            size = static_size(node.meta["val"].shape[axis])
            yield k, axis, size, bounds_of(size)


def _pinned_to_small_sizes(program: torch.export.ExportedProgram, dynamic: list,
                           tensors: tuple, graph_module: torch.fx.GraphModule,
                           suspects: list = ()) -> dict[tuple[int, int], str]:
    """The dynamic dims whose range the program bounds so that they are as good as fixed, or
    that a guard of its code pins (the size of a split's piece, :func:`pinning_guard`: where
    the program, run without it, computes other results than the traced graph), or, of the
    ``suspects``, where the program computes other results than the traced graph at a larger
    size (torch.export took min(piece, rows) as the piece with a guard of no equation), each
    with why."""
    from onnxport.capture.torch_export.eager_check import differs_at_size

    differs = differs_at_size(program, _Replay(graph_module), tensors, {})
    pinned = {}
    for k, axis, size, bounds in _dynamic_input_sizes(program, dynamic):
        example = int(tensors[k].shape[axis])
        # (A bounded dim is checked beyond its bound, one of 1 against larger sizes later:
        # strategies._small_dims_the_trace_fixes.)
        if (k, axis) in suspects and isinstance(size, torch.SymInt) and bounds[1] is None \
                and example > 1 and any(
                differs((k, axis), grown) for grown in (example + 1, 2 * example + 1,
                                                        3 * example + 2)):
            pinned[(k, axis)] = (
                "the traced program computes other results than the model at other sizes "
                "(torch.export decided a comparison of sizes at the example's)")
        elif holds_at_small_sizes_only(*bounds):
            pinned[(k, axis)] = (
                "the traced program holds for sizes up to 2 only (a split or chunk whose "
                "number of pieces grows beyond: trace from a larger example)")
        elif bounds[1] is None and (
                guard := pinning_guard(program, size, tensors, (k, axis), differs)) is not None:
            # (a bounded dim is checked beyond its bound: grown_check.bounds_that_bite)
            pinned[(k, axis)] = (
                f"the traced program holds only where {guard}, which sizes far from it do "
                "not meet (a piece of a split whose size torch took as the example's)")
    return pinned


def _warn_fixed_or_bounded(program: torch.export.ExportedProgram, dynamic: list,
                           pinned: dict[tuple[int, int], str] | None = None) -> None:
    """Warn, as the default path does, for each dynamic axis torch.export fixed to the
    example's size (the ONNX model has it static), or bounded (its range has an upper end):
    the ONNX model keeps it dynamic but matches PyTorch only up to there (a guard on
    ``x[:, ::2][:, ::2]``'s one column of three had torch flatten other axes)."""
    from onnxport.errors import DynamicDimensionFixedWarning

    pinned = pinned or {}
    for k, axis, size, (_, upper) in _dynamic_input_sizes(program, dynamic):
        if isinstance(size, int):
            why = pinned.get((k, axis)) or ("the model computes with that size (a weight "
                                            "or a constant shape it must match)")
            warnings.warn(
                f"axis {axis} of tensor input {k} is fixed to {size} by the model "
                f"(tracing): the ONNX model has it static, as {why}",
                DynamicDimensionFixedWarning, stacklevel=2)
        elif upper is not None:
            warnings.warn(
                f"axis {axis} of tensor input {k} is bounded to at most {upper} by the "
                f"model (tracing); the ONNX model keeps it dynamic, but matches PyTorch "
                f"only up to {upper}", DynamicDimensionFixedWarning, stacklevel=2)


class _Replay(torch.nn.Module):
    """Runs the converted graph node by node so that torch.export copies each node's
    provenance onto the calls it records (running the generated code would not)."""

    def __init__(self, graph_module: torch.fx.GraphModule):
        super().__init__()
        self.replayed = graph_module

    def forward(self, *tensors):
        with fx_traceback.preserve_node_meta():
            return _Interpreter(self.replayed).run(*tensors)


class _Interpreter(torch.fx.Interpreter):
    """Calls an op whose kernel would fix a dynamic size as its symbolic twin."""

    def call_function(self, target, args, kwargs):
        return super().call_function(SYMBOLIC_TWINS.get(target, target), args, kwargs)
