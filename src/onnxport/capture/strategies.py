"""The capture strategy chain: torch.export's strategies (``dynamo=True``), then tracing when
``fallback`` allows; tracing alone for ``dynamo=False``; a scripted model's own graph."""

from __future__ import annotations

import contextlib
import functools
import warnings
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from onnxport.capture import quirks
from onnxport.capture.common import state_kept, warn_at_caller
from onnxport.capture.torch_export import CapturedProgram, capture_torch_export
from onnxport.capture.torchscript import capture_tracing
from onnxport.capture.grown_check import (bounds_that_bite, grown_mismatch,
                                         traced_with_static_axes,
                                         with_axes_the_trace_fixes_static)
from onnxport.capture.specialization import static_size
from onnxport.errors import (CaptureError, DynamicDimensionFixedWarning, FallbackWarning,
                             TracingWarning)


def capture_with_fallback(
    capture_export: Callable[[], CapturedProgram] | None,
    capture_trace: Callable[[], CapturedProgram],
    *,
    fallback: bool,
    trace_name: str = "tracing",
    warn_on_fallback: bool = False,
    check_trace: Callable[[CapturedProgram], bool] | None = None,
) -> tuple[CapturedProgram, str, list[tuple[str, str]]]:
    """The captured program, the name of the strategy that produced it, and the (strategy,
    reason) of each one that failed before it.

    ``capture_export`` is the torch.export chain (None when ``dynamo=False``, and for a
    scripted model, whose graph is converted instead: ``trace_name`` "torchscript"); tracing
    comes after it only when ``fallback`` is set, with a :class:`FallbackWarning` when
    ``warn_on_fallback`` (the user chose neither path). A CaptureError may carry ``attempts``
    (the chain's own failed strategies), which are listed in order before its final reason.
    """
    if capture_export is None:
        return capture_trace(), trace_name, []
    try:
        with warnings.catch_warnings(record=True) as held:
            warnings.simplefilter("always")
            captured = capture_export()
        attempts = [(_export_strategy(name), reason)
                    for name, reason in captured.failed_strategies]
        fixed = [d for d in captured.fixed_dims if d.upper is None]
        traced = _traced_keeping(fixed, capture_trace, check_trace) \
            if fixed and fallback and check_trace is not None else None
        if traced is None:
            _replay(held)
            return captured, _export_strategy(captured.strategy), attempts
        attempts.append((_export_strategy(captured.strategy), "; ".join(
            str(w.message) for w in held if issubclass(w.category, DynamicDimensionFixedWarning))))
        if warn_on_fallback:
            _warn_fallback(attempts)
        return traced, "tracing", attempts
    except CaptureError as error:
        if not fallback:
            raise
        attempts = [(_export_strategy(name), reason)
                    for name, reason in getattr(error, "attempts", None) or []]
        attempts = attempts or [("torch.export", str(error))]
    try:
        captured = capture_trace()
    except CaptureError as error:
        attempts.append(("tracing", str(error)))
        lines = ["every capture strategy failed (torch.export, then tracing):"]
        for name, reason in attempts:
            lines.append(f"- {name}: " + reason.replace("\n", "\n    "))
        raise CaptureError("\n".join(lines)) from error
    if warn_on_fallback:
        _warn_fallback(attempts)
    return captured, "tracing", attempts


def _traced_keeping(fixed: list, capture_trace: Callable[[], CapturedProgram],
                    check: Callable[[CapturedProgram], bool]) -> CapturedProgram | None:
    """The traced program, when torch.export fixed dims the user asked to be dynamic
    (``fixed``: linspace's steps, which its schema takes as a plain int), tracing keeps them
    dynamic and ``check`` finds it computes eager's results at other sizes; else None. Not
    for an example size of 0 or 1: a trace there records what holds at that size only (a
    squeeze, a broadcast), which the check at a larger size cannot see in the ONNX graph."""
    if any(dim.size <= 1 for dim in fixed):
        return None
    try:
        with warnings.catch_warnings(record=True) as held:
            warnings.simplefilter("always")
            traced = capture_trace()
    except CaptureError:
        return None
    nodes = {node.name: node for node in traced.exported_program.graph.nodes}
    for dim in fixed:
        value = nodes[traced.user_inputs[dim.position]].meta.get("val")
        if value is None or not isinstance(static_size(value.shape[dim.axis]), torch.SymInt):
            return None  # (a SymInt may hold a number: the trace fixed the dim too)
    if not check(traced):
        return None
    _replay(held)
    return traced


