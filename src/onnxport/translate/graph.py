"""Walks a captured FX graph of ATen calls once and emits an ``onnx_ir`` graph.

Each call is looked up in the registry and translated with the builder ``g``; calls the
library has no translation for are decomposed one node at a time (see ``decompose``).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import os
import re
import warnings
from typing import Any

import onnx_ir as ir
import sympy
import torch
import torch.fx
from onnx_ir.tensor_adapters import from_torch_dtype

from onnxport import diagnostics
from onnxport.dtypes import QUANTIZED_AS_INTEGER
from onnxport._version import __version__
from onnxport.diagnostics.recorder import relative_path
from onnxport.errors import DynamicDimensionFixedWarning, TranslationError, UnsupportedOpsError
from onnxport.translate import decompose
from onnxport.translate.builder import (GIVEN_SIZES, RECORDED_SIZES_DOUBTFUL,
                                        SHAPE_AT_THE_EXAMPLE, GraphBuilder, Provenance)
from onnxport.translate.number_inputs import unique_name
from onnxport.translate.ops._helpers import fail_unless
from onnxport.translate.ops.quantized import refuse_quantized_operands
from onnxport.translate.registry import Registry, aten_name

# Calls that only carry information for torch (asserts, shape guards); they emit nothing.
_IGNORED_TARGETS = {
    "aten::_assert_scalar", "aten::_assert_async.msg", "aten::_assert_async",
    "aten::sym_constrain_range_for_size", "aten::sym_constrain_range",
    "aten::_assert_tensor_metadata", "aten::_functional_assert_async.msg",
    "aten::_functional_sym_constrain_range_for_size", "aten::_functional_sym_constrain_range",
    "aten::_assert_scalar.default",
}

_SOURCE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


@dataclasses.dataclass
class TranslationContext:
    """What the translator needs to know about the captured program besides its graph."""

    graph_module: torch.fx.GraphModule
    user_inputs: list[str]  # placeholder names, in order
    onnx_input_names: list[str]
    weights: dict[str, tuple[str, torch.Tensor | None]]  # placeholder -> (onnx name, tensor)
    user_outputs: list[int]  # indices into the FX output tuple
    onnx_output_names: list[str]
    symbol_names: dict[str, str]  # torch symbol ("s0") -> ONNX dim name ("batch")
    # (input placeholder, axis) -> the largest size the program holds for: checked at run time
    upper_bounds: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)


def translate_graph(
    context: TranslationContext,
    registry: Registry,
    opset: int,
    *,
    export_params: bool = True,
    keep_initializers_as_inputs: bool = False,
    custom_opsets: dict[str, int] | None = None,
    fused_ops: bool = True,
) -> ir.Model:
    """Translate the captured graph into an ONNX model at ``opset`` (``custom_opsets``: the
    versions of custom domains, 1 for those not named; ``fused_ops=False``: no opset-23 fused
    ops, their decomposed forms instead)."""
    graph = ir.Graph([], [], nodes=[], opset_imports={"": opset}, name="main_graph")
    g = GraphBuilder(graph, opset, custom_opsets, fused_ops=fused_ops)
    translator = _Translator(context, registry, g)
    translator.check_supported()
    translator.run(export_params, keep_initializers_as_inputs)
    unique_value_names(graph)
    for domain, version in g.custom_opsets.items():
        graph.opset_imports.setdefault(domain, version)
    model = ir.Model(graph, ir_version=_ir_version(opset), producer_name="onnxport",
                     producer_version=__version__)
    for identifier, function in g.functions.items():
        model.functions[identifier] = function
    return model


def missing_translations(context: TranslationContext, registry: Registry, opset: int) -> list[str]:
    """The ops of the captured graph (or of the decompositions of its ops) that have no
    translation at ``opset``, all of them, without translating anything."""
    g = GraphBuilder(ir.Graph([], [], nodes=[], opset_imports={"": opset}), opset)
    try:
        _Translator(context, registry, g).check_supported()
    except UnsupportedOpsError as error:
        return list(error.missing)
    return []


def _ir_version(opset: int) -> int:
    if opset >= 23:
        return 11
    return 10 if opset >= 21 else 8


class _Translator:
    def __init__(self, context: TranslationContext, registry: Registry, g: GraphBuilder):
        self.context = context
        self.registry = registry
        self.g = g
        self.env: dict[torch.fx.Node, Any] = {}
        self._decomposing: list[str] = []  # the ops whose decompositions are being translated
        # Each decomposed node's traced decomposition: traced once, by check_supported.
        self._decompositions: dict[torch.fx.Node, decompose.Decomposition] = {}

    # -- what the graph needs ------------------------------------------------------------
    def check_supported(self) -> None:
        """Raise one error naming every call that has neither a translation nor a decomposition,
        including calls that only appear inside the decompositions of other calls (which are
        traced here, once, and kept for the translation)."""
        missing: dict[str, list[str]] = {}
        graphs = [m.graph for m in self.context.graph_module.modules()
                  if isinstance(m, torch.fx.GraphModule)]
        for graph in graphs:
            self._find_missing(graph.nodes, (), missing)
        if missing:
            raise UnsupportedOpsError(missing, self.g.opset)
        _check_no_complex(graphs, self.context)

    def _find_missing(self, nodes, decomposing: tuple[str, ...],
                      missing: dict[str, list[str]]) -> None:
        """Add to ``missing`` the calls among ``nodes`` (and in their decompositions) that
        cannot be translated; ``decomposing`` names the ops whose decomposition they are in."""
        for node in nodes:
            if node.op != "call_function" or not self._needs_translation(node):
                continue
            name = aten_name(node.target)
            if self.registry.lookup(name, self.g.opset) is not None:
                continue
            place = _source_of(node) or _scope_of(node) or node.name
            if decomposing and decomposing[0] != name:
                place += f" (in the decomposition of {decomposing[0]})"
            if name in decomposing:
                missing.setdefault(name, []).append(place + ": its decomposition calls it again")
                continue
            if not decompose.has_decomposition(node.target):
                # (A user's registry, an OnnxRegistry, may not know.)
                lowest = getattr(self.registry, "lowest_opset", lambda _: None)(name)
                missing.setdefault(name, []).append(
                    place if lowest is None else
                    f"{place}: translated from opset_version {lowest} on")
                continue
            dynamic = self._dynamic_input_dims()
            try:
                traced = self._decomposition(node)
            except Exception as error:  # torch raises many kinds; all mean "cannot decompose"
                first_line = (str(error).strip().splitlines() or [""])[0]
                missing.setdefault(name, []).append(
                    f"{place}: decomposing it failed ({type(error).__name__}: {first_line})")
                continue
            self._warn_fixed_by(name, place, dynamic)
            _adopt(node, traced.module, decomposition=True)
            self._find_missing(traced.module.graph.nodes, decomposing + (name,), missing)

    def _dynamic_input_dims(self) -> list[tuple[str, int, torch.SymInt]]:
        """(ONNX input name, axis, size) of each input dim the program keeps symbolic."""
        placeholders = {n.name: n for n in self.context.graph_module.graph.nodes
                        if n.op == "placeholder"}
        found = []
        for fx_name, onnx_name in zip(self.context.user_inputs, self.context.onnx_input_names):
            value = placeholders[fx_name].meta.get("val")
            for axis, size in enumerate(getattr(value, "shape", ())):
                if isinstance(size, torch.SymInt) and not size.node.expr.is_number:
                    found.append((onnx_name, axis, size))
        return found

    @staticmethod
    def _warn_fixed_by(name: str, place: str,
                       dynamic: list[tuple[str, int, torch.SymInt]]) -> None:
        """Warn for each dim of ``dynamic`` that tracing the decomposition of ``name`` made a
        number (torch's bucketize searches a length it reads as an int): the file then takes
        only the example's size there, which the capture did not know."""
        for onnx_name, axis, size in dynamic:
            if size.node.expr.is_number:
                warnings.warn(
                    f"axis {axis} of input '{onnx_name}' is dynamic, but the decomposition of "
                    f"{name} at {place} reads its size as a number: the ONNX model takes only "
                    f"size {int(size.node.expr)} there", DynamicDimensionFixedWarning,
                    stacklevel=2)

    @staticmethod
    def _needs_translation(node: torch.fx.Node) -> bool:
        """False for the calls that emit nothing (asserts, getitem, mode-setting wrappers,
        shape computations whose result torch already knows)."""
        if node.target is operator.getitem or aten_name(node.target) in _IGNORED_TARGETS:
            return False
        if _is_tuple_type(node.target):
            return False
        if _inlined_subgraph(node) is not None:
            return False
        return _static_scalar(node.meta.get("val")) is None

    # -- translation -------------------------------------------------------------------------
    def run(self, export_params: bool, keep_initializers_as_inputs: bool) -> None:
        g = self.g
        graph = g.graph
        context = self.context
        placeholders = {n.name: n for n in context.graph_module.graph.nodes if n.op == "placeholder"}
        for fx_name, onnx_name in zip(context.user_inputs, context.onnx_input_names):
            node = placeholders[fx_name]
            value = ir.Value(name=onnx_name)
            self._set_meta(value, node.meta.get("val"))
            graph.inputs.append(value)
            self.env[node] = self._within_bounds(fx_name, value)
        named: dict[str, tuple[ir.Value, torch.Tensor]] = {}
        for fx_name, (onnx_name, tensor) in context.weights.items():
            node = placeholders[fx_name]
            if tensor is None:
                continue
            if onnx_name in named:
                # One weight twice (a scripted submodule called twice has a copy of its
                # weights per call): one initializer; a different tensor gets its own name.
                first, first_tensor = named[onnx_name]
                if _same_tensor(first_tensor, tensor):
                    self.env[node] = first
                    continue
                onnx_name = unique_name(onnx_name, set(named))
            if export_params:
                value = g.initializer(onnx_name, tensor)
                if keep_initializers_as_inputs:
                    graph.inputs.append(value)
            else:
                value = ir.Value(name=onnx_name)
                self._set_meta(value, tensor)
                graph.inputs.append(value)
            named[onnx_name] = (value, tensor)
            self.env[node] = value
        output_node = None
        # Which ONNX value holds each FX node's result, taken when it is made (an in-place op
        # later rebinds the node to its own result): verification compares them one by one.
        fx_values = graph.meta["onnxport.fx_values"] = {}
        for node in context.graph_module.graph.nodes:
            if node.op == "call_function":
                self._translate_node(node)
                if isinstance(self.env.get(node), ir.Value):
                    fx_values[node.name] = self.env[node]
            elif node.op == "output":
                output_node = node
            elif node.op == "get_attr":
                attribute = getattr(context.graph_module, node.target)
                if isinstance(attribute, torch.Tensor):
                    self.env[node] = g.initializer(node.target, attribute)
                elif isinstance(attribute, torch.fx.GraphModule):
                    self.env[node] = Subgraph(self, node, attribute)
        assert output_node is not None
        self._add_outputs(output_node)

    def _within_bounds(self, fx_name: str, value: ir.Value) -> ir.Value:
        """``value``, through a check for each of its dims that the program holds up to a
        size only (``upper_bounds``): the run fails beyond, as PyTorch's program does, where
        the graph would answer wrongly (a branch taken on the size, a count of pieces)."""
        for (name, axis), upper in sorted(self.context.upper_bounds.items()):
            if name != fx_name:
                continue
            self.g.provenance = Provenance(value_prefix=f"{value.name}_bounded")
            value = fail_unless(
                self.g, value, axis, lambda size: self.g.op("LessOrEqual", size,
                                                            self.g.const([upper])),
                f"{value.name}_axis_{axis}_at_most_{upper}")
        return value

    def _add_outputs(self, output_node: torch.fx.Node) -> None:
        g = self.g
        results = output_node.args[0]
        if not isinstance(results, (list, tuple)):
            results = (results,)
        used: set[int] = set()
        g.provenance = Provenance(value_prefix="output")
        for index, onnx_name in zip(self.context.user_outputs, self.context.onnx_output_names):
            item = results[index]
            value = self.env.get(item) if isinstance(item, torch.fx.Node) else None
            if value is None:
                value = _number_output(g, item) if not isinstance(item, torch.fx.Node) else None
                if value is None:
                    raise TranslationError(f"output {index} ({item}) was not translated")
            if isinstance(value, (int, float, bool)):
                value = _number_output(g, value)
            needs_identity = (
                id(value) in used
                or value.producer() is None
                or value in self.g.graph.inputs
                or value.is_graph_output()
            )
            meta = item.meta.get("val") if isinstance(item, torch.fx.Node) else None
            # (of an unknown shape: a number computed with a float, x.shape[1] + 0.5)
            number = isinstance(meta, (torch.SymInt, torch.SymFloat, torch.SymBool)) and \
                (value.shape is None or list(value.shape) == [1])
            if number:  # a number the model returns: 0-d
                value = g.op("Reshape", value, g.const([], ir.DataType.INT64))
                if isinstance(meta, torch.SymFloat):  # (double: _number_output)
                    value = g.op("Cast", value, to_i=int(ir.DataType.DOUBLE))
            elif needs_identity:
                if value.name == onnx_name:  # a constant returned as it is: its name is taken
                    onnx_name = f"{onnx_name}_output"
                value = g.op("Identity", value)
            used.add(id(value))
            value.name = onnx_name
            if isinstance(item, torch.fx.Node):
                self._set_meta(value, meta)
            if number:
                value.shape = ir.Shape([])
                if isinstance(meta, torch.SymFloat):
                    value.dtype = ir.DataType.DOUBLE
            g.graph.outputs.append(value)

    def _translate_node(self, node: torch.fx.Node) -> None:
        target = node.target
        if target is operator.getitem:
            container = self.env[node.args[0]]
            self.env[node] = container[node.args[1]]
            return
        if _is_tuple_type(target):
            # A decomposition that returns a named tuple (torch.return_types...) builds it.
            items = list(torch.fx.node.map_arg(node.args, self._lookup))
            kwargs = torch.fx.node.map_arg(node.kwargs, self._lookup)
            items += [kwargs[field] for field in getattr(target, "_fields", ())[len(items):]]
            self.env[node] = tuple(items)
            return
        name = aten_name(target)
        if name in _IGNORED_TARGETS:
            return
        inlined = _inlined_subgraph(node)
        if inlined is not None:
            submodule, operands = inlined
            module = getattr(self.context.graph_module, submodule.target)
            inputs = [self.env[o] if isinstance(o, torch.fx.Node) else o for o in operands]
            self.env[node] = translate_subgraph(self, node, module, inputs)
            return
        expected = node.meta.get("val")
        static = _static_scalar(expected)
        if static is not None:
            # A shape computation whose result torch already knows: no nodes needed.
            self.env[node] = static
            return
        g = self.g
        g.provenance = Provenance(_scope_of(node), name, _source_of(node), node.name,
                                  node.meta.get("onnxport_decomposed_from", ""))
        g.expected = expected
        g.node = node  # (read by translations that look at how their result is used)
        g.dim = self.dim
        args = torch.fx.node.map_arg(node.args, self._lookup)
        kwargs = torch.fx.node.map_arg(node.kwargs, self._lookup)
        refuse_quantized_operands(name, args, kwargs)
        written = _written_arguments(target)
        if written and node.kwargs:  # an out= overload computes what the functional one does
            names = {name for _, name in written}
            kwargs = {key: value for key, value in kwargs.items() if key not in names}
        translation = self.registry.lookup(name, g.opset)
        if translation is None:
            result = self._translate_by_decomposition(node, name)
        else:
            g.arguments = torch.fx.node.map_arg(node.args, lambda n: n.meta.get("val"))
            g.node_meta = node.meta
            try:
                result = translation.function(g, *args, **kwargs)
            except UnsupportedOpsError:
                raise
            except TranslationError as error:
                raise _placed(error, _source_of(node)) from error.__cause__
            except Exception as error:
                raise TranslationError(
                    f"translating {name} (node {node.name!r}"
                    f"{', at ' + _source_of(node) if _source_of(node) else ''}) failed: "
                    f"{type(error).__name__}: {error}{_run_time_number_hint(node, error)}"
                ) from error
        self._bind(node, result, expected)
        _carry_doubt((args, kwargs), result)
        # An in-place op: later reads of the tensor it wrote see the new value. (Writes into
        # views were functionalized at capture, so the written tensor is never a view here.)
        for position, argument in written:
            tensor = node.args[position] if position < len(node.args) else \
                node.kwargs.get(argument)
            if isinstance(tensor, torch.fx.Node) and isinstance(result, ir.Value):
                self.env[tensor] = result

    def _translate_by_decomposition(self, node: torch.fx.Node, name: str) -> Any:
        """Translate the traced decomposition of ``node`` in its place. ``check_supported``
        has looked through it already; the checks here guard calls made without it."""
        place = _source_of(node) or _scope_of(node) or node.name
        if not decompose.has_decomposition(node.target):
            raise UnsupportedOpsError({name: [place]}, self.g.opset)
        if name in self._decomposing:
            raise UnsupportedOpsError({name: [f"{place}: its decomposition calls it again"]},
                                      self.g.opset)
        try:
            traced = self._decomposition(node)
        except Exception as error:
            raise TranslationError(f"decomposing {name} (node {node.name!r}, at {place}) failed: "
                                   f"{type(error).__name__}: {error}") from error
        inputs = [self.env[n] for n in decompose.decomposition_inputs(node, traced)]
        diagnostics.record("OPX0001", f"{name} (node {node.name!r}) has no translation at opset "
                           f"{self.g.opset}; it was decomposed", source=_source_of(node),
                           op=name, node=node.name)
        self._decomposing.append(name)
        try:
            return translate_subgraph(self, node, traced.module, inputs, decomposition=True)
        finally:
            self._decomposing.pop()

    def _decomposition(self, node: torch.fx.Node) -> decompose.Decomposition:
        traced = self._decompositions.get(node)
        if traced is None:
            traced = self._decompositions[node] = decompose.decomposition(node)
        return traced

    def _bind(self, node: torch.fx.Node, result: Any, expected: Any) -> None:
        prefix = f"{node.name}__"
        if isinstance(result, (tuple, list)):
            metas = expected if isinstance(expected, (tuple, list)) else [None] * len(result)
            for i, (value, meta) in enumerate(zip(result, metas)):
                if isinstance(value, ir.Value) and value.name and value.name.startswith(prefix):
                    value.name = f"{node.name}_{i}"
                    self._set_meta(value, meta)
            self.env[node] = tuple(result)
            return
        if isinstance(result, ir.Value):
            if result.name and result.name.startswith(prefix):
                result.name = node.name
                self._set_meta(result, expected)
            if isinstance(expected, torch.SymInt):
                self._set_meta(result, expected)
        self.env[node] = result

    def _lookup(self, node: torch.fx.Node) -> Any:
        return self.env[node]

    # -- metadata --------------------------------------------------------------------------
    def _set_meta(self, value: ir.Value, meta: Any) -> None:
        if isinstance(value.type, ir.SequenceType):
            return  # (a returned list, ops/control_flow.list_of_rows: torch saw its rows
            # stacked, and the translation gave the sequence its items' type)
        if isinstance(meta, torch.Tensor) and meta.is_complex():
            # Inside the graph a complex tensor is its real and imaginary parts on a last axis
            # of 2 (ONNX DFT's layout); only the ops of COMPLEX_LAYOUT_OPS meet one.
            value.dtype = from_torch_dtype(meta.real.dtype)
            value.shape = ir.Shape([*(self.dim(d) for d in meta.shape), 2])
            value.meta["complex"] = True
        elif isinstance(meta, torch.Tensor):
            # A quantized tensor is its integers in the graph (ops/quantized.py), whatever
            # dtype the fake run gave it (torch.export's is float).
            if "onnxport.quantization" not in value.meta:
                value.dtype = from_torch_dtype(QUANTIZED_AS_INTEGER.get(meta.dtype, meta.dtype))
            if not value.meta.get(SHAPE_AT_THE_EXAMPLE):
                dims = [self.dim(d) for d in meta.shape]
                given = value.meta.get(GIVEN_SIZES) or ()
                if len(given) == len(dims) and any(
                        size is not None and size != d for size, d in zip(given, dims)):
                    value.meta[RECORDED_SIZES_DOUBTFUL] = True
                if value.meta.get(RECORDED_SIZES_DOUBTFUL):  # (declared unknown: ONNX Runtime
                    # plans buffers by the names of the dims a file declares)
                    dims = [size if isinstance(size, int) else None for size in given] \
                        if len(given) == len(dims) else [None] * len(dims)
                value.shape = ir.Shape(dims)
        elif isinstance(meta, torch.SymInt):
            # SymInts live in the graph as 1-D int64 tensors of one element.
            value.dtype = ir.DataType.INT64
            value.shape = ir.Shape([1])
            value.meta["symint"] = meta
            value.meta["dim"] = self.dim(meta)
        elif isinstance(meta, torch.SymFloat):
            value.dtype = ir.DataType.DOUBLE  # a Python float (ops/symbolic.py)
            value.meta["symnumber"] = True  # (1-D [1] when computed from a SymInt)
        elif isinstance(meta, torch.SymBool):
            value.dtype = ir.DataType.BOOL
            value.meta["symnumber"] = True

    def dim(self, d: Any) -> int | ir.SymbolicDim:
        if isinstance(d, int):
            return d
        expr = d.node.expr
        if expr.is_number:
            return int(expr)
        return ir.SymbolicDim(self.dim_name(expr))

    def dim_name(self, expr: Any) -> str:
        if isinstance(expr, sympy.Symbol):
            return self.context.symbol_names.get(expr.name, expr.name)
        # By name: torch's symbols carry assumptions (integer, positive), so a plain
        # Symbol("s0") is another symbol and would never match.
        names = self.context.symbol_names
        return str(expr.xreplace({symbol: sympy.Symbol(names[symbol.name])
                                  for symbol in expr.free_symbols if symbol.name in names}))


def translate_subgraph(translator: "_Translator", parent: torch.fx.Node,
                       module: torch.fx.GraphModule, inputs: list, decomposition: bool = False) -> Any:
    """Translate ``module``'s graph in place of ``parent`` with ``inputs`` for its placeholders.

    For a decomposition, each node records the op it was decomposed from.
    """
    _adopt(parent, module, decomposition)
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    for placeholder, value in zip(placeholders, inputs):
        translator.env[placeholder] = value
    result = None
    for sub in module.graph.nodes:
        if sub.op == "call_function":
            translator._translate_node(sub)
        elif sub.op == "get_attr":
            attribute = getattr(module, sub.target)
            if isinstance(attribute, torch.Tensor):
                translator.env[sub] = translator.g.const(attribute)
            elif isinstance(attribute, torch.fx.GraphModule):
                translator.env[sub] = Subgraph(translator, sub, attribute)
        elif sub.op == "output":
            result = torch.fx.node.map_arg(sub.args[0], lambda n: translator.env[n])
    return result


class Subgraph:
    """A graph module argument of a higher-order op (a branch of ``torch.cond``, the body of a
    ``while_loop``), which control-flow translations translate into subgraphs they build."""

    def __init__(self, translator: "_Translator", node: torch.fx.Node,
                 module: torch.fx.GraphModule):
        self._translator = translator
        self._node = node  # its get_attr node
        self.module = module
        self.name = node.name

    @property
    def input_metas(self) -> list:
        """What torch computed for each input (FakeTensors, SymInts)."""
        return [n.meta.get("val") for n in self.module.graph.nodes if n.op == "placeholder"]

    def translate(self, g: GraphBuilder, inputs: list) -> list:
        """Translate the module's calls with the builder ``g`` (usually ``outer.subgraph(...)``),
        ``inputs`` standing for its placeholders (values of ``g``'s graph or of the enclosing
        scopes); return its outputs as a list."""
        translator = self._translator
        outer = translator.g
        # Translating sets what ``g`` knows of the call at hand: the caller's call resumes after.
        saved = (g.provenance, g.expected, g.arguments, g.node_meta)
        translator.g = g
        try:
            result = translate_subgraph(translator, self._node, self.module, inputs)
        finally:
            translator.g = outer
            g.provenance, g.expected, g.arguments, g.node_meta = saved
        return list(result) if isinstance(result, (tuple, list)) else [result]

    def set_meta(self, value: ir.Value, meta: Any) -> None:
        """Give ``value`` the dtype and shape of ``meta`` (a FakeTensor or SymInt)."""
        self._translator._set_meta(value, meta)


def unique_value_names(graph: ir.Graph) -> None:
    """Rename values so that each name is used once in ``graph`` and all its subgraphs:
    a subgraph translated twice (a loop condition) or two branches repeat names, and a value
    named after its torch node can meet a made-up name ("bernoulli__1" is both the second
    bernoulli_ node and a value the first one made)."""
    seen: set[str] = set()
    graphs = [graph] + [
        attribute.value for node in ir.traversal.RecursiveGraphIterator(graph)
        for attribute in node.attributes.values() if attribute.type == ir.AttributeType.GRAPH]
    # The main graph's own inputs, weights and outputs keep their names (the user's names):
    # any other value meeting one of them, or an earlier name, is renamed.
    kept = [*graph.initializers.values(), *graph.inputs, *graph.outputs]
    seen = {value.name for value in kept if value.name is not None}
    kept_ids = {id(value) for value in kept}
    values = [v for sub in graphs[1:] for v in (*sub.initializers.values(), *sub.inputs)]
    values += [v for sub in graphs for node in sub for v in node.outputs]
    for value in values:
        if value.name is None or id(value) in kept_ids:
            continue
        if value.name not in seen:
            seen.add(value.name)
            continue
        number = 1
        while f"{value.name}_{number}" in seen:
            number += 1
        value.name = f"{value.name}_{number}"
        seen.add(value.name)


def _adopt(parent: torch.fx.Node, module: torch.fx.GraphModule, decomposition: bool) -> None:
    """Name ``module``'s calls after ``parent`` and give them its module path and source line
    (and, for a decomposition, the op they were decomposed from). Done once per module."""
    if getattr(module, "_onnxport_adopted", False):
        return
    module._onnxport_adopted = True
    origin = ""
    if decomposition:
        origin = parent.meta.get("onnxport_decomposed_from") or aten_name(parent.target)
    for sub in module.graph.nodes:
        if sub.op != "call_function":
            continue
        sub.name = f"{parent.name}__{sub.name}"
        if not sub.meta.get("nn_module_stack"):
            sub.meta["nn_module_stack"] = parent.meta.get("nn_module_stack")
        if not sub.meta.get("stack_trace"):
            sub.meta["stack_trace"] = parent.meta.get("stack_trace")
        if origin:
            sub.meta["onnxport_decomposed_from"] = origin


# Higher-order ops that only set a mode around a subgraph: their subgraph is inlined.
_INLINED_HIGHER_ORDER_OPS = {"wrap_with_set_grad_enabled", "wrap_with_autocast", "wrap"}


def _carry_doubt(inputs: Any, result: Any) -> None:
    """A result computed from a value whose recorded sizes are doubtful is doubtful too
    (builder.RECORDED_SIZES_DOUBTFUL)."""
    if any(isinstance(v, ir.Value) and v.meta.get(RECORDED_SIZES_DOUBTFUL)
           for v in torch.utils._pytree.tree_leaves(inputs)):
        for value in result if isinstance(result, (tuple, list)) else [result]:
            if isinstance(value, ir.Value) and value.producer() is not None:
                value.meta[RECORDED_SIZES_DOUBTFUL] = True
                if value.shape is not None:  # its recorded sizes: unknown (see _set_meta)
                    value.shape = ir.Shape([None] * len(value.shape))


def _inlined_subgraph(node: torch.fx.Node):
    """(the get_attr node of the subgraph, its operands) for a mode-setting higher-order op."""
    target = node.target
    if not isinstance(target, torch._ops.HigherOrderOperator):
        return None
    if target.name() not in _INLINED_HIGHER_ORDER_OPS:
        return None
    for i, arg in enumerate(node.args):
        if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
            return arg, list(node.args[i + 1:])
    return None


def _check_no_complex(graphs, context: TranslationContext) -> None:
    """Raise one error naming every input, weight and call that makes a complex tensor: ONNX
    has complex types, but ONNX Runtime runs no op on them, so such a graph would be written
    and then refused."""
    inputs = dict(zip(context.user_inputs, context.onnx_input_names))
    weights = {name: onnx_name for name, (onnx_name, _) in context.weights.items()}
    places = []
    for graph in graphs:
        for node in graph.nodes:
            if node.op not in ("placeholder", "call_function"):
                continue
            dtypes = {str(t.dtype).replace("torch.", "")
                      for t in torch.utils._pytree.tree_leaves(node.meta.get("val"))
                      if isinstance(t, torch.Tensor) and t.is_complex()}
            if not dtypes or _complex_layout(node):
                continue
            dtype = "/".join(sorted(dtypes))
            if node.op == "placeholder":
                kind = "weight" if node.name in weights else "input"
                name = weights.get(node.name) or inputs.get(node.name) or node.name
                places.append(f"  {kind} {name!r} is a {dtype} tensor")
                continue
            where = _source_of(node) or _scope_of(node) or f"node {node.name!r}"
            places.append(f"  {aten_name(node.target)} at {where} makes a {dtype} tensor")
    if places:
        shown = places[:10] + ([f"  (+{len(places) - 10} more)"] if len(places) > 10 else [])
        raise TranslationError(
            "complex dtypes are not supported: ONNX Runtime runs no op on complex tensors, so "
            "the model would be written and then refused.\n" + "\n".join(shown) + "\n"
            "Compute with the real and imaginary parts as real tensors (torch.view_as_real "
            "outside the model, real arithmetic inside).")


def _complex_layout(node: torch.fx.Node) -> bool:
    """A complex tensor made by an op that writes it as real/imaginary parts from tensors
    made inside the graph (complex inputs and weights are refused), and read only by such ops
    (a graph output cannot be complex)."""
    from onnxport.translate.registry import COMPLEX_LAYOUT_OPS

    def handles(n: torch.fx.Node) -> bool:
        return n.op == "call_function" and aten_name(n.target).split(".")[0] in COMPLEX_LAYOUT_OPS

    def complex_placeholder(n: torch.fx.Node) -> bool:
        value = n.meta.get("val")
        return n.op == "placeholder" and isinstance(value, torch.Tensor) and value.is_complex()

    return (handles(node) and all(handles(user) for user in node.users)
            and not any(complex_placeholder(n) for n in node.all_input_nodes))


def _is_tuple_type(target: Any) -> bool:
    return isinstance(target, type) and issubclass(target, tuple)


def _written_arguments(target: Any) -> list[tuple[int, str]]:
    """The (position, name) of each argument ``target`` writes into: ``self`` of an in-place
    op, ``out`` of an out= overload (keyword-only, given by name)."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    return [(i, argument.name) for i, argument in enumerate(schema.arguments)
            if argument.alias_info is not None and argument.alias_info.is_write]


def _static_scalar(meta: Any) -> int | float | bool | None:
    if isinstance(meta, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        expr = meta.node.expr
        if getattr(expr, "is_number", False):
            if isinstance(meta, torch.SymInt):
                return int(expr)
            if isinstance(meta, torch.SymBool):
                return bool(expr)
            return float(expr)
        return None
    if isinstance(meta, (int, float, bool)) and not isinstance(meta, torch.Tensor):
        return meta
    return None


def _scope_of(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path, _ = list(stack.values())[-1]
    if path.startswith("_empty_nn_module_stack"):  # torch's placeholder for "no module"
        return ""
    return _clean_module_path(path)


@functools.lru_cache(maxsize=4096)  # (per node, and a model has few distinct paths)
def _clean_module_path(path: str) -> str:
    path = re.sub(r"^L\['self'\]\.?|^L__self__\.?", "", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    return path.strip(".")


def _placed(error: TranslationError, place: str) -> TranslationError:
    """``error`` with the user's line on its first line (a refusal raised inside a translation
    knows the op, not where the model calls it)."""
    message = str(error)
    if place and place not in message:
        first, newline, rest = message.partition("\n")
        error.args = (f"{first} (used at {place}){newline}{rest}",)
    return error


def _run_time_number_hint(node: torch.fx.Node, error: Exception) -> str:
    """What a translation's TypeError means where the op takes a number known only at run time
    (torch.diagonal's offset computed from a dynamic size), which it reads as a constant."""
    numbers = [a for a in torch.utils._pytree.tree_leaves((node.args, node.kwargs))
               if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.SymInt)]
    if not isinstance(error, TypeError) or not numbers:
        return ""
    return (". An argument is a number known only at run time (computed from a dynamic size), "
            "which this op's translation takes only as a constant: make it a constant, or "
            "export with the axes it comes from static")


