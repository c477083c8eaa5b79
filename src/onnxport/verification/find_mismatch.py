"""What ``find_mismatch`` runs: find the smallest parts of an exported graph whose ONNX translation
disagrees with PyTorch, by running parts of the ONNX graph in isolation on PyTorch's own
intermediate values and bisecting the graph into halves."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from onnxport.tensor_values import as_numpy
from onnxport.verification.compare import full_float32

logger = logging.getLogger("onnxport")


@dataclasses.dataclass
class VerificationOptions:
    """How ONNX values are compared with PyTorch's (``torch.testing.assert_close``).

    The defaults are the project's fp32 tolerance (rtol 1e-3, atol 1e-4), not torch.onnx's
    atol 1e-7, which float rounding alone exceeds in a convolution and so reports parts
    that are right; pass ``VerificationOptions(atol=1e-7)`` for torch.onnx's."""

    flatten: bool = True
    ignore_none: bool = True
    check_shape: bool = True
    check_dtype: bool = True
    backend: str = "onnxruntime-cpu"
    rtol: float = 1e-3
    atol: float = 1e-4
    remained_onnx_input_idx: Sequence[int] | None = None
    acceptable_error_percentage: float | None = None


@dataclasses.dataclass
class NodeInfo:
    """One call of the exported program and the ONNX value that holds its result."""

    name: str  # the FX node's name
    kind: str  # the ATen op ("aten::relu")
    value_name: str  # the ONNX value
    source: str  # "file:line in function" of the user's code, where known
    inputs: tuple[str, ...]  # names of the FX nodes it reads (the compared ones)


class _Run:
    """What every partition of one ``find_mismatch`` shares: the ONNX model, PyTorch's value
    of every node and the user inputs by ONNX name."""

    def __init__(self, proto, eager: dict[str, Any], feeds: dict[str, torch.Tensor],
                 options: VerificationOptions):
        self.proto = proto
        self.eager = eager
        self.feeds = feeds
        self.options = options
        graph = proto.graph
        self.initializers = {t.name: t for t in graph.initializer}
        self.graph_inputs = {v.name: v for v in graph.input}
        self.producers = {}
        for index, node in enumerate(graph.node):
            for output in node.output:
                if output:
                    self.producers[output] = index

    def compare(self, nodes: Sequence[NodeInfo], given: dict[str, torch.Tensor]
                ) -> AssertionError | None:
        """Run the ONNX nodes computing ``nodes`` from ``given`` (ONNX value name -> PyTorch's
        value); the error of the last node that disagrees, None when all agree."""
        outputs = list(dict.fromkeys(n.value_name for n in nodes))
        values = dict(zip(outputs, run_extracted(self, outputs, given)))
        error = None
        for node in nodes:
            try:
                _assert_close(self.eager[node.name], values[node.value_name], self.options)
            except AssertionError as mismatch:
                error = mismatch
        return error


def _assert_close(expected: torch.Tensor, actual: torch.Tensor, options: VerificationOptions) -> None:
    if not options.check_dtype:
        actual = actual.to(expected.dtype)
    if not options.check_shape and actual.numel() == expected.numel():
        actual = actual.reshape(expected.shape)
    try:
        torch.testing.assert_close(actual, expected.detach().cpu(), rtol=options.rtol,
                                   atol=options.atol, equal_nan=True)
    except AssertionError as error:
        if options.acceptable_error_percentage is not None and actual.shape == expected.shape:
            close = torch.isclose(actual.to(torch.float64), expected.to(torch.float64),
                                  rtol=options.rtol, atol=options.atol, equal_nan=True)
            if 1 - close.float().mean().item() <= options.acceptable_error_percentage:
                return
        raise error