def _computes_eager_results_when_grown(model: Any, args: tuple, kwargs: dict,
                                       dim_names: dict) -> Callable[[CapturedProgram], bool]:
    """A check that a traced program computes what eager does with every dynamic axis grown
    by about half (the trace was made at the example's sizes only)."""
    def check(traced: CapturedProgram) -> bool:
        return grown_mismatch(model, args, kwargs, dim_names, traced) is None

    return check


def _static_like_a_dynamic_size(traced: CapturedProgram, args: tuple, kwargs: dict,
                                dim_names: dict) -> bool:
    """Whether an output of ``traced`` has static sizes only, one of them a dynamic axis's
    example size (a size the trace may have fixed)."""
    leaves = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    sizes = {leaves[k].shape[axis] for k, axis in dim_names
             if k < len(leaves) and axis < leaves[k].dim()}
    outputs = next(n for n in traced.exported_program.graph.nodes if n.op == "output").args[0]
    for node in pytree.tree_leaves(outputs):
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if isinstance(value, torch.Tensor) and all(isinstance(d, int) for d in value.shape) \
                and any(d in sizes for d in value.shape):
            return True
    return False


def _small_dims_the_trace_fixes(model: Any, args: tuple, kwargs: dict, dim_names: dict,
                                 traced: CapturedProgram) -> tuple[list, str] | None:
    """The dynamic axes whose example size is 0 or 1 (with why), when a trace from that
    example computes other results than the model at a larger size: a trace records what
    holds at the example (``x.chunk(2)[-1]`` of one row is that row, at every size;
    ``torch.tensor([y.size(0)])`` is 1), and nothing in the graph shows it. The grown
    inputs' values differ from the example's, so that parts of the axis are told apart.
    None when there is no such axis to check; an empty list when the trace is right."""
    leaves = [leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
    small = [(k, axis) for (k, axis) in dim_names
             if k < len(leaves) and axis < leaves[k].dim() and leaves[k].shape[axis] <= 1]
    if not small:
        return None
    # Grown to 3, not 2: from one row, chunk(2) makes one piece, and at 2 its [0] and [-1]
    # are rows alike in shape, which a step like softmax over them makes alike in value too;
    # at 3 they differ in size.
    why = grown_mismatch(model, args, kwargs, dim_names, traced, distinct=True,
                         differences_only=True, smallest=3, failing_graph_differs=True)
    return ([], "") if why is None else (small, why)


def _replay(caught: list[warnings.WarningMessage]) -> None:
    for record in caught:
        warnings.warn_explicit(record.message, record.category, record.filename, record.lineno)


def _warn_fallback(attempts: list[tuple[str, str]]) -> None:
    tried = "; ".join(f"{name}: {(reason.strip().splitlines() or [''])[0]}"
                      for name, reason in attempts)
    warn_at_caller(
        f"torch.export could not capture the model ({tried}); it was exported through the "
        "TorchScript path (tracing) instead, which records one run: loops unrolled, the "
        "branches taken, values read from tensors fixed (a TracingWarning names each). "
        "program.capture_attempts lists the failures; pass fallback=False to make them an "
        "error, or dynamo=False to trace without trying torch.export.", FallbackWarning)


def _export_strategy(name: str) -> str:
    """A strategy of the torch.export chain as the program records it: "torch.export (strict)"."""
    return name if name.startswith("torch.export") else f"torch.export ({name})"


def capture_model(model: Any, args: tuple, kwargs: dict, *, dynamo: bool, fallback: bool,
                  dynamic_shapes: Any = None, warn_on_fallback: bool = False,
                  keep_functions: Callable[[type], bool] | None = None, **options: Any,
                  ) -> tuple[CapturedProgram, str, list[tuple[str, str]]]:
    """The capture strategy chain: torch.export (``dynamo=True``), then tracing when
    ``fallback`` is set; tracing alone for ``dynamo=False``; a scripted model's own graph
    (torch.export cannot run TorchScript). Returns what :func:`capture_with_fallback` does.
    ``keep_functions`` says which torch.autograd.Functions stay one call each (those with a
    symbolic); ``options`` are those both captures take (dim_names, input_names...)."""
    from onnxport.capture.quirks.autograd_functions import record_calls

    keeping = contextlib.nullcontext() if keep_functions is None else \
        quirks.keeping_autograd_functions(keep_functions)
    with keeping, state_kept(model):
        result = _capture_model(model, args, kwargs, dynamo=dynamo, fallback=fallback,
                                dynamic_shapes=dynamic_shapes,
                                warn_on_fallback=warn_on_fallback, **options)
    if keep_functions is not None:
        record_calls(result[0].exported_program.graph_module)
    asked = {leaf.max for leaf in pytree.tree_leaves(dynamic_shapes)
             if isinstance(getattr(leaf, "max", None), int)}
    program = result[0]
    program.upper_bounds, held = bounds_that_bite(model, args, kwargs, program, asked,
                                                  options.get("dim_names"))
    for where, message in program.bounded_dims:
        if where not in held:
            warn_at_caller(message, DynamicDimensionFixedWarning)
    return result


def _capture_model(model: Any, args: tuple, kwargs: dict, *, dynamo: bool, fallback: bool,
                   dynamic_shapes: Any = None, warn_on_fallback: bool = False, **options: Any,
                   ) -> tuple[CapturedProgram, str, list[tuple[str, str]]]:
    scripted = isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))
    if not scripted:
        model = quirks.prepared(model)
    export = None
    if dynamo and not scripted:
        def export():
            return capture_torch_export(model, args, kwargs, dynamic_shapes=dynamic_shapes,
                                        **options)
    dim_names = options.get("dim_names") or {}

    def trace():
        with warnings.catch_warnings(record=True) as held:
            warnings.simplefilter("always")
            traced = capture_tracing(model, args, kwargs, **options)
        _replay(held)
        if not scripted:
            # A size the model used as a Python number is a constant of the trace (the
            # TracingWarning says where): the trace is run at larger sizes, each dim name
            # grown alone too. (A trace that passed the check of small dims has been run with
            # all of them grown together.)
            traced_options = options
            small = _small_dims_the_trace_fixes(model, args, kwargs, dim_names, traced)
            fixed, why = small or ([], "")
            checked = small is not None and not fixed
            if fixed:
                traced, traced_options = traced_with_static_axes(
                    model, args, kwargs, options, fixed,
                    f"larger sizes ({why}), as tracing records what holds at the example's "
                    "size only. Export from an example whose dynamic axes have size 2 or "
                    "more, or with dynamo=True, to keep the axis dynamic.")
            names = traced_options.get("dim_names") or {}
            if names and any(issubclass(w.category, TracingWarning) for w in held):
                traced = with_axes_the_trace_fixes_static(model, args, kwargs, traced_options,
                                                          traced, grown_together=not checked)
            elif names and not checked and _static_like_a_dynamic_size(traced, args, kwargs,
                                                                       names):
                # A count Python read gives no warning (len(x.unbind(0)), a loop over the
                # pieces), and leaves an output's size the example's: the outputs' shapes are
                # checked at larger sizes (not values, which a random op makes differ).
                traced = with_axes_the_trace_fixes_static(model, args, kwargs, traced_options,
                                                          traced, values=False)
        return traced

    if export is not None and fallback:
        loop = scripted_loop_called(model)
        # A scripted branch on a size, with dynamic dims: torch.export runs the branch of the
        # example's size and records no guard for it (silently wrong at sizes taking the
        # other); tracing keeps it an If.
        branch = scripted_loop_called(model, _branches_on_sizes) if dim_names else None
        if loop is not None or branch is not None:
            # torch.export runs a scripted loop step by step, each step's ops into the graph
            # (ProphetNet's 2 x 512-step mask: five minutes); tracing keeps it a loop.
            what = f"a loop ({loop}), which tracing keeps a loop" if loop is not None else \
                f"a branch on a size ({branch}), which tracing keeps a branch"
            with contextlib.suppress(CaptureError):
                return trace(), "tracing", [("torch.export", f"not tried: the model calls "
                                             f"scripted code with {what}")]
    try:
        return capture_with_fallback(
            export, trace, fallback=fallback,
            trace_name="torchscript" if scripted else "tracing",
            warn_on_fallback=warn_on_fallback,
            check_trace=_computes_eager_results_when_grown(model, args, kwargs, dim_names))
    except CaptureError as error:
        failure = eager_failure(model, args, kwargs)
        if failure is None:
            raise
        # The cause first; what each capture strategy said stays below it.
        raise CaptureError(
            f"the example inputs do not fit the model: it fails on them in PyTorch itself "
            f"(eager), so no capture can succeed: {failure}. Check the inputs' number, order, "
            "shapes and dtypes against forward's parameters (export calls "
            "model(*args, **kwargs)); fallback=True or dynamo=False would not help.\n"
            + str(error)) from error


