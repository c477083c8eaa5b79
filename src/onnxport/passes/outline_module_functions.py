"""OutlineModuleFunctions (``export_modules_as_functions``): the nodes a chosen module emitted
become one ONNX local function, called where the module was, with the module's attributes as the
call's attributes. Precondition: every node carries the path of the module that emitted it
(``onnxport.module``, from torch.export's ``nn_module_stack`` or the TorchScript scope), so a
module's nodes are the nodes whose path is the module's or below it.

It runs once, after the rewrites of its preset (``presets.py``): they see the flat graph, across
modules, and never have to look inside a function; and outlining again would outline the calls.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import onnx_ir as ir
import onnx_ir.passes.common as common
import torch

from onnxport import diagnostics
from onnxport.errors import InvalidExportOptionsError

# Local functions with attributes (AttributeProto in FunctionProto) came with opset 15.
MIN_OPSET = 15
# A constant this small that is not a weight is copied into the function as a Constant node
# (a Reshape's target shape, an epsilon), so that the body says what it computes.
_EMBEDDED_CONSTANT_LIMIT = 16


@dataclasses.dataclass
class ModuleInstance:
    """One module to export as a function: where it sits and what its call carries."""

    path: str
    module_type: type
    attributes: dict[str, Any]


def modules_to_export_as_functions(model: Any, option: Any, opset: int) -> list[ModuleInstance]:
    """The modules of ``model`` that ``export_modules_as_functions=option`` selects (True: all
    but the root; a collection of ``nn.Module`` classes: the instances of exactly those), or
    an ``InvalidExportOptionsError`` that says what is accepted."""
    if option is False or option is None:
        return []
    if option is not True:
        if isinstance(option, (str, bytes)) or not isinstance(option, Iterable):
            raise InvalidExportOptionsError(
                f"export_modules_as_functions must be True, False or a set of torch.nn.Module "
                f"classes, got {option!r} ({type(option).__name__})")
        option = set(option)
        wrong = [c for c in option if not (isinstance(c, type) and issubclass(c, torch.nn.Module))]
        if wrong:
            raise InvalidExportOptionsError(
                f"export_modules_as_functions takes torch.nn.Module classes (e.g. "
                f"{{torch.nn.Linear}}), got {', '.join(repr(c) for c in wrong)}")
    if opset < MIN_OPSET:
        raise InvalidExportOptionsError(
            f"export_modules_as_functions needs opset_version >= {MIN_OPSET} (ONNX local "
            f"functions with attributes), got opset_version={opset}; pass opset_version="
            f"{MIN_OPSET} or later, or leave export_modules_as_functions=False")
    if not isinstance(model, torch.nn.Module):
        raise InvalidExportOptionsError(
            f"export_modules_as_functions needs the model as a torch.nn.Module, to know its "
            f"submodules; got {type(model).__name__}")
    return [ModuleInstance(path, type(module), module_attributes(module))
            for path, module in model.named_modules()
            if path and (option is True or type(module) in option)]


def module_attributes(module: torch.nn.Module) -> dict[str, Any]:
    """The module's public attributes that ONNX attributes can hold (numbers, strings and
    lists of them): ``in_features``, ``kernel_size``, ``eps``... as torch.onnx records them."""
    attributes: dict[str, Any] = {}
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or name == "training":
            continue
        if isinstance(value, (bool, int, float, str)):
            attributes[name] = int(value) if isinstance(value, bool) else value
        elif isinstance(value, (tuple, list)) and value:
            if all(isinstance(v, (bool, int)) for v in value):
                attributes[name] = [int(v) for v in value]
            elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                attributes[name] = [float(v) for v in value]
            elif all(isinstance(v, str) for v in value):
                attributes[name] = list(value)
    return attributes


class OutlineModuleFunctions(ir.passes.InPlacePass):
    """Outline each instance's nodes into a call of a local function, innermost modules first
    (so that a function's body calls its submodules' functions). Instances whose bodies are
    the same node for node share one function. An instance left inline is said, with why, in a
    diagnostic (OPX0008). ``weight_names``: the model's weights, which stay inputs of the
    function even when small (other small constants are copied into its body)."""

    def __init__(self, instances: list[ModuleInstance], weight_names: Iterable[str] = ()):
        super().__init__()
        self.instances = instances
        self.weight_names = set(weight_names)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not self.instances:
            return ir.passes.PassResult(model, False)
        outliner = _Outliner(model, self.weight_names)
        for instance in sorted(self.instances, key=lambda i: -i.path.count(".")):
            reason = outliner.outline(instance)
            if reason:
                diagnostics.record("OPX0008", f"module {instance.path} "
                                   f"({instance.module_type.__name__}): {reason}; its nodes "
                                   f"stay in the graph")
        common.TopologicalSortPass()(model)
        common.RemoveUnusedNodesPass()(model)
        return ir.passes.PassResult(model, outliner.calls > 0)


class _Outliner:
    def __init__(self, model: ir.Model, weight_names: set[str]):
        self.model = model
        self.graph = model.graph
        # Kept up to date as nodes are outlined, so that each module costs what it holds, not
        # a walk over the whole graph: the main graph's nodes by module path, each node's
        # place in graph order (a call takes its last member's), and the node names.
        self.by_path: dict[str, set[ir.Node]] = {}
        self.place: dict[ir.Node, int] = {}
        self.path_of = _module_paths(self.graph)
        for index, node in enumerate(self.graph):
            self.by_path.setdefault(self.path_of[node], set()).add(node)
            self.place[node] = index
        self.names = {node.name for node in self.graph}
        self.weight_names = weight_names
        # (domain, class name, attribute names, body signature) -> the function.
        self.functions: dict[tuple, ir.Function] = {}
        self.calls = 0

    def outline(self, instance: ModuleInstance) -> str:
        """Replace the instance's nodes with one call; return why not, if it cannot be done."""
        path = instance.path
        nodes = sorted((node for module_path, members in self.by_path.items()
                        if _within(module_path, path) for node in members),
                       key=self.place.__getitem__)
        if not nodes:
            return ""  # nothing emitted (a Dropout at inference, an unused module)
        return self._outline_nodes(instance, nodes, split=True)

    def _outline_nodes(self, instance: ModuleInstance, nodes: list[ir.Node], split: bool) -> str:
        path = instance.path
        if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
               for n in nodes for a in n.attributes.values()):
            return "it contains control flow, whose branches read values outside the module"
        members = set(nodes)
        inputs, embedded = self._inputs_of(nodes, members)
        outputs = [v for n in nodes for v in n.outputs
                   if v.is_graph_output() or any(u.node not in members for u in v.uses())]
        if not outputs:
            return ""
        if self._outside_path_between(nodes, members, outputs):
            # A module called twice (fc(tanh(fc(x)))): its calls are the parts of its nodes
            # that are not connected to each other, each outlined on its own.
            parts = _connected_parts(nodes, members) if split else [nodes]
            if len(parts) > 1:
                reasons = [self._outline_nodes(instance, part, split=False) for part in parts]
                return next((r for r in reasons if r), "")
            return ("a value leaves the module and comes back into it (the module is called "
                    "more than once or its calls interleave)")
        body_inputs = [ir.Value(name=v.name) for v in inputs]
        replacements = dict(zip(inputs, body_inputs))
        constants = []
        for value in embedded:
            constant = ir.Node("", "Constant", [], attributes=[ir.AttrTensor("value",
                               value.const_value)], name=f"{value.name}/Constant")
            constant.outputs[0].name = value.name
            replacements[value] = constant.outputs[0]
            constants.append(constant)
        call = ir.Node("", "_pending", inputs, num_outputs=len(outputs),
                       name=self._node_name(f"{path}/{instance.module_type.__name__}"),
                       metadata_props={"onnxport.module": path})
        for old, new in zip(outputs, call.outputs):
            new.name, new.type, new.shape = old.name, old.type, old.shape
            for usage in list(old.uses()):
                if usage.node not in members:
                    usage.node.replace_input_with(usage.idx, new)
            for index, output in enumerate(self.graph.outputs):
                if output is old:
                    self.graph.outputs[index] = new
        self.graph.insert_after(nodes[-1], call)
        self.place[call] = self.place[nodes[-1]]
        for node in nodes:
            self.by_path[self.path_of.pop(node)].discard(node)
            del self.place[node]
        self.by_path.setdefault(path, set()).add(call)
        self.path_of[call] = path
        for node in nodes:
            for index, value in enumerate(node.inputs):
                if value in replacements:
                    node.replace_input_with(index, replacements[value])
        self.graph.remove(nodes, safe=False)
        for value in body_inputs + [v for n in constants + nodes for v in n.outputs]:
            value.type = value.shape = None  # one body serves calls of different shapes
        body = ir.Graph(body_inputs, outputs, nodes=constants + nodes,
                        opset_imports=self._opsets_of(constants + nodes))
        function = self._function_for(instance, body)
        call.domain, call.op_type = function.domain, function.name
        call.attributes.update(_call_attributes(instance.attributes))
        self.calls += 1
        return ""

    def _node_name(self, base: str) -> str:
        """``base``, or ``base_1``... when a module called twice has a call named so."""
        name, count = base, 0
        while name in self.names:
            count += 1
            name = f"{base}_{count}"
        self.names.add(name)
        return name

    def _inputs_of(self, nodes, members) -> tuple[list[ir.Value], list[ir.Value]]:
        """The values the nodes read from outside (weights included: a function holds no
        initializers), and the small constants copied into the body instead."""
        inputs: dict[ir.Value, None] = {}
        embedded: dict[ir.Value, None] = {}
        for node in nodes:
            for value in node.inputs:
                if value is None or value.producer() in members:
                    continue
                tensor = value.const_value
                if (tensor is not None and value.is_initializer() and not value.is_graph_input()
                        and value.name not in self.weight_names
                        and tensor.size <= _EMBEDDED_CONSTANT_LIMIT):
                    embedded[value] = None
                else:
                    inputs[value] = None
        return list(inputs), list(embedded)

    def _outside_path_between(self, nodes, members, outputs) -> bool:
        """True when a node outside the module both reads what it computes and feeds it: one
        call could not then stand for the module. Such a node lies between the module's first
        and last node in graph order, so the search stops at the last."""
        order = self.place
        last = order[nodes[-1]]
        frontier = [u.node for v in outputs for u in v.uses()
                    if u.node not in members and order.get(u.node, last + 1) < last]
        seen = set()
        while frontier:
            node = frontier.pop()
            if node in seen:
                continue
            seen.add(node)
            for value in node.outputs:
                for usage in value.uses():
                    if usage.node in members:
                        return True
                    if order.get(usage.node, last + 1) < last:
                        frontier.append(usage.node)
        return False

    def _opsets_of(self, nodes) -> dict[str, int]:
        opsets = {"": self.model.opset_imports.get("", 18)}
        for node in nodes:
            if node.domain not in ("", "ai.onnx"):
                opsets[node.domain] = self.model.opset_imports.get(node.domain, 1)
        return opsets

    def _function_for(self, instance: ModuleInstance, body: ir.Graph) -> ir.Function:
        module_type = instance.module_type
        domain = module_type.__module__
        key = (domain, module_type.__qualname__, tuple(instance.attributes), _signature(body))
        function = self.functions.get(key)
        if function is not None:
            return function
        name, count = module_type.__qualname__, 0
        while (domain, name, "") in self.model.functions:
            count += 1
            name = f"{module_type.__qualname__}_{count}"
        function = ir.Function(domain, name, graph=body, attributes=[
            ir.Attr(attribute, _attribute_type(value), None)
            for attribute, value in instance.attributes.items()])
        self.model.functions[function.identifier()] = function
        self.model.graph.opset_imports.setdefault(domain, 1)
        self.functions[key] = function
        return function


