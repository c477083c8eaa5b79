"""Sizes the tracer kept as tensors and read back as numbers: kept symbolic while propagating
with dynamic dims (:class:`_ReadBackSizes`), fixed to this run's values without them
(:func:`_fix_scalar_reads`)."""

from __future__ import annotations

import operator
import warnings
from typing import Any, Mapping

import torch

from onnxport.capture.common import differing_values
from onnxport.capture.torchscript.convert import _TRACED_SHAPE, _shape_as_tensor
from onnxport.capture.torchscript.fx_helpers import _attribute, _eliminate_dead_code, _source_of
from onnxport.capture.torchscript.loops import prim_loop
from onnxport.errors import TracingWarning


class _ReadBackSizes:
    """Sizes the traced graph computes from the input's shape with tensor ops and reads back
    as numbers, while propagating with dynamic dims: each read is a new symbol with the
    example's value as its hint, so that the read stays computed at run time instead of being
    fixed to this example; and the op that fixes one anyway (it needs the exact value: a
    broadcast against a fixed size) is found and named in a warning."""

    def __init__(self, shape_env: Any, hints: Mapping[str, Any] | None):
        self._shape_env = shape_env
        self._hints = hints or {}
        self._reads: dict[Any, torch.fx.Node] = {}  # symbol -> the read it stands for
        self._fixed: dict[Any, torch.fx.Node] = {}  # symbol -> the node that fixed it
        self._replacements = 0

    def has(self, node: torch.fx.Node) -> bool:
        return node.name in self._hints

    def symbol(self, node: torch.fx.Node) -> Any:
        """A new backed symbol for ``node``'s read: guards on it are decided by the hint (the
        traced graph has no branch left to take), and it is never merged with a size of the
        same value (no duck sizing) nor specialized for being 0 or 1."""
        from torch._dynamo.source import ConstantSource
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        hint = self._hints[node.name]
        source = ConstantSource(f"read_back_{node.name}")
        symbol = self._shape_env.create_unspecified_symbol(hint, source,
                                                           dynamic_dim=DimDynamic.DYNAMIC)
        self._reads[symbol] = node
        if isinstance(hint, float):
            return self._shape_env.create_symfloatnode(symbol, hint=hint, source=source)
        return self._shape_env.create_symintnode(symbol, hint=hint, source=source)

    def check(self, node: torch.fx.Node) -> None:
        """Note the reads that ``node``'s propagation fixed to a number (cheap when none: a
        fixed symbol is a new replacement)."""
        replacements = len(self._shape_env.replacements)
        if not self._reads or replacements == self._replacements:
            return
        self._replacements = replacements
        for symbol in self._reads:
            if symbol not in self._fixed and self._shape_env.replace(symbol).is_number:
                self._fixed[symbol] = node

    def warn(self, graph_module: torch.fx.GraphModule, tensors: tuple, dynamic: list) -> None:
        """Warn for each fixed read whose value changes with the dynamic dims (an extra run
        at other sizes tells: torchvision pads the channels by 3 - 3, which convolution
        fixes to 0, rightly); for every fixed read when that run fails."""
        if not self._fixed:
            return
        names = {self._reads[symbol].name for symbol in self._fixed}
        try:
            other = _read_back_values(graph_module, grown_sizes(tensors, dynamic), names)
        except Exception:
            other = {}
        for symbol, fixer in self._fixed.items():
            read = self._reads[symbol]
            if other.get(read.name, object()) == self._hints[read.name]:
                continue
            warnings.warn(
                f"a size that the model computes from the input's shape with tensor ops and "
                f"reads back as a number (at {_source_of(_first_located(read))}) was fixed to "
                f"this example's value {self._shape_env.replace(symbol)} by "
                f"{_overload_name(fixer)}, which needs it exact (at {_source_of(fixer)}): the "
                "ONNX model does not follow the dynamic axes there", TracingWarning)


def size_oblivious(tensors: tuple, dynamic: list) -> bool:
    """Whether a dynamic dim is 0 or 1 in the example: torch then specializes it unless told
    to reason about it as any size (``backed_size_oblivious``), in every trace of the
    program."""
    return any(tensors[k].shape[axis] <= 1 for k, axes in enumerate(dynamic) if axes
               for axis in axes)