def _source_of(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace")
    if not trace:
        return ""
    frame = _innermost_frame(trace)
    if frame is None:
        return ""
    file, line, function = frame
    # Never an absolute path (relative_path says why).
    return f"{relative_path(file)}:{line} in {function}"


@functools.lru_cache(maxsize=4096)  # (the ops of one line share their stack)
def _innermost_frame(trace: str) -> tuple[str, str, str] | None:
    matches = _SOURCE_LINE.findall(trace)
    if not matches:
        return None
    # The innermost frame outside torch itself: the user's (or the model library's) line.
    # torch.cond's and while_loop's subgraphs add frames of code dynamo generated
    # ("<eval_with_key>.12", numbered per process): never the user's line, never deterministic.
    # onnxport's own frames (the replay of a trace, a quirk's replacement of a torch
    # function) are never the user's line either.
    outside_torch = [m for m in matches if not m[0].startswith(_TORCH_FOLDER)
                     and not m[0].startswith(_ONNXPORT_FOLDER)
                     and not m[0].startswith("<eval_with_key>")]
    if outside_torch:
        return outside_torch[-1]
    ours = [m for m in matches if not m[0].startswith(_ONNXPORT_FOLDER)]
    return ours[-1] if ours else None


_TORCH_FOLDER = os.path.dirname(torch.__file__) + os.sep
_ONNXPORT_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a is b or (a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
                      and a.device.type != "meta" and bool(torch.equal(a, b)))


def _number_output(g, value: Any) -> ir.Value:
    """A Python number the model returns, 0-d: a float as double (TorchScript's float, what
    torch.onnx's TorchScript exporter gives, and NumPy's float of it), an int as int64."""
    return g.const(value, ir.DataType.DOUBLE) if isinstance(value, float) else g.const(value)