def _module_paths(graph: ir.Graph) -> dict[ir.Node, str]:
    """Each node's module path. A node a pass made without one (a mask bias shared by every
    layer) belongs to the innermost module around all the nodes that read it, so that it
    does not stand between the nodes of that module."""
    paths: dict[ir.Node, str] = {}
    for node in reversed(graph):
        path = node.metadata_props.get("onnxport.module", "")
        # Translated nodes name their ATen op; those of the root module have no path.
        if not path and "onnxport.aten" not in node.metadata_props:
            readers = [paths.get(u.node, "") for v in node.outputs for u in v.uses()]
            if readers and all(readers) and not any(v.is_graph_output() for v in node.outputs):
                path = _common_module(readers)
        paths[node] = path
    return paths


def _common_module(paths: list[str]) -> str:
    common = paths[0].split(".")
    for path in paths[1:]:
        parts = path.split(".")
        length = 0
        while length < min(len(common), len(parts)) and common[length] == parts[length]:
            length += 1
        common = common[:length]
    return ".".join(common)


def _connected_parts(nodes: list[ir.Node], members: set[ir.Node]) -> list[list[ir.Node]]:
    """``nodes`` grouped by connection through values they pass each other, in graph order."""
    parent = {node: node for node in nodes}

    def root(node):
        while parent[node] is not node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for node in nodes:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer in members:
                parent[root(producer)] = root(node)
    parts: dict[ir.Node, list[ir.Node]] = {}
    for node in nodes:
        parts.setdefault(root(node), []).append(node)
    return list(parts.values())


