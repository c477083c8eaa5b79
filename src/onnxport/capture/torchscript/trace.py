"""One run of the TorchScript tracer over the model (:func:`_trace`), its tensor inputs only
(:class:`_TracedCall`), and the values that run fixed reported at their lines."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from typing import Any

import torch

import torch.utils._pytree as pytree

from onnxport.capture.common import first_lines
from onnxport.capture import quirks
from onnxport.capture.script_mutations import functionalize_writes
from onnxport.capture.specialization import ONNXPORT_FOLDER, TORCH_FOLDER
from onnxport.capture.torchscript.unrecorded_numbers import UnrecordedNumbers
from onnxport.pytree_names import bookkeeping_outputs, output_names as output_names_of
from onnxport.errors import CaptureError, TracingWarning


# The name the traced wrapper gives the model; stripped again from the weights' names.
_PREFIX = "model."


@dataclasses.dataclass
class _ConverterState:
    """The attributes of the traced module, sorted as torch's graph converter wants them."""

    ts_model: Any
    ts_graph: Any
    name_to_param: dict
    name_to_buffer: dict
    name_to_non_tensor_attributes: dict
    name_to_constant: dict
    # (a scripted model given no tensor twice: its tensor inputs are distinct objects)
    distinct_inputs: bool = False


class _TracedCall(torch.nn.Module):
    """Calls the model on its tensor inputs only: every other input (a number, a string, the
    keys of a dict) is fixed to the example's value, as the TorchScript tracer does."""

    def __init__(self, model: Any, leaves: list, spec: pytree.TreeSpec, tensor_positions: list[int]):
        super().__init__()
        self.model = model
        self._leaves = leaves
        self._spec = spec
        self._positions = tensor_positions
        self.output_names: list[str | None] = []  # readable names of the outputs kept

    def forward(self, *tensors):
        leaves = list(self._leaves)
        for position, tensor in zip(self._positions, tensors):
            leaves[position] = tensor
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        output = self.model(*args, **kwargs)
        # A dict comes out as its values, strings are dropped and numbers become constants,
        # the TorchScript exporter's rules for outputs.
        leaves, spec = pytree.tree_flatten(output)
        names = output_names_of(spec)
        if len(names) != len(leaves):
            names = [None] * len(leaves)
        dropped = bookkeeping_outputs(spec)  # a KV cache's token count and window
        results, self.output_names = [], []
        for leaf, name in [(leaf, name) for k, (leaf, name) in enumerate(zip(leaves, names))
                           if k not in dropped]:
            if isinstance(leaf, (bool, int, float)) and not isinstance(leaf, torch.Tensor):
                # A float as double: TorchScript's float, as the scripted export gives it (a
                # number the tracer computed from sizes, x.shape[1] / 2, is a tensor here).
                leaf = torch.tensor(leaf, dtype=torch.float64 if isinstance(leaf, float)
                                    else None)
            if isinstance(leaf, torch.Tensor):
                results.append(leaf)
                self.output_names.append(name)
        return tuple(results)