def ones_as_twos(tensors: tuple, dynamic: list) -> tuple | None:
    """The example inputs with each dynamic axis of size 1 repeated to 2, or None when there
    is none: a fake run from them reasons about those dims as any size, where one from a
    size of 1 guards on layouts (a batch of 1 is contiguous whatever its stride)."""
    ones = [{axis for axis in axes or {} if tensor.shape[axis] == 1} or None
            for tensor, axes in zip(tensors, dynamic)]
    return grown_sizes(tensors, ones) if any(ones) else None  # (1 grows by half to 2)


def grown_sizes(tensors: tuple, dynamic: list, distinct: bool = False,
                smallest: int = 0, doubled: bool = False) -> tuple:
    """The example inputs grown by about half along each dynamic axis, to ``smallest`` at
    least (repeating their values, so that data-dependent steps see alike data;
    ``distinct``: values that differ, :func:`differing_values`, each repeat from the last).
    ``doubled``: to twice their size, which every divisor of the example's divides too.
    An empty axis stays empty: it has no values to repeat."""
    grown = []
    shuffle = torch.Generator().manual_seed(0)
    for tensor, axes in zip(tensors, dynamic):
        for axis in axes or {}:
            size = tensor.shape[axis]
            if size == 0:
                continue
            target = max(2 * size if doubled else size + size // 2 + 1, smallest)
            parts = [tensor]
            while sum(part.shape[axis] for part in parts) < target:
                parts.append(differing_values(parts[-1], shuffle) if distinct else tensor)
            tensor = torch.cat(parts, axis).narrow(axis, 0, target)
        grown.append(tensor)
    return tuple(grown)


def _first_located(node: torch.fx.Node) -> torch.fx.Node:
    """``node`` when it knows its source line, else its first user that does (the converter
    gives the reads it inserts for a traced size no stack)."""
    if node.meta.get("stack_trace"):
        return node
    return next((user for user in node.users if user.meta.get("stack_trace")), node)


def _overload_name(node: torch.fx.Node) -> str:
    target = node.target
    return str(target.name()) if isinstance(target, torch._ops.OpOverload) else node.name


def _read_back_hints(graph_module: torch.fx.GraphModule, tensors: tuple) -> dict[str, Any]:
    """The number each read-back of a size computed with tensor ops (torchvision's resize
    scale, interpolate's output size, the anchors' strides) gives on the example, by node
    name: the hints of :class:`_ReadBackSizes`."""
    names = {node.name for node in _shape_reads(graph_module)}
    return _read_back_values(graph_module, tensors, names) if names else {}


def _read_back_values(graph_module: torch.fx.GraphModule, tensors: tuple,
                      names: set[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if node.name in names and isinstance(result, (int, float)) \
                    and not isinstance(result, bool):
                values[node.name] = result
            return result

    with torch.no_grad():
        Recorder(graph_module).run(*tensors)
    return values


def _size_number(node: torch.fx.Node, args: tuple, kwargs: dict,
                 numbers: dict[torch.fx.Node, Any]) -> Any:
    """The integer a node's 0-d integer tensor holds, or that a read of such a tensor gives,
    when it is computed from sizes alone (the tracer keeps ``x.size(-1) // 2`` as tensors), so
    that reading it back is that size (symbolic or not) rather than an unknown number; else
    None."""
    target = node.target
    if target in _SCALAR_TENSORS:
        number = args[0] if args else None
        dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
        if isinstance(number, (int, torch.SymInt)) and not isinstance(number, bool) and \
                dtype in (None, *_INDEX_TYPES):
            return number
        return None
    if target in _NUMBER_READS or (target is torch.ops.aten._to_copy.default and set(kwargs) <=
                                   {"dtype"} and kwargs.get("dtype") in _INDEX_TYPES):
        source = node.args[0] if len(node.args) == 1 else None
        if isinstance(source, int) and not isinstance(source, bool):
            return source  # a read made a number already
        return numbers.get(source) if isinstance(source, torch.fx.Node) else None
    if target is torch.ops.aten._to_copy.default:
        return None
    operation = _NUMBER_ARITHMETIC.get(target)
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) == 3 else 1)
    if operation is None or len(node.args) not in (2, 3) or alpha != 1 or \
            set(node.kwargs) - {"alpha"}:
        return None
    operands = [numbers.get(a) if isinstance(a, torch.fx.Node) else a for a in node.args[:2]]
    if all(isinstance(o, (int, torch.SymInt)) and not isinstance(o, bool) for o in operands):
        return operation(*operands)
    return None


def _replace_uses(node: torch.fx.Node, number: int) -> None:
    for user in list(node.users):
        user.args, user.kwargs = torch.fx.node.map_arg(
            (user.args, user.kwargs), lambda n: number if n is node else n)


_NUMBER_READS = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default,
                 torch.ops.aten.ScalarImplicit.default)