def _within(module_path: str, path: str) -> bool:
    return module_path == path or module_path.startswith(path + ".")


def _signature(body: ir.Graph) -> tuple:
    """What the body computes, independent of value names: two instances with the same
    signature share one function."""
    position: dict[ir.Value, tuple] = {v: ("input", i) for i, v in enumerate(body.inputs)}
    items = []
    for index, node in enumerate(body):
        for output_index, value in enumerate(node.outputs):
            position[value] = (index, output_index)
        attributes = tuple(sorted((name, _attribute_key(attr))
                                  for name, attr in node.attributes.items()))
        items.append((node.domain, node.op_type, node.overload, len(node.outputs), attributes,
                      tuple(position.get(v) if v is not None else None for v in node.inputs)))
    return tuple(items), tuple(position[v] for v in body.outputs)


def _attribute_key(attr: ir.Attr) -> Any:
    if attr.type == ir.AttributeType.TENSOR:
        tensor = attr.value
        return (str(tensor.dtype), tuple(tensor.shape), tensor.tobytes())
    value = attr.value
    return tuple(value) if isinstance(value, (list, tuple)) else value


_TYPES = {int: ir.AttributeType.INT, float: ir.AttributeType.FLOAT, str: ir.AttributeType.STRING}
_LIST_TYPES = {int: ir.AttributeType.INTS, float: ir.AttributeType.FLOATS,
               str: ir.AttributeType.STRINGS}


def _attribute_type(value: Any) -> ir.AttributeType:
    if isinstance(value, list):
        return _LIST_TYPES[type(value[0])]
    return _TYPES[type(value)]


def _call_attributes(attributes: dict[str, Any]) -> dict[str, ir.Attr]:
    return {name: ir.Attr(name, _attribute_type(value), value)
            for name, value in attributes.items()}
