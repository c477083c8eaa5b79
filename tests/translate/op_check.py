"""Shared helpers of the op tests: export with onnxport, run in ONNX Runtime, compare with eager.

``check`` is the one entry point: it returns the program so that a test can assert on the
graph's shape (``op_types(program)``) beside the numerics.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any, Callable, Iterable, Sequence

import pytest
import torch

import onnxport

RTOL = 1e-3
ATOL = 1e-4
# Both export paths, for tests that parametrize over them: @pytest.mark.parametrize("dynamo",
# BOTH_PATHS, ids=PATH_IDS).
BOTH_PATHS = [True, False]
PATH_IDS = ["dynamo", "torchscript"]
ALL_OPSETS = list(range(13, 24))


class FunctionModule(torch.nn.Module):
    """A plain function as a module, so that eager and export call the same thing."""

    def __init__(self, function: Callable):
        super().__init__()
        self.function = function

    def forward(self, *args, **kwargs):
        return self.function(*args, **kwargs)


def as_module(function: Callable) -> torch.nn.Module:
    """``function`` as a module whose forward has the function's parameters, so that
    dynamic_shapes / dynamic_axes can name them (``{"x": {0: Dim("batch")}}``)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # builtins such as torch.add have none
        return FunctionModule(function)

    class Module(FunctionModule):
        def forward(self, *args, **kwargs):
            return self.function(*args, **kwargs)

    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    Module.forward.__signature__ = signature.replace(
        parameters=[self_parameter, *signature.parameters.values()])
    return Module(function)


def _clone(value: Any) -> Any:
    return torch.utils._pytree.tree_map(
        lambda t: t.clone() if isinstance(t, torch.Tensor) else t, value)


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def assert_matches_eager(program, model, args: Sequence, kwargs: dict | None = None, *,
                         rtol: float = RTOL, atol: float = ATOL, check_dtype: bool = True) -> None:
    """ONNX Runtime's outputs for ``args`` equal eager's (values, shapes and dtypes)."""
    kwargs = kwargs or {}
    actual = program(*_clone(tuple(args)), **_clone(kwargs))
    with torch.no_grad():
        expected = _tensors(model(*_clone(tuple(args)), **_clone(kwargs)))
    assert len(actual) == len(expected), f"{len(actual)} outputs, eager has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, rtol=rtol, atol=atol, check_dtype=check_dtype,
                                   equal_nan=True, msg=lambda m, i=i: f"output {i}: {m}")


def check(model: torch.nn.Module | Callable, *args: Any, opset: int = 18,
          dynamic_shapes: Any = None, dynamic_axes: Any = None, input_names=None,
          run_with: Iterable[Sequence] = (), rtol: float = RTOL, atol: float = ATOL,
          check_dtype: bool = True, optimize: bool = True, dynamo: bool = True, **kwargs: Any):
    """Export ``model(*args, **kwargs)`` at ``opset``, compare ONNX Runtime with eager on the
    example inputs and on each tuple of ``run_with`` (other sizes, for dynamic shapes), and
    return the program. ``optimize=False`` keeps the graph as the op library made it;
    ``dynamo=False`` exports through the TorchScript path."""
    if not isinstance(model, torch.nn.Module):
        model = as_module(model)
    model.eval()
    program = onnxport.export(model, tuple(_clone(args)), kwargs=_clone(kwargs) or None,
                              opset_version=opset, dynamic_shapes=dynamic_shapes,
                              dynamic_axes=dynamic_axes, input_names=input_names,
                              optimize=optimize, dynamo=dynamo)
    assert_matches_eager(program, model, args, kwargs, rtol=rtol, atol=atol,
                         check_dtype=check_dtype)
    for other in run_with:
        assert_matches_eager(program, model, other, kwargs, rtol=rtol, atol=atol,
                             check_dtype=check_dtype)
    return program


def op_types(program) -> list[str]:
    """The op types of the program's main graph, in order."""
    return [node.op_type for node in program.model.graph]


def count(program, op_type: str) -> int:
    return op_types(program).count(op_type)


# -- OpInfo samples ----------------------------------------------------------------------------
def _ensure_expecttest() -> None:
    """torch's OpInfo database imports ``expecttest`` for its TestCase only; when the package
    is not installed, a stand-in with unittest's TestCase is enough to read the samples."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        import unittest

        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        stub.ACCEPT = False
        sys.modules["expecttest"] = stub


_OP_DB: dict[tuple[str, str], Any] | None = None


def opinfo(name: str, variant: str = ""):
    """The OpInfo of torch's ``op_db`` named ``name`` (and variant)."""
    global _OP_DB
    if _OP_DB is None:
        _ensure_expecttest()
        from torch.testing._internal.common_methods_invocations import op_db

        _OP_DB = {(o.name, o.variant_test_name): o for o in op_db}
    return _OP_DB[(name, variant)]