def scripted_loop_called(model: Any, has: Callable[[Any], bool] | None = None) -> str | None:
    """The name of a scripted function or module with a loop (or of which ``has(graph)``
    holds) that ``model`` calls (a scripted submodule, or a scripted function its modules'
    forward names), or None."""
    if not isinstance(model, torch.nn.Module):
        return None
    has = has or _has_loop
    for name, module in model.named_modules():
        if isinstance(module, torch.jit.ScriptModule):
            if _holds(module, has):
                return name or type(module).__name__
            continue
        for called, function in _script_functions_named(module):
            if _holds(function, has):
                return called
    return None


def _script_functions_named(module: torch.nn.Module):
    """(name, function) of each scripted function ``module`` holds as an attribute or that a
    method of its class (forward or a helper it calls) names among its globals."""
    for name, value in vars(module).items():
        if isinstance(value, torch.jit.ScriptFunction):
            yield name, value
    yield from _script_functions_of_class(type(module))


@functools.lru_cache(maxsize=256)
def _script_functions_of_class(cls: type) -> tuple:
    found = []
    for base in cls.__mro__:
        if base.__module__.startswith("torch."):
            break  # (torch's own modules call no scripted function of the model's)
        for method in vars(base).values():
            code = getattr(method, "__code__", None)
            names = getattr(method, "__globals__", {})
            for called in (code.co_names if code is not None else ()):
                function = names.get(called)
                if isinstance(function, torch.jit.ScriptFunction):
                    found.append((called, function))
    return tuple(found)


