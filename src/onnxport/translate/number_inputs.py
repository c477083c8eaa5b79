"""The graph inputs that positional number arguments (int, float, bool) become, as torch.onnx's
TorchScript exporter makes them: a 0-d int64, double or bool input in its place among the
tensors, named by ``input_names`` in turn. The capture computed with the example's value, so
the input is kept for the calling convention (code that feeds every argument by position) and
read by no node (the pipeline warns). Keyword numbers (a transformers model's
``use_cache=False``) are settings of the call and no input."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import onnx_ir as ir
import torch
import torch.utils._pytree as pytree

_DTYPES = {bool: ir.DataType.BOOL, int: ir.DataType.INT64, float: ir.DataType.DOUBLE}
_TORCH_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64}


@dataclasses.dataclass(frozen=True)
class NumberInput:
    position: int  # among the model's inputs, tensors and numbers, in flat order
    name: str
    value: bool | int | float


@dataclasses.dataclass(frozen=True)
class NumberArguments:
    """A call's number arguments, and the count of its inputs, tensors and numbers."""

    numbers: tuple[NumberInput, ...] = ()
    input_count: int = 0


def input_leaves(args: tuple, kwargs: dict) -> list[Any]:
    """The leaves that are inputs, in flat order: the tensors and the positional numbers
    (None and strings are no input under the TorchScript exporter's rules either)."""
    return [leaf for leaf in pytree.tree_leaves(args) if leaf is not None
            and not isinstance(leaf, str)] + \
        [leaf for leaf in pytree.tree_leaves(kwargs) if isinstance(leaf, torch.Tensor)]


def is_number(leaf: Any) -> bool:
    """An int, float or bool (not a subclass such as an IntEnum: no input dtype fits it)."""
    return type(leaf) in _DTYPES


def as_tensor(number: bool | int | float) -> torch.Tensor:
    """A number as the 0-d tensor its graph input takes (int64, double or bool)."""
    return torch.tensor(number, dtype=_TORCH_DTYPES[type(number)])


def number_arguments(args: tuple, kwargs: dict, parameter_names: Sequence[str],
                     input_names: Sequence[str] | None) -> NumberArguments:
    """The positional number arguments of a call, each with its position and name:
    ``input_names`` in flat order where it reaches, else the forward parameter's name (``y``,
    or ``y_1`` for the second leaf of a list argument)."""
    found = []
    position = 0
    for index, arg in enumerate(args):
        parameter = parameter_names[index] if index < len(parameter_names) else f"input_{index}"
        leaves = input_leaves((arg,), {})
        for k, leaf in enumerate(leaves):
            if is_number(leaf):
                default = parameter if leaf is arg else f"{parameter}_{k}"
                name = input_names[position] if input_names and position < len(input_names) \
                    else default
                found.append(NumberInput(position, name, leaf))
            position += 1
    return NumberArguments(tuple(found), position + len(input_leaves((), kwargs)))


def feeds(tensors: list[torch.Tensor], args: tuple, kwargs: dict,
          numbers: Sequence[NumberInput], count: int) -> list[torch.Tensor]:
    """What a model of ``count`` inputs, ``numbers`` among them, is fed for a call whose
    ``tensors`` (flat, as the graph takes them) are given: the call's numbers in their places,
    or, where the call gives only the tensors, the example's (the graph reads neither)."""
    if not numbers or len(tensors) == count:
        return tensors
    fed = list(tensors)
    if len(tensors) + len(numbers) == count:
        given = [leaf for leaf in input_leaves(args, {}) if is_number(leaf)]
        values = given if len(given) == len(numbers) else [n.value for n in numbers]
        for number, value in zip(numbers, values):
            fed.insert(number.position, as_tensor(value))
    return fed


def add_number_inputs(model: ir.Model, arguments: NumberArguments,
                      user_inputs: Sequence[str]) -> list[NumberInput]:
    """Insert the numbers among the graph's first ``len(user_inputs)`` inputs (the tensors', in
    flat order) and return those inserted, with the names they took. Nothing is inserted when
    the graph takes some other count of inputs than the tensors the numbers sit among."""
    numbers = arguments.numbers
    if not numbers or len(user_inputs) + len(numbers) != arguments.input_count:
        return []
    graph = model.graph
    taken = _value_names(graph)
    inserted = []
    for number in sorted(numbers, key=lambda n: n.position):
        name = unique_name(number.name, taken)
        value = ir.Value(name=name, type=ir.TensorType(_DTYPES[type(number.value)]),
                         shape=ir.Shape([]))
        graph.inputs.insert(number.position, value)
        inserted.append(dataclasses.replace(number, name=name))
    return inserted


def _value_names(graph: ir.Graph) -> set[str]:
    names = {v.name for v in graph.inputs} | set(graph.initializers)
    for node in ir.traversal.RecursiveGraphIterator(graph):
        names.update(v.name for v in node.outputs if v.name)
    return names


def unique_name(name: str, taken: set[str]) -> str:
    candidate, k = name, 1
    while candidate in taken:
        candidate = f"{name}_{k}"
        k += 1
    taken.add(candidate)
    return candidate
