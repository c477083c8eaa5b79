"""torch.export's own strategies: non-strict, then strict, then the example's sizes 0 and 1
traced at 2, then the dims the model fixes made static, with a warning naming the line."""

from __future__ import annotations

import contextlib
import io

import torch
import torch.utils._pytree as pytree

from onnxport.capture.common import warn_at_caller
from onnxport.capture.data_dependent import DataDependentArguments
from onnxport.capture.dynamic import as_auto, map_dims, requested_dims
from onnxport.capture import quirks
from onnxport.capture.specialization import (FixedDim, failure_location, fixed_dims,
                                              recording_guards)
from onnxport.capture.torch_export.eager_check import (EagerShapes, computes_eager_results,
                                                       differs_at_size, differs_at_size_three,
                                                       example_size,
                                                       placeholder_size, tensor_user_inputs,
                                                       with_dims_grown)
from onnxport.errors import CaptureError, DynamicDimensionFixedWarning


def capture_with_strategies(module, args, kwargs, dynamic_shapes, names, describe_dim):
    """torch.export, non-strict (Python runs the model) then strict (dynamo traces it).

    A dim asked to be dynamic is given to torch as Dim.AUTO, so that a model fixing it does
    not fail the export but shows in the program. Then, for such dims, a size of 2 when the
    example has 0 or 1 there (kept when the graph still computes eager's results at the
    example's sizes), and else the dims static, with a warning naming the line that fixes them.
    Returns the program, the strategy that made it, the (strategy, reason) of each that did not,
    the dims left static and the bounded ones (:func:`_bounded`)."""
    requested = requested_dims(dynamic_shapes, args, kwargs, names)
    auto = map_dims(dynamic_shapes, args, kwargs, names,
                    lambda k, axis, dim: as_auto(dim) if (k, axis) in requested else dim)
    small = {key for key in requested if example_size(args, kwargs, names, key) in (0, 1)}
    attempts: list[tuple[str, str]] = []
    fixed = None
    eager = EagerShapes(module, args, kwargs)
    non_strict = None
    for strategy, strict in (("non-strict", False), ("strict", True)):
        try:
            program, fixed = _export(module, args, kwargs, auto, strict, requested, bool(small))
        except Exception as error:  # torch raises many kinds; all mean "could not capture"
            attempts.append((strategy, _reason(error)))
            continue
        static = [d for d in fixed if d.upper is None]
        # Sizes 0 and 1 kept symbolic: torch assumes they broadcast and squeeze like larger ones.
        mismatch = eager.mismatch(program, args, kwargs, names) if small and not static else None
        if small and not static and mismatch is None:
            mismatch = differs_at_size_three(program, module, args, kwargs, names, small,
                                             others=set(requested) - small)
        if not static and mismatch is None:
            return program, strategy, attempts, [], _bounded(fixed, describe_dim)
        attempts.append((strategy, "; ".join(describe_dim(d) for d in static) or mismatch))
        if not strict and static and not {(d.position, d.axis) for d in static} & small:
            # Python running the model reads some sizes as ints (len(x), a size given to a
            # Python function), which fixes them; dynamo traces those as symbols. When it
            # fixes dims too, or fails, the non-strict program goes on as before.
            non_strict = program, fixed, mismatch
            continue
        break
    if non_strict is not None:
        (program, fixed, mismatch), strict = non_strict, False
    if fixed is None and not small:
        raise _capture_error(attempts)
    if fixed is None:  # torch may fail on sizes 0 and 1 kept symbolic: they go the same way
        strict, program = False, None
        mismatch = "torch.export failed with it dynamic at this size (see the strategies above)"
    static = {(d.position, d.axis) for d in fixed or () if d.upper is None}
    if mismatch is not None:
        fixed = [FixedDim(k, axis, example_size(args, kwargs, names, (k, axis)), None,
                          reason=mismatch) for k, axis in sorted(small)]
        static = set(small)

    if static & small:
        strategy = f"{'strict' if strict else 'non-strict'}, sizes 0 and 1 traced at 2"
        larger, reason = _traced_at_size_two(module, args, kwargs, names, auto, strict, requested,
                                             small, eager, describe_dim)
        if larger is not None:
            return larger, strategy, attempts, [], reason
        attempts.append((strategy, reason))

    strategy = f"{'strict' if strict else 'non-strict'}, fixed dims static"
    if mismatch is None and all(isinstance(placeholder_size(program, d), int)
                                for d in fixed if d.upper is None):
        final = program  # torch already made them static
    else:
        shapes = map_dims(auto, args, kwargs, names,
                          lambda k, axis, dim: None if (k, axis) in static else dim)
        try:
            final, _ = _export(module, args, kwargs, shapes, strict, requested,
                               bool(small - static))
        except Exception as error:
            attempts.append((strategy, _reason(error)))
            raise _capture_error(attempts) from error
    for d in fixed:
        if d.upper is None:
            advice = " (change that line to keep it dynamic)" if d.location else ""
            warn_at_caller(f"{describe_dim(d)}; the ONNX model takes only size {d.size} there"
                           f"{advice}", DynamicDimensionFixedWarning)
    return final, strategy, attempts, [d for d in fixed if d.upper is None], \
        _bounded(fixed, describe_dim)