def run_extracted(run: _Run, outputs: Sequence[str], given: dict[str, torch.Tensor]
                  ) -> list[torch.Tensor]:
    """Run the part of the ONNX graph between ``given`` values and ``outputs`` alone."""
    import onnx
    from onnx import helper

    graph = run.proto.graph
    needed_nodes: set[int] = set()
    inputs: dict[str, torch.Tensor] = {}
    initializers: list = []
    seen: set[str] = set()
    stack = list(outputs)
    while stack:
        name = stack.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        if name in given:
            inputs[name] = given[name]
        elif name in run.initializers:
            initializers.append(run.initializers[name])
        elif name in run.graph_inputs:
            inputs[name] = run.feeds[name]
        elif name in run.producers:
            index = run.producers[name]
            if index not in needed_nodes:
                needed_nodes.add(index)
                node = graph.node[index]
                stack.extend(node.input)
                stack.extend(_outer_names(node))
    nodes = [node for index, node in enumerate(graph.node) if index in needed_nodes]
    value_infos = [_value_info(name, tensor) for name, tensor in inputs.items()]
    output_infos = [helper.make_empty_tensor_value_info(name) for name in outputs]
    part = helper.make_graph(nodes, "part", value_infos, output_infos, initializers)
    model = helper.make_model(part, opset_imports=run.proto.opset_import,
                              ir_version=run.proto.ir_version)
    model.functions.extend(run.proto.functions)
    return _run_proto(model, {name: as_numpy(t) for name, t in inputs.items()}, outputs, onnx)


def _outer_names(node) -> list[str]:
    """Names a node's subgraphs (If, Loop, Scan) read from the enclosing graph."""
    names = []
    for attribute in node.attribute:
        graphs = list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else [])
        for subgraph in graphs:
            for inner in subgraph.node:
                names.extend(inner.input)
                names.extend(_outer_names(inner))
    return names


def _run_proto(model, feeds: dict, outputs: Sequence[str], onnx) -> list[torch.Tensor]:
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    # Run the nodes as they are: fusions would compute something else than the graph says.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    results = session.run(list(outputs), feeds)
    return [torch.from_numpy(np.asarray(r)) for r in results]


def _value_info(name: str, tensor: torch.Tensor):
    from onnx import helper
    from onnx_ir.tensor_adapters import from_torch_dtype

    return helper.make_tensor_value_info(name, int(from_torch_dtype(tensor.dtype)),
                                         list(tensor.shape))


# -- the exported program's values -------------------------------------------------------------
def eager_node_values(exported_program, args: tuple, kwargs: dict) -> dict[str, Any]:
    """PyTorch's value of every node of ``exported_program``'s graph on these inputs."""
    flat = exported_program._graph_module_flat_inputs(args, kwargs)
    values: dict[str, Any] = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            # A copy: a later in-place op (relu_, add_) writes into the tensor itself.
            values[node.name] = pytree.tree_map_only(torch.Tensor, torch.clone, result)
            return result

    with torch.no_grad(), full_float32():  # as verification's eager reference runs
        Recording(exported_program.graph_module).run(*flat)
    return values


def compared_nodes(program, eager: dict[str, Any]) -> list[NodeInfo]:
    """The calls whose result is a tensor that PyTorch computed and an ONNX value of the
    final graph holds, in graph order."""
    graph = program.model.graph
    fx_values = graph.meta.get("onnxport.fx_values") or {}
    present = {v.name for node in graph for v in node.outputs}
    present |= {v.name for v in graph.inputs} | set(graph.initializers)
    result = []
    for node in program.exported_program.graph_module.graph.nodes:
        value = fx_values.get(node.name)
        if node.op != "call_function" or value is None or value.name not in present:
            continue
        if not isinstance(eager.get(node.name), torch.Tensor):
            continue
        producer = value.producer()
        source = producer.metadata_props.get("onnxport.source", "") if producer else ""
        inputs = tuple(n.name for n in node.all_input_nodes)
        target = node.target
        kind = "prim::getitem" if getattr(target, "__name__", "") == "getitem" else _kind(target)
        result.append(NodeInfo(node.name, kind, value.name, source, inputs))
    return result


def _kind(target) -> str:
    """``aten::relu``, ``aten::add.Tensor``: the op's name as registrations spell it."""
    schema = getattr(target, "_schema", None)
    if schema is None:  # a Python function or higher-order op: its own name says enough
        return getattr(target, "__name__", str(target))
    overload = getattr(target, "_overloadname", "")
    return f"{schema.name}.{overload}" if overload and overload != "default" else schema.name


def user_feeds(program, args: tuple, kwargs: dict) -> dict[str, torch.Tensor]:
    return dict(zip(program.input_names, program.input_tensors(args, kwargs)))


def _given_for(nodes: Sequence[NodeInfo], all_nodes: dict[str, NodeInfo],
               eager: dict[str, Any]) -> dict[str, torch.Tensor]:
    """PyTorch's values for the inputs a group of nodes reads from outside it."""
    inside = {n.name for n in nodes}
    given = {}
    for node in nodes:
        for name in node.inputs:
            outer = all_nodes.get(name)
            if name not in inside and outer is not None:
                given[outer.value_name] = eager[name]
    return given