def _trace(wrapper: torch.nn.Module, tensors: tuple, dynamic: bool = False) -> _ConverterState:
    """One run of the tracer, as torch.jit.trace does but without wrapping every submodule in
    a ScriptModule (most of its time on a model of many small modules): the graph's inputs are
    the tensors, then every parameter and buffer, named by its path. ``dynamic`` (dims were
    asked to be dynamic): numbers the tracer takes without recording them are warned of
    (:class:`UnrecordedNumbers`)."""
    from torch.jit._trace import _create_interpreter_name_lookup_fn

    state = torch.jit._unique_state_dict(wrapper, keep_vars=True)
    # The module paths the tracer records as each call's scope (torch.jit.trace's own names).
    scopes: dict[torch.nn.Module, str] = {}

    def name_children(module, prefix):
        for name, child in module.named_children():
            scopes[child] = f"{prefix}.{name}"
            name_children(child, scopes[child])

    name_children(wrapper, "__module")
    count = len(tensors)
    previous = torch.jit._trace._trace_module_map
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.jit._trace._trace_module_map = scopes
            # Under no_grad: the run records no autograd graph (a tenth of bert's trace),
            # and exports the same whatever the caller's grad mode. nn.MultiheadAttention's
            # and the Transformer layers' fused inference kernels, which gradients off would
            # take, are off while tracing (quirks/attention_fast_path.py).
            with _warn_on_index(), quirks.applied("trace"), torch.no_grad(), \
                    UnrecordedNumbers() if dynamic else contextlib.nullcontext(), \
                    _scripted_children_as_functions(wrapper) as called:
                graph, _ = torch._C._create_graph_by_tracing(
                    lambda *inputs: wrapper(*inputs[:count]),
                    [*tensors, *state.values()], _create_interpreter_name_lookup_fn(),
                    False, False)
        except Exception as error:
            raise CaptureError(
                f"torch.jit.trace could not run the model: {type(error).__name__}: "
                f"{first_lines(str(error))}\nThe stage that failed is capture (tracing)."
            ) from error
        finally:
            torch.jit._trace._trace_module_map = previous
    _report_fixed_values(caught)
    # Functions the model scripts inside a trace (torchvision's batched_nms, through
    # _script_if_tracing) are calls in this graph; the converter takes them inlined, as
    # torch.jit.trace's inlined_graph has them.
    torch._C._jit_pass_inline(graph)  # (``called`` holds the functions inlined until now)
    del called
    if graph.findNode("prim::If", True) is not None:  # (scripted code: its quirks)
        quirks.in_scripted_graph(graph)
    functionalize_writes(graph)  # (writes in the scripted functions' branches and loops)
    _numbers_of_the_result_dtype(graph)
    _narrow_starts_as_ints(graph)
    _inputs_read_through_data(graph, [*tensors, *state.values()])
    values = list(graph.inputs())[count:]
    for value, name in zip(values, state):
        value.setDebugName(name)
    if [value.debugName() for value in values] != list(state):
        raise CaptureError(f"the tracer renamed the model's weights ({', '.join(state)}); "
                           "this is a bug of onnxport's tracing, please report it")
    parameters = {n: t for n, t in state.items() if isinstance(t, torch.nn.Parameter)}
    return _ConverterState(None, graph, parameters,
                           {n: t for n, t in state.items() if n not in parameters}, {}, {})


# Ops whose result has the dtype they compute in, which a number among their arguments (a
# wrapped number: int tensor * 2.5 is float32) does not decide as a tensor would (with an
# integer tensor: with a float one, the same category, the tensor's dtype wins either way).
_ARITHMETIC = {"aten::add", "aten::sub", "aten::mul", "aten::div", "aten::rsub",
               "aten::true_divide", "aten::floor_divide", "aten::remainder", "aten::fmod",
               "aten::pow", "aten::where", "aten::maximum", "aten::minimum", "aten::atan2"}
_FLOAT_TYPES = {"Float", "Half", "BFloat16"}


def _numbers_of_the_result_dtype(graph: torch._C.Graph) -> None:
    """A Python float the tracer recorded as a 0-d double constant (``i * 2.5``) given the
    dtype the tracer recorded for the result, float32: a double tensor there made the fake
    run's result (and the file's output) float64 where the model's is float32."""
    for node in graph.findAllNodes("prim::Constant", True):
        output = node.output()
        if not isinstance(output.type(), torch._C.TensorType) or \
                output.type().scalarType() != "Double":
            continue
        value = output.toIValue()  # (a float: the tracer's record of a wrapped number)
        if isinstance(value, torch.Tensor) and value.dim() == 0:
            value = value.item()
        if not isinstance(value, float):
            continue
        made: dict[torch.dtype, torch._C.Value] = {}  # (one constant per dtype)
        for use in list(output.uses()):
            user = use.user
            if user.kind() not in _ARITHMETIC or user.outputsSize() != 1 or \
                    not any(_integral(other) for other in user.inputs() if other != output):
                continue  # (with a float tensor, the tensor's dtype wins as it is)
            result = user.output().type()
            if not isinstance(result, torch._C.TensorType) or \
                    result.scalarType() not in _FLOAT_TYPES:
                continue
            dtype = getattr(torch, {"Float": "float32", "Half": "float16",
                                    "BFloat16": "bfloat16"}[result.scalarType()])
            if dtype not in made:
                with graph.insert_point_guard(node):
                    made[dtype] = graph.insertConstant(torch.tensor(value, dtype=dtype))
            user.replaceInput(use.offset, made[dtype])


def _narrow_starts_as_ints(graph: torch._C.Graph) -> None:
    """``x.narrow(d, x.size(1) - 2, 2)``: the tracer records the start computed from a size as
    a tensor (narrow.Tensor, which reads it inside the op, a number torch.export cannot bind
    to the size). Read as an int before the call, as a length is, it stays the size's."""
    for node in graph.findAllNodes("aten::narrow", True):
        start = node.inputsAt(2)
        if not isinstance(start.type(), torch._C.TensorType):
            continue
        as_int = graph.create("aten::Int", [start])
        as_int.output().setType(torch._C.IntType.get())
        as_int.insertBefore(node)
        node.replaceInput(2, as_int.output())


