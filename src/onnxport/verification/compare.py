"""Compare ONNX Runtime's outputs with PyTorch eager outputs, output by output."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree

from onnxport.tensor_values import on_cpu


@dataclasses.dataclass
class VerificationInfo:
    """How one output compares."""

    name: str
    max_abs_diff: float
    max_rel_diff: float
    shape_matches: bool
    dtype_matches: bool
    passed: bool
    expected_shape: tuple
    actual_shape: tuple


Output = "torch.Tensor | bool | int | float"


def compare_outputs(names: Sequence[str], expected: Sequence[Any],
                    actual: Sequence[torch.Tensor], *, rtol: float = 1e-3,
                    atol: float = 1e-4) -> list[VerificationInfo]:
    """Compare output by output. A Python number among ``expected`` (a model returning
    ``(y, 3)``) is compared by value with the one-element tensor ONNX gives for it."""
    results = []
    for name, e, a in zip(names, expected, actual):
        if not isinstance(e, torch.Tensor):
            results.append(_compare_value(name, e, a, rtol, atol))
            continue
        e = on_cpu(e)
        shape_ok = tuple(e.shape) == tuple(a.shape)
        dtype_ok = e.dtype == a.dtype
        if shape_ok and e.numel():
            e64, a64 = e.to(torch.float64), a.to(torch.float64)
            diff = (e64 - a64).abs()
            both_inf = torch.isinf(e64) & torch.isinf(a64) & (torch.sign(e64) == torch.sign(a64))
            both_nan = torch.isnan(e64) & torch.isnan(a64)
            diff = torch.where(both_inf | both_nan, torch.zeros_like(diff), diff)
            max_abs = float(diff.max())
            max_rel = float((diff / e64.abs().clamp_min(1e-12)).max())
            passed = bool(((diff <= atol + rtol * e64.abs()) | both_inf | both_nan).all())
        else:
            max_abs = max_rel = 0.0 if shape_ok else float("inf")
            passed = shape_ok
        results.append(VerificationInfo(name, max_abs, max_rel, shape_ok, dtype_ok,
                                        passed and dtype_ok, tuple(e.shape), tuple(a.shape)))
    if len(expected) != len(actual):
        results.append(VerificationInfo("<output count>", float("inf"), float("inf"), False, False,
                                        False, (len(expected),), (len(actual),)))
    return results


def _compare_value(name: str, expected: bool | int | float, actual: torch.Tensor, rtol: float,
                   atol: float) -> VerificationInfo:
    shape_ok = actual.numel() == 1
    if not shape_ok:
        return VerificationInfo(name, float("inf"), float("inf"), False, True, False, (),
                                tuple(actual.shape))
    got = actual.reshape(()).item()
    diff = abs(float(got) - float(expected))
    if isinstance(expected, float):
        passed = diff <= atol + rtol * abs(expected) or (math.isnan(expected) and math.isnan(got))
    else:
        passed = got == expected
    return VerificationInfo(name, diff, diff / max(abs(float(expected)), 1e-12), True, True,
                            passed, (), tuple(actual.shape))


def _parameters_and_buffers(owner: torch.nn.Module) -> tuple[dict, ...]:
    return owner._parameters, owner._buffers


def _present(tensor: torch.Tensor | None) -> bool:
    return tensor is not None


@contextlib.contextmanager
def preserved_state(module: torch.nn.Module | None,
                    tables: Callable[[torch.nn.Module], tuple[dict, ...]] = _parameters_and_buffers,
                    kept: Callable[[torch.Tensor | None], bool] = _present):
    """Put the module's parameters and buffers back as they were after running it: the
    eager run of verification must not move a counter or a running statistic. ``tables``
    gives the tables of each submodule to keep, ``kept`` which of their tensors."""
    if module is None:
        yield
        return
    saved = []
    for owner in module.modules():
        for table in tables(owner):
            for key, tensor in table.items():
                if kept(tensor):
                    saved.append((table, key, tensor, tensor.detach().clone()))
    try:
        yield
    finally:
        with torch.no_grad():
            for table, key, tensor, copy in saved:
                table[key] = tensor  # in case the forward rebound it (self.count = ...)
                tensor.copy_(copy)  # (batch_norm's kernel moves its statistics unversioned)


@contextlib.contextmanager
def full_float32():
    """Run CUDA's float32 convolutions and matrix products in float32, not TF32: torch's
    default TF32 convolutions (10 bits of mantissa) put resnet50's outputs 0.19 away from
    float32 on an H200, so a reference computed with them would fail a correct export."""
    # cuDNN's flag through torch._C: torch.backends.cudnn refuses assignments once a test
    # harness called torch.backends.disable_global_flags().
    matmul = torch.backends.cuda.matmul
    saved = torch._C._get_cudnn_allow_tf32(), matmul.allow_tf32
    torch._C._set_cudnn_allow_tf32(False)
    matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch._C._set_cudnn_allow_tf32(saved[0])
        matmul.allow_tf32 = saved[1]


def eager_outputs(model: Any, args: tuple, kwargs: dict) -> list[Output]:
    """Run the model in PyTorch, leaving its state as it was, and flatten its outputs as the
    exporter does: tensors and numbers in order, None skipped (it is no ONNX output)."""
    from torch.export import ExportedProgram

    from onnxport.pytree_names import exported_leaves

    function = model.module() if isinstance(model, ExportedProgram) else model
    # The model may write into its inputs; ONNX Runtime must see them as they were given.
    args, kwargs = pytree.tree_map_only(torch.Tensor, torch.clone, (args, kwargs))
    module = function if isinstance(function, torch.nn.Module) else None
    with preserved_state(module), torch.no_grad(), full_float32():
        result = function(*args, **kwargs)
    return [leaf for leaf in exported_leaves(result)
            if isinstance(leaf, (torch.Tensor, bool, int, float))]


def run_in_onnx_runtime(program, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """``program(*args, **kwargs)``, with ONNX Runtime's refusal to load or run the model
    turned into a VerificationError: an exported model ORT rejects is a wrong export."""
    from onnxport.errors import InvalidExportOptionsError, VerificationError

    inputs = [leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
    # With export_params=False the weights are inputs too, after the model's own.
    graph = program.model.graph
    fed = [v.name for v in graph.inputs if v.name not in graph.initializers]
    weights = fed[len(inputs):]
    inputs += _weight_values(program, weights, given=len(inputs))
    try:
        return program(*inputs)
    except InvalidExportOptionsError as error:  # the inputs do not fit: the export is wrong
        raise VerificationError(f"cannot verify: {error}; the exported model's inputs do not "
                                "match the model's (please report it with the model)") from None
    except Exception as error:  # ORT's errors have no common base beyond RuntimeError/Exception
        message = _without_paths(str(error))
        raise VerificationError(
            f"ONNX Runtime refused the exported model: {type(error).__name__}: {message}\n"
            "The stage that failed is verify: the export is wrong (a translation produced "
            "what ONNX does not accept, see the node named above); please report it with "
            "the model") from None


def _weight_values(program, names: Sequence[str], given: int) -> list[torch.Tensor]:
    from onnxport.errors import VerificationError

    exported = program.exported_program
    values = {**exported.state_dict, **exported.constants} if exported is not None else {}
    missing = [name for name in names if not isinstance(values.get(name), torch.Tensor)]
    if missing:
        raise VerificationError(
            f"cannot verify: the ONNX model takes inputs {missing} beyond the "
            f"{given} given, and they are no weights of "
            "the exported program (please report it with the model)")
    return [values[name] for name in names]


def _without_paths(message: str) -> str:
    # The model is run from a temporary file; its path says nothing to the user.
    message = re.sub(r"Load model from \S+ failed:", "Loading the model failed:", message)
    return re.sub(r"(?:[A-Za-z]:)?[\\/][^\s'\"]*\.onnx\b", "<model>", message)


def tolerance_for(model: Any, args: tuple, kwargs: dict) -> tuple[float, float]:
    """(rtol, atol) for comparing ONNX Runtime on the CPU with eager where the model runs: on
    the CPU 1e-3 / 1e-4. An accelerator sums in another order (and its kernels differ), so
    there the outputs are compared at 1e-2 / 1e-3; eager runs without TF32 (full_float32)."""
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters())[:1]
    if all(t.device.type == "cpu" for t in tensors):
        return 1e-3, 1e-4
    return 1e-2, 1e-3


def verify_program(program, model: Any, args: tuple, kwargs: dict, *, rtol: float | None = None,
                   atol: float | None = None) -> list[VerificationInfo]:
    """Run ``program`` in ONNX Runtime and ``model`` in PyTorch on the same inputs; compare
    (at ``tolerance_for`` the model's device unless rtol and atol are given)."""
    device_rtol, device_atol = tolerance_for(model, args, kwargs)
    rtol = device_rtol if rtol is None else rtol
    atol = device_atol if atol is None else atol
    expected = eager_outputs(model, args, kwargs)
    names, actual = _flat(program.output_names, run_in_onnx_runtime(program, args, kwargs))
    return compare_outputs(names, expected, actual, rtol=rtol, atol=atol)


def _flat(names: Sequence[str], outputs: list) -> tuple[list[str], list]:
    """ONNX Runtime's outputs as eager_outputs gives PyTorch's: an empty optional (None) left
    out, a sequence (a list a scripted loop built) as its items, ``name[i]`` each."""
    if not any(output is None or isinstance(output, list) for output in outputs):
        return list(names), outputs
    flat_names, flat = [], []
    for k, output in enumerate(outputs):
        name = names[k] if k < len(names) else f"output {k}"
        if isinstance(output, list):
            flat_names += [f"{name}[{i}]" for i in range(len(output))]
            flat += output
        elif output is not None:
            flat_names.append(name)
            flat.append(output)
    return flat_names, flat


def format_report(results: Sequence[VerificationInfo]) -> str:
    lines = []
    for r in results:
        status = "ok" if r.passed else "MISMATCH"
        detail = f"max abs diff {r.max_abs_diff:.3g}, max rel diff {r.max_rel_diff:.3g}"
        if r.name == "<output count>":
            lines.append(f"  MISMATCH in the number of outputs: PyTorch gives "
                         f"{r.expected_shape[0]} (tensors and numbers, None left out), the "
                         f"ONNX model {r.actual_shape[0]}")
            continue
        if not r.shape_matches:
            detail = f"shape {r.actual_shape} != expected {r.expected_shape}"
        elif not r.dtype_matches:
            detail += " (dtype differs)"
        lines.append(f"  {r.name}: {status} ({detail})")
    return "\n".join(lines)