# -- the tree ----------------------------------------------------------------------------------
class GraphInfo:
    """A part of the exported graph (``id``: the path of halves, "" for the whole, "0" its
    first half, "01" the second half of that...), whether its ONNX translation, run alone on
    PyTorch's values of its inputs, agrees with PyTorch, and its halves when it does not."""

    def __init__(self, nodes: Sequence[NodeInfo], run: _Run, all_nodes: dict[str, NodeInfo],
                 id: str = "", upper_graph_info: "GraphInfo | None" = None):
        self.nodes = list(nodes)
        self.id = id
        self.upper_graph_info = upper_graph_info  # the enclosing part (torch.onnx's name)
        self.lower_graph_info = None
        self.parts: list[GraphInfo] = []
        self.mismatch_error: AssertionError | None = None
        self._run = run
        self._all = all_nodes

    # -- searching
    def find_mismatch(self) -> None:
        if not self.nodes:
            return
        given = _given_for(self.nodes, self._all, self._run.eager)
        self.mismatch_error = self._run.compare(self.nodes, given)
        logger.debug("part %r (%d nodes): %s", self.id, len(self.nodes),
                     "mismatch" if self.mismatch_error else "ok")
        if self.mismatch_error is None or len(self.nodes) <= 1:
            return
        half = len(self.nodes) // 2
        self.parts = [GraphInfo(self.nodes[:half], self._run, self._all, self.id + "0", self),
                      GraphInfo(self.nodes[half:], self._run, self._all, self.id + "1", self)]
        for part in self.parts:
            part.find_mismatch()

    def has_mismatch(self) -> bool:
        return self.mismatch_error is not None

    def essential_node_count(self) -> int:
        return len(self.nodes)

    def essential_node_kinds(self) -> set[str]:
        return {n.kind for n in self.nodes}

    def all_mismatch_leaf_graph_info(self) -> list["GraphInfo"]:
        if not self.has_mismatch():
            return []
        if not self.parts:
            return [self]
        leaves = [leaf for part in self.parts for leaf in part.all_mismatch_leaf_graph_info()]
        # Halves that each agree while the whole does not (errors that add up): the whole is
        # the smallest part that shows the mismatch.
        return leaves or [self]

    def find_partition(self, id: str) -> "GraphInfo | None":
        if id == self.id:
            return self
        for part in self.parts:
            if id.startswith(part.id):
                return part.find_partition(id)
        return None

    def mismatch_node_kinds(self) -> dict[str, int]:
        kinds: dict[str, int] = {}
        for leaf in self.all_mismatch_leaf_graph_info():
            leaf_kinds = leaf.essential_node_kinds()
            if len(leaf_kinds) == 1:
                kind = leaf_kinds.pop()
                kinds[kind] = kinds.get(kind, 0) + 1
        return kinds

    # -- printing
    def pretty_print_mismatch(self, graph: bool = False) -> None:
        print(f" Mismatch info for graph partition {self.id}: ".center(80, "="))
        if graph:
            print(" Nodes ".center(80, "="))
            for node in self.nodes:
                where = f"  # {node.source}" if node.source else ""
                print(f"{node.name}: {node.kind} -> {node.value_name}{where}")
        if self.mismatch_error is not None:
            print(" Mismatch error ".center(80, "="))
            print(self.mismatch_error)
        else:
            print(" No mismatch found. ".center(80, "="))

    def pretty_print_tree(self) -> None:
        print(" Tree: ".center(80, "="))
        for line in _tree_lines(self):
            print(line.rstrip())
        if self.has_mismatch():
            print(" Mismatch leaf subgraphs: ".center(80, "="))
            print([leaf.id for leaf in self.all_mismatch_leaf_graph_info()])
            print(" Mismatch node kinds: ".center(80, "="))
            print(self.mismatch_node_kinds())
        else:
            print(" No mismatch found. ".center(80, "="))

    def __repr__(self) -> str:
        return (f"GraphInfo(id={self.id!r}, {len(self.nodes)} nodes, "
                f"{'mismatch' if self.has_mismatch() else 'ok'})")