_NUMBER_ARITHMETIC = {
    torch.ops.aten.add.Tensor: operator.add, torch.ops.aten.sub.Tensor: operator.sub,
    torch.ops.aten.mul.Tensor: operator.mul, torch.ops.aten.floor_divide.default: operator.floordiv,
    torch.ops.aten.add.Scalar: operator.add, torch.ops.aten.sub.Scalar: operator.sub,
    torch.ops.aten.mul.Scalar: operator.mul, torch.ops.aten.rsub.Scalar: lambda a, b: b - a,
    torch.ops.aten.rsub.Tensor: lambda a, b: b - a,
    torch.ops.aten.remainder.Scalar: operator.mod, torch.ops.aten.remainder.Tensor: operator.mod,
}


def _size_read_back(node: torch.fx.Node) -> torch.fx.Node | None:
    """The size node when ``node`` reads back a size the tracer made a tensor
    (``_local_scalar_dense(_to_copy(scalar_tensor(sym_size(x, d))))``, from ``x.size(d)``
    passed to a view): the same integer, kept symbolic."""
    if node.target not in _SCALAR_READS:
        return None
    source = node.args[0]
    while isinstance(source, torch.fx.Node) and source.target is torch.ops.aten._to_copy.default \
            and set(source.kwargs) <= {"dtype"} and source.kwargs.get("dtype") in _INDEX_TYPES:
        source = source.args[0]
    if not (isinstance(source, torch.fx.Node) and source.target in _SCALAR_TENSORS):
        return None
    size = source.args[0]
    if isinstance(size, torch.fx.Node) and size.target in _SHAPE_READS:
        return size
    if isinstance(size, torch.fx.Node) and source.kwargs.get("dtype") in _INDEX_TYPES and \
            node.target is torch.ops.aten.IntImplicit.default:
        # An int made a tensor and read back (torchvision passes the image size to a
        # scripted loop so): that int.
        return size
    return None


_INDEX_TYPES = (torch.int32, torch.int64)
_SCALAR_TENSORS = (torch.ops.aten.scalar_tensor, torch.ops.aten.scalar_tensor.default)


def _drop_runtime_asserts(program: torch.export.ExportedProgram) -> None:
    """Remove torch's runtime asserts and the size arithmetic only they use. Sizes read back
    from tensors are symbols torch knows nothing of, so it asserts what the traced shapes
    imply (``Eq(u1, 1) | Eq(u1, 7)``); ONNX Runtime checks shapes itself."""
    graph = program.graph_module.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in _RUNTIME_ASSERTS:
            graph.erase_node(node)
    graph.eliminate_dead_code()
    program.graph_module.recompile()


def _depends_on_shapes_only(node: torch.fx.Node, sized_by_data: set = frozenset()) -> bool:
    """True when ``node`` is computed from input sizes and constants, never input values
    (nor the sizes of ``sized_by_data``, tensors whose size depends on values)."""
    pending, seen = [node], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "placeholder":
            return False
        if current.op == "call_function" and current.target in _SHAPE_READS:
            if current.args and current.args[0] in sized_by_data:
                return False
            continue
        pending.extend(current.all_input_nodes)
    return True