def _traced_at_size_two(module, args, kwargs, names, shapes, strict, requested, small, eager,
                        describe_dim):
    """The program captured with the example's sizes 0 and 1 of ``small`` dims made 2, when it
    is sound at the example's own sizes, with its bounded dims (:func:`_bounded`); else
    (None, why not)."""
    try:
        larger_args, larger_kwargs = with_dims_grown(args, kwargs, names, small, 2)
        program, fixed = _export(module, larger_args, larger_kwargs, shapes, strict, requested,
                                 False)
    except Exception as error:
        return None, _reason(error)
    static = [d for d in fixed if d.upper is None]
    if static:
        return None, "; ".join(describe_dim(d) for d in static)
    mismatch = eager.mismatch(program, args, kwargs, names)
    if mismatch is not None:
        return None, mismatch
    if not computes_eager_results(program, module, args, kwargs):
        return None, "its graph computes other values than eager at the example's sizes"
    return program, _bounded(fixed, describe_dim)


def _export(module, args, kwargs, dynamic_shapes, strict, requested, oblivious):
    """One torch.export call, recording where the model fixes sizes. ``oblivious``: sizes of
    0 and 1 stay symbolic (torch otherwise makes them constants), the way torch.onnx does."""
    from torch.fx.experimental import _config as shapes_config

    # A failing torch.export prints its partial graph to stderr; the chain tries several
    # strategies, and its error says what failed in each.
    # Non-strict only: dynamo (strict) traces past a torch function mode.
    rewrites = contextlib.ExitStack()
    if not strict:
        rewrites.enter_context(DataDependentArguments())
    with quirks.applied("torch.export strict" if strict else "torch.export"), \
            recording_guards() as guards, rewrites, \
            shapes_config.patch(backed_size_oblivious=oblivious), \
            contextlib.redirect_stderr(io.StringIO()):
        program = torch.export.export(module, *_distinct_inputs(args, kwargs),
                                      dynamic_shapes=dynamic_shapes, strict=strict)
    _refuse_fake_constants(program, module, args, kwargs)
    # Translation re-traces decompositions on these shapes: it must treat 0 and 1 alike.
    program.graph_module.meta["backed_size_oblivious"] = oblivious
    user_inputs = tensor_user_inputs(program)
    tensors = tuple(leaf for leaf in pytree.tree_leaves((args, kwargs))
                    if isinstance(leaf, torch.Tensor))
    return program, fixed_dims(program, user_inputs, requested, guards,
                               tensors if len(tensors) == len(user_inputs) else None,
                               differs_at_size(program, module, args, kwargs, requested))


def _distinct_inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with each tensor given again (``(x, x)``) as a copy of its own:
    torch.export makes a repeated tensor one input and reads it from its last place, so the
    graph read ``mask`` where the model reads ``x``, a wrong answer once they differ."""
    from torch._subclasses.fake_tensor import FakeTensor

    seen: set[int] = set()

    def distinct(leaf):
        if not isinstance(leaf, torch.Tensor) or isinstance(leaf, FakeTensor):
            return leaf
        if id(leaf) in seen:
            return leaf.clone()
        seen.add(id(leaf))
        return leaf

    return pytree.tree_map(distinct, (args, kwargs))


def _refuse_fake_constants(program, module, args, kwargs) -> None:
    """Strict export can lift a tensor it could not trace through (``x.data``) as a constant
    that is a fake tensor: no values to save. Non-strict refuses such a program; so does this,
    unless the model is fake itself (enable_fake_mode: its buffers are fake constants)."""
    from torch._subclasses.fake_tensor import FakeTensor

    fake = [name for name, value in program.constants.items() if isinstance(value, FakeTensor)]
    if fake and not any(isinstance(t, FakeTensor) for t in (
            *pytree.tree_leaves((args, kwargs)), *module.parameters(), *module.buffers())):
        raise RuntimeError(f"torch.export lifted {', '.join(fake)} as a constant without "
                           "values (a fake tensor): it could not trace through an op there "
                           "(x.data is one)")


def _bounded(fixed, describe_dim) -> list[tuple[tuple[int, int], str]]:
    """The dims kept dynamic but bounded, (position, axis) and the warning that names the
    bound: it is given only where the program is wrong beyond the bound
    (grown_check.bounds_that_bite), which is checked once the capture is chosen."""
    return [((d.position, d.axis), f"{describe_dim(d)}; the ONNX model keeps it dynamic, but "
             f"matches PyTorch only up to {d.upper}") for d in fixed if d.upper is not None]


def _reason(error: BaseException) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    reason = f"{type(error).__name__}: {lines[0] if lines else ''}".strip()
    location = failure_location(error)
    return reason + (f" (at {location})" if location else "")


def _capture_error(attempts: list[tuple[str, str]]) -> CaptureError:
    """The error when every strategy failed; it carries them, for fallback=True to list."""
    error = CaptureError(_capture_failure(attempts))
    error.attempts = list(attempts)
    return error


def _capture_failure(attempts: list[tuple[str, str]]) -> str:
    tried = "\n".join(f"  {strategy}: {reason}" for strategy, reason in attempts)
    return (
        "torch.export could not capture the model (the stage that failed is capture). "
        f"Strategies tried:\n{tried}\n"
        "Change the model at the line named above, or export with fallback=True (falls back to "
        "the TorchScript path when torch.export fails) or dynamo=False (the TorchScript path)."
    )

