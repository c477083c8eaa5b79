"""``dynamic_axes`` (the TorchScript-era form) and ``dynamic_shapes`` (torch.export's form),
turned into what torch.export takes plus the ONNX names of the dynamic dimensions."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import torch

from onnxport.errors import InvalidExportOptionsError


@dataclasses.dataclass
class DynamicSpec:
    dynamic_shapes: Any  # for torch.export
    dim_names: dict[tuple[int, int], str]  # (tensor input position, axis) -> ONNX dim name
    output_dim_names: dict[str, dict[int, str]]


def tensor_input_slots(args: tuple, kwargs: dict, parameter_names: Sequence[str]) -> list[tuple[str, int]]:
    """For each tensor input in order: (the forward parameter it belongs to, its position)."""
    slots = []
    names = list(parameter_names)
    for i, arg in enumerate(args):
        name = names[i] if i < len(names) else f"arg{i}"
        if isinstance(arg, torch.Tensor):
            slots.append((name, i))
    for key in kwargs:
        if isinstance(kwargs[key], torch.Tensor):
            slots.append((key, -1))
    return slots


def resolve_dynamic(
    args: tuple,
    kwargs: dict,
    parameter_names: Sequence[str],
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    dynamic_axes: Mapping[str, Any] | None,
    dynamic_shapes: Any,
) -> DynamicSpec:
    if dynamic_axes and dynamic_shapes is not None:
        raise InvalidExportOptionsError(
            "dynamic_axes and dynamic_shapes were both given; pass only one of them "
            "(dynamic_shapes is torch.export's form, dynamic_axes the older one)"
        )
    if dynamic_shapes is not None:
        return DynamicSpec(dynamic_shapes, _names_from_dynamic_shapes(
            dynamic_shapes, args, kwargs, parameter_names), {})
    if not dynamic_axes:
        return DynamicSpec(None, {}, {})
    if not isinstance(dynamic_axes, Mapping):
        raise InvalidExportOptionsError(
            f"dynamic_axes must be a dict {{input or output name: {{axis: name}} or [axes]}}, "
            f"got {type(dynamic_axes).__name__}"
        )
    slots = tensor_input_slots(args, kwargs, parameter_names)
    onnx_names = list(input_names or [])
    onnx_names += [name for name, _ in slots[len(onnx_names):]]
    by_name = {name: k for k, name in enumerate(onnx_names)}
    outputs = set(output_names or [])
    dim_names: dict[tuple[int, int], str] = {}
    output_dim_names: dict[str, dict[int, str]] = {}
    per_input: dict[int, dict[int, Any]] = {}
    for name, axes in dynamic_axes.items():
        named = _axis_names(name, axes)
        if name in by_name:
            k = by_name[name]
            tensor = _tensor_at(args, kwargs, slots[k])
            for axis, dim_name in named.items():
                if not -tensor.dim() <= axis < tensor.dim():
                    raise InvalidExportOptionsError(
                        f"dynamic_axes[{name!r}] names axis {axis}, but input {name!r} has "
                        f"{tensor.dim()} dimensions (shape {tuple(tensor.shape)})"
                    )
                axis = axis % tensor.dim()
                dim_names[(k, axis)] = dim_name
                per_input.setdefault(k, {})[axis] = torch.export.Dim.DYNAMIC
        elif name in outputs or output_names is None:
            output_dim_names[name] = named
        else:
            raise InvalidExportOptionsError(
                f"dynamic_axes names {name!r}, which is neither an input "
                f"({', '.join(onnx_names) or 'none'}) nor an output "
                f"({', '.join(outputs) or 'no output_names given'}); use those names"
            )
    shapes = _shapes_for_torch_export(args, kwargs, slots, per_input, parameter_names)
    return DynamicSpec(shapes, dim_names, output_dim_names)


def _axis_names(name: str, axes: Any) -> dict[int, str]:
    if isinstance(axes, Mapping):
        result = {}
        for axis, dim_name in axes.items():
            if not isinstance(axis, int):
                raise InvalidExportOptionsError(
                    f"dynamic_axes[{name!r}] has axis {axis!r}; axes are ints")
            result[axis] = str(dim_name)
        return result
    if isinstance(axes, (list, tuple)):
        if not all(isinstance(a, int) for a in axes):
            raise InvalidExportOptionsError(f"dynamic_axes[{name!r}] must list int axes, got {axes!r}")
        return {axis: f"{name}_dynamic_axes_{i + 1}" for i, axis in enumerate(axes)}
    raise InvalidExportOptionsError(
        f"dynamic_axes[{name!r}] must be a dict {{axis: name}} or a list of axes, got {axes!r}")


def _tensor_at(args, kwargs, slot):
    name, position = slot
    return args[position] if position >= 0 else kwargs[name]


def _shapes_for_torch_export(args, kwargs, slots, per_input, parameter_names):
    names = list(parameter_names)
    shapes: dict[str, Any] = {}
    for k, (name, position) in enumerate(slots):
        spec = per_input.get(k)
        key = name if position < 0 or position < len(names) else None
        if key is None:
            raise InvalidExportOptionsError(
                "dynamic_axes on inputs passed as *args is not supported; use dynamic_shapes")
        shapes[key] = spec
    for i, arg in enumerate(args):
        if i < len(names) and names[i] not in shapes:
            shapes[names[i]] = None
    for key in kwargs:
        shapes.setdefault(key, None)
    return shapes


def _names_from_dynamic_shapes(dynamic_shapes, args, kwargs, parameter_names):
    """Dim names given in torch.export's form ({"x": {0: Dim("batch")}}) as ONNX dim names."""
    slots = tensor_input_slots(args, kwargs, parameter_names)
    if isinstance(dynamic_shapes, Mapping):
        per_slot = [dynamic_shapes.get(name) for name, _ in slots]
    elif isinstance(dynamic_shapes, (list, tuple)):
        specs = list(dynamic_shapes)
        per_slot = []
        for name, position in slots:
            per_slot.append(specs[position] if 0 <= position < len(specs) else None)
    else:
        raise InvalidExportOptionsError(
            f"dynamic_shapes must be a dict or a tuple, got {type(dynamic_shapes).__name__}")
    names: dict[tuple[int, int], str] = {}
    for k, spec in enumerate(per_slot):
        if isinstance(spec, Mapping):
            items = spec.items()
        elif isinstance(spec, (list, tuple)):
            items = enumerate(spec)
        else:
            continue
        for axis, dim in items:
            dim_name = getattr(dim, "__name__", None)
            if isinstance(dim_name, str) and not dim_name.startswith("DimHint"):
                names[(k, axis)] = dim_name
            elif isinstance(dim, str):
                names[(k, axis)] = dim
    return names