def _shape_reads(graph_module: torch.fx.GraphModule) -> list[torch.fx.Node]:
    sized_by_data = _sized_by_data(graph_module)
    return [node for node in graph_module.graph.nodes
            if node.target in _SCALAR_READS and _depends_on_shapes_only(node, sized_by_data)]


# Ops whose result's size depends on the values of their inputs.
_DATA_SIZED = {torch.ops.aten.nonzero.default, torch.ops.aten.masked_select.default,
               torch.ops.aten.index.Tensor, torch.cond}


def _sized_by_data(graph_module: torch.fx.GraphModule) -> set:
    """In a graph with a loop, the tensors whose size depends on values (after a boolean
    index, NMS, the loop itself...): a read of their size is the loop's count or alike, and
    stays symbolic (it is fixed in other graphs, which torch.export captures again)."""
    nodes = graph_module.graph.nodes
    if not any(node.target is prim_loop for node in nodes):
        return set()
    sized: set = set()
    for node in nodes:
        if node.op != "call_function":
            continue
        target = node.target
        if target in _DATA_SIZED or target is prim_loop or (
                getattr(target, "namespace", None) == "torchvision") or any(
                n in sized for n in node.all_input_nodes if n.target not in _SHAPE_READS):
            sized.add(node)
    return sized


def _fix_scalar_reads(graph_module: torch.fx.GraphModule, tensors: tuple,
                      reads: list[torch.fx.Node]) -> None:
    """Replace each read of a tensor as a number by the number this run reads. Only what
    the reads depend on runs (sizes, mostly), not the whole model again."""
    if not reads:
        return
    values: dict[torch.fx.Node, Any] = {}
    needed: set[torch.fx.Node] = set()
    pending = list(reads)
    while pending:
        node = pending.pop()
        if node not in needed:
            needed.add(node)
            if _traced_size(node) is None:  # (the size of a tensor needs not its value)
                pending.extend(node.all_input_nodes)

    # Run in order, without torch.fx.Interpreter's steps for each node of the graph (most
    # are not needed here).
    inputs = iter(tensors)
    with torch.no_grad():
        for node in graph_module.graph.nodes:
            if node.op == "placeholder":
                values[node] = next(inputs)
            elif node not in needed:
                continue
            elif (size := _traced_size(node)) is not None:
                values[node] = size
            elif node.op == "get_attr":
                values[node] = _attribute(graph_module, node.target)
            else:
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
                if node.op == "call_method":  # (each kind run as torch.fx.Interpreter does)
                    values[node] = getattr(args[0], node.target)(*args[1:], **kwargs)
                elif node.op == "call_module":
                    values[node] = _attribute(graph_module, node.target)(*args, **kwargs)
                else:
                    values[node] = node.target(*args, **kwargs)
    for node in reads:
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda n: values[n] if n is node else n)
            user.kwargs = torch.fx.node.map_arg(
                user.kwargs, lambda n: values[n] if n is node else n)
        graph_module.graph.erase_node(node)
    _eliminate_dead_code(graph_module.graph)
    graph_module.recompile()


def _traced_size(node: torch.fx.Node) -> int | None:
    """What ``sym_size(x, axis)`` read while tracing, when the tracer recorded x's sizes."""
    if node.target in (torch.ops.aten.sym_size, torch.ops.aten.sym_size.int) and \
            len(node.args) == 2 and isinstance(node.args[0], torch.fx.Node) and \
            isinstance(node.args[1], int):
        _, sizes = node.args[0].meta.get(_TRACED_SHAPE, (None, None))
        if sizes is not None and -len(sizes) <= node.args[1] < len(sizes):
            return sizes[node.args[1]]
    return None


_RUNTIME_ASSERTS = (torch.ops.aten._assert_scalar.default,
                    torch.ops.aten.sym_constrain_range_for_size.default)
# (ScalarImplicit: how the tracer reads back a size it made a tensor for arange's end, in
# torchvision's RPN.)
_SCALAR_READS = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default,
                 torch.ops.aten.ScalarImplicit.default, torch.ops.aten.IntImplicit.default)
_SHAPE_READS = (torch.ops.aten.sym_size, torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel,
                torch.ops.aten.sym_numel.default, torch.ops.aten._shape_as_tensor.default,
                _shape_as_tensor)