def _tree_lines(info: GraphInfo) -> list[str]:
    """The layout of torch.onnx's tree: a part's count and status over its id, its halves to
    its right, the first above the second, joined by ``__`` and ``|``."""
    kind = ""
    if info.has_mismatch() and len(info.nodes) == 1:
        kind = f"({info.nodes[0].kind})"
    status = "X" if info.has_mismatch() else "\u2713"
    head = [f"{len(info.nodes)} {status} {kind}", f"id: {info.id}"]
    width = max(len(s) for s in head)
    if not info.parts:
        return [s.ljust(width) for s in head]
    upper, lower = (_tree_lines(part) for part in info.parts)
    rows = len(upper) + len(lower) + 1
    lines = []
    for line in range(rows):
        own = head[line].ljust(width) if line < 2 else " " * width
        if line == 0:
            connector = "  __"
        elif line < len(upper) + 1:
            connector = " |  "
        elif line == len(upper) + 1:
            connector = " |__"
        else:
            connector = "    "
        if line < len(upper):
            child = upper[line]
        elif line > len(upper):
            child = lower[line - len(upper) - 1]
        else:
            child = ""
        lines.append(own + connector + child)
    return lines


def checked_options(options: Any) -> VerificationOptions:
    """``options`` as given to ``find_mismatch``: None for the defaults."""
    from onnxport.errors import InvalidExportOptionsError

    if options is None:
        return VerificationOptions()
    if not isinstance(options, VerificationOptions):
        raise InvalidExportOptionsError(
            f"options must be an onnxport.verification.VerificationOptions, got "
            f"{type(options).__name__}")
    return options


def mismatch_tree(program, args: tuple, kwargs: dict, options: VerificationOptions) -> GraphInfo:
    """The parts of ``program`` (exported unoptimized from a model called with ``args`` and
    ``kwargs``) whose ONNX values disagree with PyTorch's, found and printed; the tree as a
    ``GraphInfo``. ``onnxport.verification.find_mismatch`` exports and calls this."""
    root = _tree_of(program, args, kwargs, options)
    root.find_mismatch()
    root.pretty_print_mismatch()
    root.pretty_print_tree()
    return root


def _tree_of(program, args: tuple, kwargs: dict, options: VerificationOptions) -> GraphInfo:
    eager = eager_node_values(program.exported_program, args, kwargs)
    nodes = compared_nodes(program, eager)
    run = _Run(program.model_proto, eager, user_feeds(program, args, kwargs), options)
    return GraphInfo(nodes, run, {n.name: n for n in nodes})


@dataclasses.dataclass
class Divergence:
    """The first call (in graph order) whose ONNX value disagrees with PyTorch's."""

    node: str
    kind: str
    source: str
    error: str

    def describe(self) -> str:
        where = f" at {self.source}" if self.source else ""
        first = [line for line in self.error.strip().splitlines() if line.strip()]
        detail = "; ".join(line.strip() for line in first[1:4]) if len(first) > 1 else self.error
        return f"{self.kind} (node {self.node!r}{where}): {detail}"


def first_divergence(program, args: tuple, kwargs: dict,
                     options: VerificationOptions | None = None) -> Divergence | None:
    """Run the whole ONNX graph once with every compared call's value as an output and
    compare in graph order; None when nothing disagrees (or nothing can be compared)."""
    if program.exported_program is None:
        return None
    options = options or VerificationOptions()
    eager = eager_node_values(program.exported_program, args, kwargs)
    nodes = compared_nodes(program, eager)
    if not nodes:
        return None
    run = _Run(program.model_proto, eager, user_feeds(program, args, kwargs), options)
    outputs = list(dict.fromkeys(n.value_name for n in nodes))
    values = dict(zip(outputs, run_extracted(run, outputs, {})))
    for node in nodes:
        try:
            _assert_close(eager[node.name], values[node.value_name], options)
        except AssertionError as error:
            return Divergence(node.name, node.kind, node.source, str(error))
    return None


def enable_log() -> None:
    """Turn on onnxport's log (the ``onnxport`` logger, to stderr)."""
    log = logging.getLogger("onnxport")
    if not any(getattr(h, "_onnxport", False) for h in log.handlers):
        handler = logging.StreamHandler()
        handler._onnxport = True
        handler.setFormatter(logging.Formatter("onnxport %(levelname)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    log.disabled = False


def disable_log() -> None:
    """Turn off onnxport's log."""
    log = logging.getLogger("onnxport")
    log.disabled = True
