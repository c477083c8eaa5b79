"""A scripted model (``ScriptModule``, ``ScriptFunction``) as the converter takes it: frozen,
inlined, its number inputs bound as constants."""

from __future__ import annotations

import torch

from onnxport.capture.script_mutations import functionalize_writes
from onnxport.capture.torchscript.trace import _ConverterState


def _frozen(model: torch.jit.ScriptModule | torch.jit.ScriptFunction):
    """A scripted model with its attributes folded in (``self.training`` and the like are
    then constants and their branches gone), parameters kept as parameters."""
    if isinstance(model, torch.jit.ScriptFunction):
        return model
    # In the mode the export put it in: training=TRAINING keeps Dropout's training branch.
    frozen = torch._C._freeze_module(model._c, preserveParameters=True)
    return torch.jit._recursive.wrap_cpp_module(frozen)


_NUMBERS = (bool, int, float, str, type(None))


def is_tensor_sequence(value) -> bool:
    """A list or tuple of tensors, which a scripted model's graph takes as one input."""
    return isinstance(value, (list, tuple)) and bool(value) and \
        all(isinstance(item, torch.Tensor) for item in value)


def _script_state(scripted: torch.jit.ScriptModule | torch.jit.ScriptFunction,
                  args: tuple = ()) -> _ConverterState:
    """A scripted model's inlined graph, with its parameters and buffers known by name (not by
    comparing values, which takes a buffer equal to a parameter for that parameter), and the
    numbers among ``args`` bound as constants, as tracing fixes a model's number inputs."""
    is_module = isinstance(scripted, torch.jit.ScriptModule)
    graph = scripted.inlined_graph if is_module else scripted.graph.copy()
    _bind_arguments(graph, args, 1 if is_module else 0)
    tensors = [t for arg in args for t in (arg if is_tensor_sequence(arg) else [arg])
               if isinstance(t, torch.Tensor)]
    _fold_dtypes(graph, tensors, 1 if is_module else 0)
    functionalize_writes(graph)
    return _ConverterState(
        ts_model=scripted, ts_graph=graph,
        name_to_param=dict(scripted.named_parameters()) if is_module else {},
        name_to_buffer=dict(scripted.named_buffers()) if is_module else {},
        name_to_non_tensor_attributes={}, name_to_constant={})


def _fold_dtypes(graph: torch._C.Graph, tensors: list, first: int) -> None:
    """Reads of the tensor inputs' dtype and device (``prim::dtype(x)``, which ``x[i] = 0.0``
    makes) become constants of the example's: the converter's own helper for them cannot run
    inside a branch or loop body."""
    from onnxport.compat.jit_scalar_type import JitScalarType

    inputs = list(graph.inputs())[first:]
    if len(inputs) != len(tensors):
        return
    for value, tensor in zip(inputs, tensors):
        for use in list(value.uses()):
            reader = use.user
            if reader.kind() not in ("prim::dtype", "prim::device"):
                continue
            known = int(JitScalarType.from_dtype(tensor.dtype)) if \
                reader.kind() == "prim::dtype" else tensor.device
            with graph.insert_point_guard(reader):
                reader.output().replaceAllUsesWith(graph.insertConstant(known))
            reader.destroy()


def _bind_arguments(graph: torch._C.Graph, args: tuple, first: int) -> None:
    """Replace the graph inputs that ``args`` gives numbers, bools, strings or None (after the
    ``first`` inputs, the module itself) with constants of those values, and a list or tuple
    of tensors with one input per tensor, in the order the tensors are flattened."""
    inputs = list(graph.inputs())[first:]
    order = list(graph.inputs())[:first]
    replaced = []
    with graph.insert_point_guard(next(iter(graph.nodes()), graph.return_node())):
        for value, arg in zip(inputs, args):
            if isinstance(arg, torch.Tensor):
                order.append(value)
                continue
            if is_tensor_sequence(arg):
                elements = [graph.addInput() for _ in arg]
                for element in elements:
                    element.setType(torch._C.TensorType.get())
                kind = "prim::ListConstruct" if isinstance(arg, list) else "prim::TupleConstruct"
                built = graph.insertNode(graph.create(kind, elements))
                built.output().setType(value.type())
                value.replaceAllUsesWith(built.output())
                order += elements
            else:
                value.replaceAllUsesWith(graph.insertConstant(arg))
            replaced.append(value)
    if not replaced:
        return
    for value in replaced:
        graph.eraseInput(list(graph.inputs()).index(value))
    current = list(graph.inputs())
    graph.permuteInputs([current.index(value) for value in order])
    # Branches on those values (``if flag and mode == "scale"``) are decided now, as tracing
    # decides them.
    torch._C._jit_pass_constant_propagation(graph)
