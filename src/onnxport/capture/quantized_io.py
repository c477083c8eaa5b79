"""Quantized tensors as a model's inputs and outputs, in torch.onnx's form: each is three ONNX
values, its integers, its scale and its zero point (torch.onnx's unpack_quantized_tensor: a
double scale and an int64 zero point going in; a float scale and a zero point of the integers'
dtype coming out).

The export runs a wrapper that takes the three values of each quantized input. Captured, it
dequantizes them (DequantizeLinear) for the quantized modules' reference forms
(quirks/quantized_modules.py), and quantizes each quantized output again on its own grid: the
input's scale and zero point where the output kept them (a ReLU, a flatten), else the
module's, as eager gave them. Run eagerly (verification), it calls the user's model on
quantized tensors made from the values.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Mapping

import torch
import torch.utils._pytree as pytree

from onnxport.capture.quirks.quantized_modules import INTEGER_RANGES as _INTEGERS
from onnxport.errors import InvalidExportOptionsError


def is_quantized(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_quantized


def unpacked(tensor: torch.Tensor, going_in: bool = True) -> tuple[torch.Tensor, ...]:
    """A per-tensor quantized tensor as (integers, scale, zero point); other tensors as they
    are. ``going_in``: a model input's (double scale, int64 zero point), else an output's."""
    if not is_quantized(tensor):
        return (tensor,)
    _check_per_tensor(tensor)
    integers = tensor.int_repr()
    scale = torch.tensor(tensor.q_scale(), dtype=torch.float64 if going_in else torch.float32)
    zero_point = torch.tensor(tensor.q_zero_point(),
                              dtype=torch.int64 if going_in else integers.dtype)
    return integers, scale, zero_point


def flat_tensors(values: Any, going_in: bool = True) -> list[torch.Tensor]:
    """The tensors of ``values`` (a pytree) in order, each quantized one as its three."""
    return [part for leaf in pytree.tree_leaves(values) if isinstance(leaf, torch.Tensor)
            for part in unpacked(leaf, going_in)]


def _check_per_tensor(tensor: torch.Tensor) -> None:
    if tensor.qscheme() not in (torch.per_tensor_affine, torch.per_tensor_symmetric) or \
            tensor.dtype not in _INTEGERS:
        raise InvalidExportOptionsError(
            f"a quantized tensor of {tensor.dtype} with {tensor.qscheme()} given to or returned "
            "by the model: only per-tensor quantized tensors (quint8, qint8, qint32) have "
            "torch.onnx's ONNX form (integers, scale, zero point). Dequantize it, or quantize "
            "per tensor")


class QuantizedIO(torch.nn.Module):
    """``model`` taking each quantized input as its three values and returning each quantized
    output as its three (see the module's docstring)."""

    def __init__(self, model: torch.nn.Module, args: tuple, kwargs: dict):
        super().__init__()
        self.model = model
        leaves, self.spec = pytree.tree_flatten((args, kwargs))
        # Per leaf: None (kept as it is), or its quantized dtype; and its grid.
        self.kinds, grids = [], []
        for leaf in leaves:
            quantized = is_quantized(leaf)
            if quantized:
                _check_per_tensor(leaf)
            self.kinds.append(leaf.dtype if quantized else None)
            grids.append((leaf.q_scale(), leaf.q_zero_point()) if quantized else None)
        with torch.no_grad():
            outputs = model(*args, **kwargs)
        self.outputs = []  # per output leaf: None, or (dtype, the input leaf it keeps the grid of)
        for k, leaf in enumerate(pytree.tree_leaves(outputs)):
            if not is_quantized(leaf):
                self.outputs.append(None)
                continue
            _check_per_tensor(leaf)
            grid = (leaf.q_scale(), leaf.q_zero_point())
            source = grids.index(grid) if grid in grids else None
            self.outputs.append((leaf.dtype, source))
            if source is None:
                self.register_buffer(f"output{k}_scale",
                                     torch.tensor(grid[0], dtype=torch.float32))
                self.register_buffer(f"output{k}_zero_point",
                                     torch.tensor(grid[1], dtype=_INTEGERS[leaf.dtype][0]))

    def forward(self, *flat):
        from onnxport.capture.quirks.quantized_modules import decomposed_ops, is_quantized_module

        eager = any(is_quantized_module(m) for m in self.model.modules())
        flat, leaves, inputs = list(flat), [], {}
        for position, kind in enumerate(self.kinds):
            if kind is None:
                leaves.append(flat.pop(0))
                continue
            integers, scale, zero_point = flat[:3]
            del flat[:3]
            inputs[position] = (scale, zero_point)
            integer, low, high = _INTEGERS[kind]
            leaves.append(torch._make_per_tensor_quantized_tensor(
                integers, float(scale), int(zero_point)) if eager else
                decomposed_ops().dequantize_per_tensor.tensor(
                    integers, scale, zero_point, low, high, integer))
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        with contextlib.nullcontext() if eager else _quantized_ops_on_floats():
            results = pytree.tree_leaves(self.model(*args, **kwargs))
        if eager:
            return tuple(part for leaf in results for part in unpacked(leaf, going_in=False))
        return tuple(part for k, leaf in enumerate(results)
                     for part in self._quantized(k, leaf, inputs))

    def _quantized(self, k: int, leaf: Any, inputs: dict) -> tuple:
        from onnxport.capture.quirks.quantized_modules import decomposed_ops

        if k >= len(self.outputs) or self.outputs[k] is None:
            return (leaf,)
        kind, source = self.outputs[k]
        integer, low, high = _INTEGERS[kind]
        if source is None:
            scale, zero_point = (getattr(self, f"output{k}_scale"),
                                 getattr(self, f"output{k}_zero_point"))
            wide = zero_point.to(torch.int64)
        else:
            wide = inputs[source][1]
            scale, zero_point = inputs[source][0].float(), wide.to(integer)
        integers = decomposed_ops().quantize_per_tensor.tensor(leaf, scale.double(), wide, low, high,
                                                            integer)
        return integers, scale.clone(), zero_point.clone()  # (an output, not a buffer)


def _on_grid(function):
    """A torch.ops.quantized op on dequantized floats: the float op, rounded to the grid of
    the scale and zero point it takes last."""
    from onnxport.capture.quirks.quantized_modules import requantize

    def on_floats(*args):
        *operands, scale, zero_point = args
        return requantize(function(*operands), float(scale), int(zero_point))

    return on_floats


# torch.ops.quantized's ops that a model may call on its quantized inputs.
_QUANTIZED_OPS = {
    "add": _on_grid(torch.add), "mul": _on_grid(torch.mul), "cat": _on_grid(torch.cat),
    "add_relu": _on_grid(lambda a, b: torch.relu(a + b)),
    "mul_relu": _on_grid(lambda a, b: torch.relu(a * b)),
}


_FUNCTIONAL_METHODS = ("add", "add_relu", "mul", "add_scalar", "mul_scalar", "cat")


@contextlib.contextmanager
def _quantized_ops_on_floats():
    """torch.ops.quantized's add, mul, cat..., and those of a QFunctional the model makes
    itself (one that is a submodule is swapped already), taking the dequantized floats the
    captured graph holds (each rounds its result to the grid it is given)."""
    import torch.ao.nn.quantized as nnq

    from onnxport.capture.quirks.quantized_modules import FunctionalReference

    namespace = torch.ops.quantized
    saved = {name: namespace.__dict__.get(name) for name in _QUANTIZED_OPS}
    methods = {name: getattr(nnq.QFunctional, name) for name in _FUNCTIONAL_METHODS}
    try:
        for name, function in _QUANTIZED_OPS.items():
            setattr(namespace, name, function)
        for name in _FUNCTIONAL_METHODS:
            setattr(nnq.QFunctional, name, lambda self, *args, name=name, **kwargs: getattr(
                FunctionalReference(self), name)(*args, **kwargs))
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(namespace, name)
            else:
                setattr(namespace, name, value)
        for name, method in methods.items():
            setattr(nnq.QFunctional, name, method)


def with_quantized_io(model: Any, args: tuple, kwargs: dict, options: Mapping[str, Any],
                      ) -> tuple[Any, tuple, dict, Mapping[str, Any]]:
    """``model``, its arguments and ``options`` (input_names, dynamic_axes) for quantized
    inputs in torch.onnx's form, or all as they are when no input is a quantized tensor (or
    the model is no module: an ExportedProgram)."""
    from onnxport.capture import parameter_names

    leaves = pytree.tree_leaves((args, kwargs))
    if not any(is_quantized(leaf) for leaf in leaves) or not isinstance(model, torch.nn.Module):
        return model, args, kwargs, options
    names = parameter_names(model)
    wrapper = QuantizedIO(model, args, kwargs)
    flat = tuple(part for leaf in leaves for part in unpacked(leaf))
    given = list(options.get("input_names") or [])
    tensor_names = iter(given or names)
    new_names, renamed = [], {}
    for k, leaf in enumerate(leaf for leaf in leaves if isinstance(leaf, torch.Tensor)):
        name = next(tensor_names, None) or f"input_{k}"
        if not is_quantized(leaf):
            new_names.append(name)
            continue
        first = name if given else f"{name}_value"
        new_names += [first, f"{name}_scale", f"{name}_zero_point"]
        renamed[name] = first
    wrapper.__class__ = _named(new_names)
    options = dict(options)
    options["input_names"] = new_names if given else None
    axes = options.get("dynamic_axes")
    if isinstance(axes, dict):
        options["dynamic_axes"] = {renamed.get(key, key): value for key, value in axes.items()}
    return wrapper, flat, {}, options


def _named(names: list[str]) -> type:
    """A QuantizedIO whose forward's signature names each flat input (the ONNX inputs'
    names come from it)."""
    def forward(self, *flat):
        return QuantizedIO.forward(self, *flat)

    forward.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for name in ["self", *names]])
    return type("QuantizedIO", (QuantizedIO,), {"forward": forward})