def _holds(scripted: Any, has: Callable[[Any], bool]) -> bool:
    try:
        graph = scripted.inlined_graph if isinstance(scripted, torch.jit.ScriptModule) \
            else scripted.graph
    except (AttributeError, RuntimeError):  # (a ScriptModule with no forward)
        return False
    return has(graph)


def _has_loop(graph: Any) -> bool:
    return graph.findNode("prim::Loop", True) is not None


def _branches_on_sizes(graph: Any) -> bool:
    """Whether ``graph`` has a branch and reads a size (``if x.size(0) > 3:``)."""
    return graph.findNode("prim::If", True) is not None and any(
        graph.findNode(kind, True) is not None
        for kind in ("aten::size", "aten::len", "aten::numel", "aten::sym_size"))


def eager_failure(model: Any, args: tuple, kwargs: dict) -> str | None:
    """Why ``model(*args, **kwargs)`` fails in eager PyTorch, with the line of model code, or
    None when it runs (or cannot be run here: fake weights or inputs). Run only after every
    capture failed, to tell inputs that do not fit the model from a capture problem; the
    model's parameters and buffers are put back afterwards. (Scripted models are left out:
    their failures are the converter's, read from their graph, not a run.)"""
    from torch._subclasses.fake_tensor import FakeTensor

    from onnxport.capture.specialization import failure_location
    from onnxport.verification.compare import preserved_state

    module = model if isinstance(model, torch.nn.Module) else None
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if module is not None:
        tensors += [*module.parameters(), *module.buffers()]
    scripted = isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))
    if scripted or not callable(model) or any(isinstance(t, FakeTensor) or t.is_meta for t in tensors):
        return None
    args, kwargs = pytree.tree_map_only(torch.Tensor, torch.clone, (args, kwargs))
    try:
        with preserved_state(module), torch.no_grad():
            model(*args, **kwargs)
    except Exception as error:
        lines = [line for line in str(error).strip().splitlines() if line.strip()]
        location = failure_location(error)
        return (f"{type(error).__name__}: {lines[0] if lines else ''}".strip()
                + (f" (at {location})" if location else ""))
    return None