def _integral(value: torch._C.Value) -> bool:
    """Whether ``value`` is a tensor of integers or bools, as the tracer recorded it."""
    kind = value.type()
    return isinstance(kind, torch._C.TensorType) and kind.scalarType() in (
        "Long", "Int", "Short", "Char", "Byte", "Bool")


def _inputs_read_through_data(graph: torch._C.Graph, tensors: list) -> None:
    """The tracer records ``x.data`` (no op) as a constant holding the input itself: this
    example's values, at every size (torch.onnx too). Such a constant is the graph input it
    aliases; one that is part of it (``x.data[0]``) gets a warning at its line."""
    constants = [node for node in graph.findAllNodes("prim::Constant")
                 if node.hasAttribute("value") and node.kindOf("value") == "t"]
    if not constants:
        return
    storages = {tensor.untyped_storage().data_ptr(): (k, tensor)
                for k, tensor in enumerate(tensors) if tensor.untyped_storage().nbytes()}
    inputs = list(graph.inputs())
    for node in constants:
        value = node.t("value")
        found = storages.get(value.untyped_storage().data_ptr()) \
            if value.untyped_storage().nbytes() else None
        if found is None:
            continue
        k, tensor = found
        if value.shape == tensor.shape and value.stride() == tensor.stride() and \
                value.storage_offset() == tensor.storage_offset() and value.dtype == tensor.dtype:
            node.output().replaceAllUsesWith(inputs[k])
            node.destroy()
        else:
            where = node.sourceRange().strip().splitlines()
            warnings.warn(TracingWarning(
                "tracing recorded part of an input read through .data as a constant: this "
                "example's values, at every size; use the tensor itself (x[0], not x[0].data)"
                + (f" (at {where[0]})" if where else "")))


class _ScriptedCall(torch.nn.Module):
    """A scripted submodule as the tracer can call it: its frozen graph as a function (the
    tracer records a call of a function, inlined later; a call of a module's scripted method
    needs that module in the trace, which a trace of a function has not)."""

    def __init__(self, function: Any, module: torch.jit.ScriptModule):
        super().__init__()
        self.function = function
        # The forward's parameters after self, with their defaults: a function made from a
        # graph has none (TransformerEncoder's forward(src, mask=None, ...) called with src).
        self.signature = [(argument.name, argument.default_value)
                          for argument in module.forward.schema.arguments[1:]]

    def forward(self, *args, **kwargs):
        given = list(args)
        for name, default in self.signature[len(args):]:
            given.append(kwargs.pop(name, default))
        return self.function(*given, **kwargs)


def _as_function(module: torch.jit.ScriptModule) -> Any | None:
    """``module``'s forward as a scripted function with its weights folded in as constants;
    None when its graph still reads the module (an attribute freezing could not fold)."""
    try:
        frozen = torch._C._freeze_module(module._c, preserveParameters=False)
    except Exception:  # noqa: BLE001 - left as it is; the tracer says what fails
        return None
    graph = frozen._get_method("forward").graph.copy()
    torch._C._jit_pass_inline(graph)
    this = next(graph.inputs())
    _fold_weight_reads(graph, this, frozen)
    if this.uses():
        return None
    graph.eraseInput(0)
    _numbers_returned_as_tensors(graph)
    return torch._C._create_function_from_graph(f"{module.original_name}_forward", graph)


def _fold_weight_reads(graph: torch._C.Graph, value: torch._C.Value, owner: Any) -> None:
    """The tensors freezing left read from the module (``value``, of ``owner``) as constants:
    it keeps an attribute that flows into a list (a scripted nn.TransformerEncoder puts each
    layer's in_proj_weight in the tuple its fast-path check reads), and the scripted module
    then stayed a module the tracer refused ("not part of the active trace")."""
    for use in list(value.uses()):
        node = use.user
        if node.kind() != "prim::GetAttr":
            continue
        try:
            attribute = owner.getattr(node.s("name"))
        except (AttributeError, RuntimeError):
            continue
        if isinstance(attribute, torch.Tensor):
            with graph.insert_point_guard(node):
                constant = graph.insertConstant(attribute.detach())
            node.output().replaceAllUsesWith(constant)
        elif isinstance(attribute, torch._C.ScriptModule):
            _fold_weight_reads(graph, node.output(), attribute)
        if not node.output().uses():
            node.destroy()


_NUMBER_TYPES = (torch._C.IntType, torch._C.FloatType, torch._C.BoolType)