def has_opinfo(name: str, variant: str = "") -> bool:
    """Whether this torch's ``op_db`` has that OpInfo."""
    try:
        opinfo(name, variant)
    except KeyError:
        return False
    return True


class SampleModule(torch.nn.Module):
    """Calls an OpInfo's op on one sample, with the sample's tensors as the module's inputs and
    everything else (dims, scalars, flags) baked in."""

    def __init__(self, op: Callable, sample):
        super().__init__()
        self.op = op
        leaves, self.spec = torch.utils._pytree.tree_flatten(
            (sample.input, tuple(sample.args), dict(sample.kwargs)))
        self.positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
        self.leaves = [None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        self.inputs = tuple(leaves[i] for i in self.positions)

    def forward(self, *tensors):
        leaves = list(self.leaves)
        for position, tensor in zip(self.positions, tensors):
            leaves[position] = tensor
        input, args, kwargs = torch.utils._pytree.tree_unflatten(leaves, self.spec)
        return self.op(input, *args, **kwargs)


def describe(sample) -> str:
    def show(x):
        if isinstance(x, torch.Tensor):
            return f"T{list(x.shape)}:{str(x.dtype).replace('torch.', '')}"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(show(i) for i in x) + "]"
        return repr(x)

    kwargs = ", ".join(f"{k}={show(v)}" for k, v in sample.kwargs.items())
    return f"({show(sample.input)}, {', '.join(show(a) for a in sample.args)}{', ' if kwargs else ''}{kwargs})"


# -- the one side table of expected failures ----------------------------------------------------
# Case id -> why it fails. Case ids are OpInfo names ("addmm", "div.floor_rounding"), with a
# "[subset]" for samples that SAMPLE_SUBSETS sets apart, or a hand-written test's id.
EXPECTED_FAILURES: dict[str, str] = {
    "tensor_split[0-d tensor sections]":
        "the number of outputs would depend on the 0-d tensor's value: capture refuses it "
        "(capture/data_dependent.py)",
    "nn.functional.batch_norm[1-d input]":
        "a 1-d input has no channel axis; ONNX BatchNormalization needs [N, C, ...]",
    # shape
    "view.dtype": "reinterpreting a tensor's bytes as another dtype has no ONNX form "
                  "(translation raises NotImplementedError by design)",
    "view_as_real": "its samples' inputs are complex tensors, which a graph input cannot be "
                    "(complex intermediates, e.g. of torch.fft, are translated)",
    "aten::_shape_as_tensor": "torch.export cannot trace aten::_shape_as_tensor (its fake "
                              "kernel reads data that is not allocated)",
}

# Samples of an op set apart as their own case "op[subset]" (expected to fail, above).
SAMPLE_SUBSETS: dict[str, dict[str, Callable]] = {
    "addmm": {"empty inner dimension": lambda s: s.args[0].shape[-1] == 0},
    "narrow": {"tensor start": lambda s: isinstance(s.args[1], torch.Tensor)},
    "tensor_split": {"0-d tensor sections": lambda s: isinstance(s.args[0], torch.Tensor)
                     and s.args[0].dim() == 0},
    "nn.functional.embedding": {"max_norm": lambda s: s.kwargs.get("max_norm") is not None},
    "nn.functional.batch_norm": {"1-d input": lambda s: s.input.dim() == 1},
}

def _empty_batch_before_ort_1_32(sample) -> bool:
    from onnxport._versions import onnxruntime_at_least

    return sample.input.numel() == 0 and not onnxruntime_at_least("1.32")


_OLD_ORT_EMPTY_BATCH = (
    _empty_batch_before_ort_1_32,
    "ONNX Runtime before 1.32 runs an empty batch wrongly (the Jacobi sweeps' Loop: 1.31 "
    "returns [0, n, n] for [0, n], 1.30 dies of a floating point exception; inv_ex's Equal "
    "refuses to broadcast it): not run there")

# Samples that are never compared with eager: they are not failures, eager's result is random
# (or the runtime of the oldest supported versions cannot run them at all).
NOT_COMPARABLE: dict[str, tuple[Callable, str]] = {
    "linalg.eigvalsh": _OLD_ORT_EMPTY_BATCH,
    "linalg.pinv": _OLD_ORT_EMPTY_BATCH,
    "pinverse": _OLD_ORT_EMPTY_BATCH,
    "linalg.inv_ex": _OLD_ORT_EMPTY_BATCH,
    "nn.functional.scaled_dot_product_attention": (
        lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
        "dropout_p > 0 is random in eager; an exported graph is an inference graph"),
    "cumsum": (lambda s: s.kwargs.get("dtype") == torch.bool,
               "eager has no bool cumsum kernel on CPU (\"cumsum_out_cpu\" not implemented)"),
    "as_strided": (lambda s: s.kwargs.get("storage_offset", 0) >= s.input.numel(),
                   "the sample's input is a view into a larger storage and reads past its own "
                   "elements; a graph input is a tensor of its own, on which eager fails too "
                   "('out of bounds for storage')"),
}


def opinfo_id(name: str, variant: str = "", dtype: torch.dtype = torch.float32) -> str:
    base = f"{name}.{variant}" if variant else name
    return base if dtype == torch.float32 else f"{base}@{str(dtype).replace('torch.', '')}"


def opinfo_cases(ops: Iterable) -> list:
    """pytest params for OpInfo ops given as "name", "name:variant" or (that, dtype); each op
    is one case, and each of its SAMPLE_SUBSETS another, marked from EXPECTED_FAILURES."""
    params = []
    for op in ops:
        spec, dtype = (op, torch.float32) if isinstance(op, str) else op
        name, _, variant = spec.partition(":")
        case_id = opinfo_id(name, variant, dtype)
        subsets = [None] + list(SAMPLE_SUBSETS.get(name, {}))
        for subset in subsets:
            full_id = case_id if subset is None else f"{case_id}[{subset}]"
            key = full_id.replace(case_id, opinfo_id(name, variant), 1)
            reason = EXPECTED_FAILURES.get(full_id) or EXPECTED_FAILURES.get(key)
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            if not has_opinfo(name, variant):
                # An op newer than this torch (the oldest supported lacks a few).
                marks = [pytest.mark.skip(reason=f"torch {torch.__version__} has no OpInfo "
                                                 f"{name!r} {variant!r}")]
            params.append(pytest.param(name, variant, dtype, subset, marks=marks, id=full_id))
    return params


def check_opinfo(name: str, variant: str = "", dtype: torch.dtype = torch.float32,
                 subset: str | None = None, *, limit: int = 4, opset: int = 18,
                 rtol: float = RTOL, atol: float = ATOL) -> int:
    """Export, run and compare the first ``limit`` OpInfo samples of an op (those of
    ``subset`` when given, else those of no subset); fail once, listing every failing sample.
    Returns the number of samples checked."""
    info = opinfo(name, variant)
    subsets = SAMPLE_SUBSETS.get(name, {})
    not_comparable = NOT_COMPARABLE.get(name, (lambda s: False, ""))[0]
    failures = []
    checked = 0
    torch.manual_seed(0)
    for sample in info.sample_inputs("cpu", dtype):
        if checked >= limit:
            break
        if not_comparable(sample):
            continue
        if subset is not None:
            if not subsets[subset](sample):
                continue
        elif any(belongs(sample) for belongs in subsets.values()):
            continue
        checked += 1
        module = SampleModule(info.op, sample)
        try:
            check(module, *module.inputs, opset=opset, rtol=rtol, atol=atol)
        except Exception as error:  # collect every failing sample before failing
            text = str(error).strip().splitlines()
            failures.append(f"{describe(sample)}: {type(error).__name__}: "
                            f"{' | '.join(text[:4])}")
    assert checked, f"no samples of {opinfo_id(name, variant, dtype)} {subset or ''}"
    if failures:
        pytest.fail(f"{opinfo_id(name, variant, dtype)}: {len(failures)} of {checked} samples "
                    "failed:\n" + "\n".join(failures), pytrace=False)
    return checked


# Hand-written cases that an ONNX Runtime older than the version given computes wrongly (its
# kernel, not the file): strict expected failures there, run as usual on newer ones.
OLD_RUNTIME_FAILURES = {
    "sort with nan": ("1.32", "ONNX Runtime before 1.32 sorts NaN among the numbers (TopK)"),
}


def cases(table: dict[str, Any]) -> list:
    """pytest params of hand-written cases ``{id: case}``, those in EXPECTED_FAILURES (or
    OLD_RUNTIME_FAILURES, on such a runtime) marked as strict expected failures."""
    from onnxport._versions import onnxruntime_at_least

    params = []
    for case_id, case in table.items():
        reason = EXPECTED_FAILURES.get(case_id)
        if case_id in OLD_RUNTIME_FAILURES and not onnxruntime_at_least(
                OLD_RUNTIME_FAILURES[case_id][0]):
            reason = OLD_RUNTIME_FAILURES[case_id][1]
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        params.append(pytest.param(case, marks=marks, id=case_id))
    return params
