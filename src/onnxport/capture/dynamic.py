"""``dynamic_axes`` (the TorchScript-era form) and ``dynamic_shapes`` (torch.export's form),
turned into what torch.export takes plus the ONNX names of the dynamic dimensions."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

from onnxport import hf_cache
from onnxport.pytree_names import tensor_leaves
from onnxport.errors import InvalidExportOptionsError


@dataclasses.dataclass
class DynamicSpec:
    dynamic_shapes: Any  # for torch.export
    dim_names: dict[tuple[int, int], str]  # (tensor input position, axis) -> ONNX dim name
    output_dim_names: dict[str, dict[int, str]]


@dataclasses.dataclass(frozen=True)
class InputSlot:
    """One tensor input of the graph: a top-level argument, or a tensor nested in one (a list,
    a dict, a KV cache), in the order torch.export makes them graph inputs."""

    name: str  # its default ONNX name: the parameter's, or "parameter.path.in.it" when nested
    parameter: str  # the forward parameter it is (in)
    position: int  # that parameter's position in args, or -1 for kwargs
    path: tuple[str, ...]  # where it is inside the parameter's value; () for a tensor argument
    tensor: torch.Tensor


def tensor_input_slots(args: tuple, kwargs: dict,
                       parameter_names: Sequence[str]) -> list[InputSlot]:
    """Every tensor input, nested ones included, in order."""
    hf_cache.register_if_loaded()  # so that a KV cache given as input flattens to its tensors
    names = list(parameter_names)
    top_level = [(names[i] if i < len(names) else f"arg{i}", i, arg) for i, arg in enumerate(args)]
    top_level += [(key, -1, value) for key, value in kwargs.items()]
    slots = []
    for parameter, position, value in top_level:
        root = hf_cache.input_name_root(parameter, value)
        for path, tensor in tensor_leaves(value):
            name = ".".join([root, *path])
            slots.append(InputSlot(name, parameter, position, tuple(path), tensor))
    return slots


def onnx_input_names(given: Sequence[str] | None, defaults: Sequence[str]) -> list[str]:
    """The ONNX names of the inputs: those ``input_names`` gives, then the defaults (the
    parameters' names) of the rest. A default that a given name already took gets a suffix
    (``input_names=["y"]`` for ``forward(x, y)`` names them y and y_1; ONNX wants each value
    named once)."""
    names = list(given or [])
    taken = set(names)
    for name in defaults[len(names):]:
        unique, k = name, 0
        while unique in taken:
            k += 1
            unique = f"{name}_{k}"
        names.append(unique)
        taken.add(unique)
    return names


def resolve_dynamic(
    args: tuple,
    kwargs: dict,
    parameter_names: Sequence[str],
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    dynamic_axes: Mapping[str, Any] | None,
    dynamic_shapes: Any,
    var_positional: tuple[str, int] | None = None,
) -> DynamicSpec:
    """``var_positional``: the forward's ``*args`` parameter and its position, when it has one
    (torch.export takes the specs of the arguments it gathers as one tuple under its name)."""
    if dynamic_axes and dynamic_shapes is not None:
        raise InvalidExportOptionsError(
            "dynamic_axes and dynamic_shapes were both given; pass only one of them "
            "(dynamic_shapes is torch.export's form, dynamic_axes the older one)"
        )
    if dynamic_shapes is not None:
        dynamic_shapes = _keyed_by_argument(dynamic_shapes, args, kwargs, parameter_names,
                                            input_names)
        dynamic_shapes = checked_dynamic_shapes(dynamic_shapes, args, kwargs, parameter_names)
        names = _names_from_dynamic_shapes(dynamic_shapes, args, kwargs, parameter_names)
        # torch.export takes no strings; a named dim is a dynamic one that ONNX calls so.
        shapes = map_dims(dynamic_shapes, args, kwargs, parameter_names,
                          lambda k, axis, dim: Dim.DYNAMIC if isinstance(dim, str) else dim)
        return DynamicSpec(shapes, names, {})
    if not dynamic_axes:
        return DynamicSpec(None, {}, {})
    if not isinstance(dynamic_axes, Mapping):
        raise InvalidExportOptionsError(
            f"dynamic_axes must be a dict {{input or output name: {{axis: name}} or [axes]}}, "
            f"got {type(dynamic_axes).__name__}"
        )
    slots = tensor_input_slots(args, kwargs, parameter_names)
    onnx_names = onnx_input_names(input_names, [slot.name for slot in slots])
    by_name = {name: k for k, name in enumerate(onnx_names)}
    dim_names: dict[tuple[int, int], str] = {}
    output_dim_names: dict[str, dict[int, str]] = {}
    per_input: dict[int, dict[int, Any]] = {}
    for name, axes in dynamic_axes.items():
        named = _axis_names(name, axes)
        if name in by_name:
            k = by_name[name]
            tensor = slots[k].tensor
            for axis, dim_name in named.items():
                if not -tensor.dim() <= axis < tensor.dim():
                    raise InvalidExportOptionsError(
                        f"dynamic_axes[{name!r}] names axis {axis}, but input {name!r} has "
                        f"{tensor.dim()} dimensions (shape {tuple(tensor.shape)})"
                    )
                axis = axis % tensor.dim()
                dim_names[(k, axis)] = dim_name
                per_input.setdefault(k, {})[axis] = torch.export.Dim.DYNAMIC
        else:
            # An output, or a name of neither: one dict is often passed to several variants of
            # a model (a seq_lengths key when it is called without lengths), so such a key is
            # left out with a warning once the outputs are known, as torch.onnx does.
            output_dim_names[name] = named
    shapes = _shapes_for_torch_export(args, kwargs, slots, per_input, parameter_names,
                                      var_positional)
    return DynamicSpec(shapes, dim_names, output_dim_names)


def _top_level(args: tuple, kwargs: dict, parameter_names: Sequence[str]) -> list[tuple]:
    """(name, position in args or -1, value, index in a tuple-form dynamic_shapes) of each
    argument. A tuple covers the keyword arguments too, after the positional ones and in the
    forward's parameter order, as torch.export binds them."""
    names = list(parameter_names)
    top_level = [(names[i] if i < len(names) else f"arg{i}", i, arg, i)
                 for i, arg in enumerate(args)]
    order = {name: k for k, name in enumerate(names)}
    by_signature = sorted(kwargs, key=lambda key: order.get(key, len(names)))
    top_level += [(key, -1, kwargs[key], len(args) + by_signature.index(key)) for key in kwargs]
    return top_level


def _keyed_by_argument(dynamic_shapes, args, kwargs, parameter_names, input_names):
    """A dict keyed by ``input_names`` (as torch.onnx takes it) in the tuple form: the names
    are the tensors' ONNX names, in argument order, not the forward's parameter names."""
    if not isinstance(dynamic_shapes, Mapping) or not input_names:
        return dynamic_shapes
    top_level = _top_level(args, kwargs, parameter_names)
    arguments = {name for name, *_ in top_level}
    if all(key in arguments for key in dynamic_shapes) or \
            not all(key in input_names for key in dynamic_shapes):
        return dynamic_shapes
    if not all(isinstance(value, torch.Tensor) for _, _, value, _ in top_level):
        raise InvalidExportOptionsError(
            f"dynamic_shapes is keyed by input_names ({', '.join(map(repr, dynamic_shapes))}), "
            "but some inputs are not single tensors, so input_names do not say which argument "
            f"each is; key it by the forward's parameter names "
            f"({', '.join(name for name, *_ in top_level)}) or give a tuple in argument order")
    return tuple(dynamic_shapes.get(input_names[k]) if k < len(input_names) else None
                 for k in range(len(top_level)))


def checked_dynamic_shapes(dynamic_shapes: Any, args: tuple, kwargs: dict,
                           parameter_names: Sequence[str]) -> Any:
    """``dynamic_shapes`` checked against the inputs, with a clear error for what torch.export
    would refuse with its own words (or take wrongly), and normalized: negative axes counted
    from the front, a short tuple padded with None (static)."""
    hf_cache.register_if_loaded()  # a KV cache is a container of tensors, not a leaf
    top_level = _top_level(args, kwargs, parameter_names)
    accepted = ("a dim name string such as 'batch', torch.export.Dim('batch'), Dim.DYNAMIC, "
                "Dim.AUTO, Dim.STATIC, None (static) or the example's own size")
    if isinstance(dynamic_shapes, Mapping):
        known = {name for name, *_ in top_level}
        unknown = [key for key in dynamic_shapes if key not in known]
        if unknown:
            raise InvalidExportOptionsError(
                f"dynamic_shapes names {', '.join(map(repr, unknown))}, which is no input given "
                f"to the model; its inputs are {', '.join(map(repr, sorted(known))) or 'none'} "
                "(key dynamic_shapes by the forward's parameter names or by input_names, or "
                "give a tuple in argument order)")
        return {name: _checked_spec(value, dynamic_shapes.get(name),
                                    f"dynamic_shapes[{name!r}]", accepted)
                for name, _, value, _ in top_level}
    if isinstance(dynamic_shapes, (list, tuple)):
        if len(dynamic_shapes) > len(top_level):
            raise InvalidExportOptionsError(
                f"dynamic_shapes has {len(dynamic_shapes)} entries but the model is given "
                f"{len(top_level)} inputs ({', '.join(name for name, *_ in top_level)}); give "
                "one entry per input, in argument order (None for an input with no dynamic dim)")
        given = list(dynamic_shapes) + [None] * (len(top_level) - len(dynamic_shapes))
        by_index = {index: (name, value) for name, _, value, index in top_level}
        return type(dynamic_shapes)(
            _checked_spec(by_index[k][1], spec, f"dynamic_shapes[{k}] (input {by_index[k][0]!r})",
                          accepted) for k, spec in enumerate(given))
    raise InvalidExportOptionsError(
        f"dynamic_shapes must be a dict (by input name), a tuple or a list, got "
        f"{type(dynamic_shapes).__name__}")


def _checked_spec(value: Any, spec: Any, where: str, accepted: str) -> Any:
    if spec is None:
        return None
    if isinstance(value, torch.Tensor):
        rank = value.dim()
        if isinstance(spec, Mapping):
            items = list(spec.items())
        elif isinstance(spec, (list, tuple)):
            if len(spec) != rank:
                raise InvalidExportOptionsError(
                    f"{where} = {spec!r} lists {len(spec)} dims but the input has {rank} "
                    f"(shape {tuple(value.shape)}); give one entry per dim (None for a static "
                    "one), or a dict {axis: dim} such as {0: 'batch'}")
            items = list(enumerate(spec))
        else:
            raise InvalidExportOptionsError(
                f"{where} = {spec!r}: a tensor input takes a dict {{axis: dim}} such as "
                f"{{0: 'batch'}}, a list with one entry per dim, or None")
        checked = {}
        for axis, dim in items:
            if not isinstance(axis, int) or isinstance(axis, bool):
                raise InvalidExportOptionsError(
                    f"{where} has the key {axis!r}; axes are ints (0 for the first dim)")
            if not -rank <= axis < rank:
                raise InvalidExportOptionsError(
                    f"{where} names axis {axis}, but the input has {rank} dimensions "
                    f"(shape {tuple(value.shape)}); axes go from {-rank} to {rank - 1}")
            checked[axis % rank] = _checked_dim(dim, value.shape[axis], f"{where}[{axis}]",
                                                accepted)
        if isinstance(spec, Mapping):
            return checked
        return type(spec)(checked[axis] for axis in range(rank))
    node_type = pytree._get_node_type(value)
    if node_type not in pytree.SUPPORTED_NODES:
        raise InvalidExportOptionsError(
            f"{where} = {spec!r}, but that input is not a tensor ({type(value).__name__} "
            f"{value!r}): it has no dims to make dynamic; give None")
    if node_type not in pytree.BUILTIN_TYPES:
        return spec  # a registered pytree (a KV cache): its flattened children, left to torch
    if isinstance(value, Mapping):
        if not isinstance(spec, Mapping):
            raise InvalidExportOptionsError(
                f"{where} = {spec!r}, but that input is a dict: give a dict with the same keys "
                f"({', '.join(map(repr, value))}) or None")
        unknown = [key for key in spec if key not in value]
        if unknown:
            raise InvalidExportOptionsError(
                f"{where} names {', '.join(map(repr, unknown))}, which the input does not have; "
                f"its keys are {', '.join(map(repr, value))}")
        return {key: _checked_spec(value[key], spec.get(key), f"{where}[{key!r}]", accepted)
                for key in value}
    if isinstance(value, (list, tuple)):
        if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
            raise InvalidExportOptionsError(
                f"{where} = {spec!r}, but that input is a {type(value).__name__} of "
                f"{len(value)}: give a list of {len(value)} entries (one per item) or None")
        return type(spec)(_checked_spec(item, item_spec, f"{where}[{k}]", accepted)
                          for k, (item, item_spec) in enumerate(zip(value, spec)))
    return spec


def _checked_dim(dim: Any, size: int, where: str, accepted: str) -> Any:
    if dim is None or isinstance(dim, Dim) or _is_hint(dim, "AUTO", "DYNAMIC", "STATIC"):
        return dim
    if isinstance(dim, str):
        if not dim:
            raise InvalidExportOptionsError(
                f"{where} is an empty string; a dim name is a non-empty string such as 'batch'")
        return dim
    if isinstance(dim, int) and not isinstance(dim, bool):
        if dim != size:
            raise InvalidExportOptionsError(
                f"{where} = {dim}, but the example's size there is {size}: an int in "
                f"dynamic_shapes fixes the dim to that size. To make it dynamic, give {accepted}")
        return dim
    raise InvalidExportOptionsError(
        f"{where} = {dim!r} ({type(dim).__name__}); a dim is {accepted}")


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


def _shapes_for_torch_export(args, kwargs, slots, per_input, parameter_names, var_positional):
    names = list(parameter_names)
    gathered, first = var_positional or (None, len(names))
    specs = iter(per_input.get(k) for k in range(len(slots)))  # slots are in argument order
    shapes: dict[str, Any] = {}
    for i, arg in enumerate(args):
        spec = _spec_like(arg, specs)
        if i < first:
            shapes[names[i]] = spec
        elif gathered is not None:  # the arguments *args gathers: one tuple under its name
            shapes[gathered] = (*shapes.get(gathered, ()), spec)
    for key, value in kwargs.items():
        shapes[key] = _spec_like(value, specs)
    return shapes


def _spec_like(value: Any, leaf_specs: Iterator[Any]) -> Any:
    """A dynamic_shapes entry for ``value`` with the given specs of its tensors, shaped as
    torch.export wants it: a tensor's own spec, the same container for lists, tuples and
    dicts, and the list of flattened children for any other pytree (a KV cache)."""
    if isinstance(value, torch.Tensor):
        return next(leaf_specs)
    node_type = pytree._get_node_type(value)
    node = pytree.SUPPORTED_NODES.get(node_type)
    if node is None:
        return None
    children, context = node.flatten_fn(value)
    specs = [_spec_like(child, leaf_specs) for child in children]
    if node_type in pytree.BUILTIN_TYPES:
        return node.unflatten_fn(specs, context)
    return specs


def _leaf_specs(value: Any, spec: Any) -> list[Any]:
    """The dynamic_shapes entry of each tensor in ``value``, in flattening order (the inverse of
    :func:`_spec_like`)."""
    if isinstance(value, torch.Tensor):
        return [spec]
    node = pytree.SUPPORTED_NODES.get(pytree._get_node_type(value))
    if node is None:
        return []
    children, context = node.flatten_fn(value)
    if isinstance(spec, Mapping) and isinstance(value, Mapping):
        specs = [spec.get(key) for key in context]
    elif isinstance(spec, (list, tuple)) and len(spec) == len(children):
        specs = list(spec)
    else:  # None, or a structure torch.export will reject with its own message
        specs = [None] * len(children)
    return [leaf for child, child_spec in zip(children, specs)
            for leaf in _leaf_specs(child, child_spec)]


def _names_from_dynamic_shapes(dynamic_shapes, args, kwargs, parameter_names):
    """Dim names given in torch.export's form ({"x": {0: Dim("batch")}}) as ONNX dim names.
    A dim left to torch.export (Dim.AUTO, Dim.DYNAMIC) is named after its input and axis
    (``attention_mask_dim_1``) unless a named Dim turns out to be the same size."""
    top_level = _top_level(args, kwargs, parameter_names)
    if isinstance(dynamic_shapes, Mapping):
        specs = [dynamic_shapes.get(name) for name, *_ in top_level]
    elif isinstance(dynamic_shapes, (list, tuple)):
        given = list(dynamic_shapes)
        specs = [given[index] if index < len(given) else None for *_, index in top_level]
    else:
        raise InvalidExportOptionsError(
            f"dynamic_shapes must be a dict or a tuple, got {type(dynamic_shapes).__name__}")
    slots = tensor_input_slots(args, kwargs, parameter_names)
    per_slot = [leaf for (_, _, value, _), spec in zip(top_level, specs)
                for leaf in _leaf_specs(value, spec)]
    named: dict[tuple[int, int], str] = {}
    unnamed: dict[tuple[int, int], str] = {}
    for k, (slot, spec) in enumerate(zip(slots, per_slot)):
        if isinstance(spec, Mapping):
            items = spec.items()
        elif isinstance(spec, (list, tuple)):
            items = enumerate(spec)
        else:
            continue
        for axis, dim in items:
            dim_name = getattr(dim, "__name__", None)
            if isinstance(dim_name, str) and not dim_name.startswith("DimHint"):
                named[(k, axis)] = dim_name
            elif isinstance(dim, str):
                named[(k, axis)] = dim
            elif _is_hint(dim, "AUTO", "DYNAMIC") and isinstance(axis, int):
                unnamed[(k, axis)] = f"{slot.name}_dim_{axis}"
    # Earlier entries win when two name one size: the given names before the made-up ones.
    return {**named, **{key: name for key, name in unnamed.items() if key not in named}}


def _is_hint(dim: Any, *kinds: str) -> bool:
    return getattr(getattr(dim, "type", None), "name", None) in kinds


def map_dims(dynamic_shapes: Any, args: tuple, kwargs: dict, parameter_names: Sequence[str],
             function: Callable[[int, int, Any], Any]) -> Any:
    """``dynamic_shapes`` in its own structure with each per-axis entry replaced by
    ``function(tensor input position, axis, entry)`` (the entry is None for a static axis)."""
    if dynamic_shapes is None:
        return None
    top_level = _top_level(args, kwargs, parameter_names)
    counter = iter(range(10**9))
    if isinstance(dynamic_shapes, Mapping):
        result = dict(dynamic_shapes)
        for name, _, value, _ in top_level:
            mapped = _map_spec(value, dynamic_shapes.get(name), function, counter)
            if name in dynamic_shapes:
                result[name] = mapped
        return result
    if isinstance(dynamic_shapes, (list, tuple)):
        given = list(dynamic_shapes)
        for _, _, value, index in top_level:
            spec = given[index] if index < len(given) else None
            mapped = _map_spec(value, spec, function, counter)
            if index < len(given):
                given[index] = mapped
        return type(dynamic_shapes)(given)
    raise InvalidExportOptionsError(
        f"dynamic_shapes must be a dict or a tuple, got {type(dynamic_shapes).__name__}")


def _map_spec(value: Any, spec: Any, function, counter) -> Any:
    if isinstance(value, torch.Tensor):
        position = next(counter)
        if isinstance(spec, Mapping):
            return {axis: function(position, axis, dim) for axis, dim in spec.items()}
        if isinstance(spec, (list, tuple)):
            return type(spec)(function(position, axis, dim) for axis, dim in enumerate(spec))
        return spec
    node = pytree.SUPPORTED_NODES.get(pytree._get_node_type(value))
    if node is None:
        return spec
    children, context = node.flatten_fn(value)
    if isinstance(spec, Mapping) and isinstance(value, Mapping):
        mapped = {key: _map_spec(child, spec.get(key), function, counter)
                  for key, child in zip(context, children)}
        return {key: mapped.get(key, entry) for key, entry in spec.items()}
    if isinstance(spec, (list, tuple)) and len(spec) == len(children):
        return type(spec)(_map_spec(child, child_spec, function, counter)
                          for child, child_spec in zip(children, spec))
    for child in children:  # None (all static) or a structure torch.export will reject
        _map_spec(child, None, function, counter)
    return spec


def requested_dims(dynamic_shapes: Any, args: tuple, kwargs: dict,
                   parameter_names: Sequence[str]) -> dict[tuple[int, int], int | None]:
    """Every axis asked to be dynamic, (tensor input position, axis) -> its requested max
    (None when unbounded). Dims derived from others (``2 * batch``) are left to torch."""
    found: dict[tuple[int, int], int | None] = {}

    def record(position, axis, dim):
        if isinstance(axis, int) and (isinstance(dim, (str, Dim)) or _is_hint(dim, "AUTO", "DYNAMIC")) \
                and not hasattr(dim, "root"):
            upper = getattr(dim, "max", None)
            found[(position, axis)] = int(upper) if upper is not None and _finite(upper) else None
        return dim

    map_dims(dynamic_shapes, args, kwargs, parameter_names, record)
    return found


def as_auto(dim: Any) -> Any:
    """``dim`` as ``Dim.AUTO`` with its bounds: torch keeps it dynamic unless the model fixes
    it, and then says so in the program instead of raising."""
    if hasattr(dim, "root"):
        return dim  # derived from another dim: only torch can check that relation
    low, high = getattr(dim, "min", None), getattr(dim, "max", None)
    bounds = {}
    if low is not None and low != 0:
        bounds["min"] = int(low)
    if high is not None and _finite(high):
        bounds["max"] = int(high)
    return Dim.AUTO(**bounds) if bounds else Dim.AUTO


def _finite(value: Any) -> bool:
    """A plain bound (not torch's int_oo)."""
    import sympy

    return isinstance(value, (int, sympy.Integer)) and not isinstance(value, bool)