def _numbers_returned_as_tensors(graph: torch._C.Graph) -> None:
    """The numbers ``graph`` returns, alone or in a tuple (``return torch.stack(ys), len(ys)``),
    as 0-d tensors: the tracer records only tensors coming out of a call, and refuses a
    function that returns an int ("Tracer cannot set value trace for type Int")."""
    output = graph.return_node().inputsAt(0)
    kind = output.type()
    if isinstance(kind, torch._C.TupleType) and any(
            isinstance(t, _NUMBER_TYPES) for t in kind.elements()):
        with graph.insert_point_guard(graph.return_node()):
            items = list(graph.insertNode(graph.create("prim::TupleUnpack", [output],
                                                       len(kind.elements()))).outputs())
            for item, item_kind in zip(items, kind.elements()):
                item.setType(item_kind)
            converted = [_as_tensor(graph, item) for item in items]
            packed = graph.insertNode(graph.create("prim::TupleConstruct", converted)).output()
            packed.setType(torch._C.TupleType([item.type() for item in converted]))
        graph.return_node().replaceInput(0, packed)
    elif isinstance(kind, _NUMBER_TYPES):
        with graph.insert_point_guard(graph.return_node()):
            graph.return_node().replaceInput(0, _as_tensor(graph, output))


def _as_tensor(graph: torch._C.Graph, value: torch._C.Value) -> torch._C.Value:
    """``value`` as a 0-d tensor (prim::NumToTensor) when it is a number, else itself."""
    if not isinstance(value.type(), _NUMBER_TYPES):
        return value
    tensor = graph.insertNode(graph.create("prim::NumToTensor", [value])).output()
    tensor.setType(torch._C.TensorType.get())
    return tensor


@contextlib.contextmanager
def _scripted_children_as_functions(root: torch.nn.Module):
    """Scripted submodules of a Python model called as functions while it is traced; yields
    those functions, which must outlive the inlining of the traced graph's calls of them."""
    swapped = []
    for parent in list(root.modules()):
        if isinstance(parent, torch.jit.ScriptModule):
            continue
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.jit.ScriptModule):
                function = _as_function(child)
                if function is not None:
                    swapped.append((parent, name, child))
                    parent._modules[name] = _ScriptedCall(function, child)
    try:
        yield [parent._modules[name].function for parent, name, _ in swapped]
    finally:
        for parent, name, child in swapped:
            parent._modules[name] = child


@contextlib.contextmanager
def _warn_on_index():
    """The tracer fixes a tensor used as an index or a count (``range(t)``) silently, and a
    stride read from a tensor (``x.stride(0)``, which it cannot trace); it warns for
    ``int(t)`` and ``bool(t)``. Warn for those too, from the line that does it."""
    original_index, original_stride = torch.Tensor.__index__, torch.Tensor.stride
    # torch's own calls (a size list given to an op) are traced as values, not fixed; so are
    # onnxport's (a quirk's slice by a traced size).
    own_folders = (TORCH_FOLDER, ONNXPORT_FOLDER)

    def from_the_model() -> bool:
        return torch.jit.is_tracing() and not sys._getframe(2).f_code.co_filename.startswith(
            own_folders)

    def index(tensor):
        if from_the_model():
            warnings.warn("Using a tensor as a Python index or count might cause the trace to "
                          "be incorrect: its value is treated as a constant",
                          torch.jit.TracerWarning, stacklevel=2)
        return original_index(tensor)

    def stride(tensor, *args, **kwargs):
        if from_the_model():
            warnings.warn("Reading a tensor's stride might cause the trace to be incorrect: "
                          "the tracer records this example's stride as a constant (compute it "
                          "from the tensor's sizes instead, which are traced)",
                          torch.jit.TracerWarning, stacklevel=2)
        return original_stride(tensor, *args, **kwargs)

    torch.Tensor.__index__, torch.Tensor.stride = index, stride
    try:
        yield
    finally:
        torch.Tensor.__index__, torch.Tensor.stride = original_index, original_stride


def _report_fixed_values(caught: list[warnings.WarningMessage]) -> None:
    """One TracingWarning per place where the trace fixed a value, at that place; other
    warnings the model raised are passed on unchanged, torch's deprecation notice for
    ``torch.jit.trace`` dropped (the user did not call it)."""
    seen = set()
    for record in caught:
        if issubclass(record.category, torch.jit.TracerWarning):
            key = (record.filename, record.lineno, str(record.message))
            if key in seen:
                continue
            seen.add(key)
            warnings.warn_explicit(
                f"tracing recorded a value of this example as a constant: "
                f"{record.message} (at {record.filename}:{record.lineno})",
                TracingWarning, record.filename, record.lineno)
        elif issubclass(record.category, FutureWarning) and "torch.jit.trace" in str(record.message):
            continue
        else:
            warnings.warn_explicit(record.message, record.category, record.filename,
                                   record.lineno)
