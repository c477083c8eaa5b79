"""The ranks of scripted code's values, inferred from its inputs' (the example's): scripted code
reads ``x.dim()`` to dispatch (nn.LSTMCell batches a 1-D input), also on values TorchScript
types as any Tensor (a slice of an input, a loop's carried state), and ONNX has no branch
whose results differ in rank. Only what the ops below say for sure is inferred; a value of
any other op, or of branches that disagree, has no rank here. The dims known to be of size 1
(an unsqueeze's, a kept reduced dim) are followed too, for the rank of a squeeze of them."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

# Ops whose result has their first tensor argument's rank.
_SAME = {
    "aten::contiguous", "aten::clone", "aten::detach", "aten::to", "aten::type_as",
    "aten::relu", "aten::sigmoid", "aten::tanh", "aten::neg", "aten::abs", "aten::exp",
    "aten::log", "aten::sqrt", "aten::rsqrt", "aten::dropout", "aten::softmax",
    "aten::log_softmax", "aten::layer_norm", "aten::batch_norm", "aten::group_norm",
    "aten::gelu", "aten::silu", "aten::leaky_relu", "aten::hardtanh", "aten::transpose",
    "aten::permute", "aten::t", "aten::cumsum", "aten::zeros_like", "aten::ones_like",
    "aten::empty_like", "aten::full_like", "aten::rand_like", "aten::randn_like",
    "aten::linear", "aten::reciprocal", "aten::sign", "aten::floor", "aten::ceil",
    "aten::round", "aten::scaled_dot_product_attention",
    # (slices, reorders, gathers and writes, unary math, pads, pools and resizes of a batch)
    "aten::slice", "aten::narrow", "aten::flip", "aten::roll", "aten::tril", "aten::triu",
    "aten::index_select", "aten::gather", "aten::scatter", "aten::scatter_add",
    "aten::index_put", "aten::index_put_", "aten::index_fill", "aten::index_copy",
    "aten::index_add", "aten::masked_scatter", "aten::masked_fill_", "aten::cumprod",
    "aten::logcumsumexp", "aten::diff", "aten::argsort", "aten::expand_as", "aten::view_as",
    "aten::reshape_as", "aten::constant_pad_nd", "aten::pad", "aten::sin", "aten::cos",
    "aten::erf", "aten::square", "aten::softplus", "aten::elu", "aten::selu", "aten::celu",
    "aten::hardswish", "aten::hardsigmoid", "aten::relu6", "aten::mish", "aten::logit",
    "aten::clamp_min", "aten::clamp_max", "aten::nan_to_num", "aten::bitwise_not",
    "aten::logical_not", "aten::isnan", "aten::fill_", "aten::zero_", "aten::copy_",
    "aten::add_", "aten::sub_", "aten::mul_", "aten::div_", "aten::clamp_", "aten::relu_",
    "aten::sigmoid_", "aten::tanh_", "aten::upsample_nearest1d", "aten::upsample_nearest2d",
    "aten::upsample_bilinear2d", "aten::max_pool1d", "aten::max_pool2d", "aten::avg_pool1d",
    "aten::avg_pool2d", "aten::adaptive_avg_pool2d", "aten::instance_norm",
}
# Ops of several results, each of their tensor's rank (values and indices).
_SAME_EACH = {"aten::topk", "aten::sort", "aten::cummax", "aten::cummin"}
# Reductions over dims given (an int, a list, or none: every dim), keepdim after them.
# (Not std and var, whose unbiased comes before keepdim.)
_REDUCTIONS = {"aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::prod",
               "aten::logsumexp", "aten::all", "aten::any", "aten::argmax", "aten::argmin",
               "aten::max", "aten::min", "aten::median", "aten::mode"}
# Ops whose result broadcasts their tensor arguments: the largest rank.
_BROADCAST = {
    "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::where", "aten::maximum",
    "aten::minimum", "aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge",
    "aten::__and__", "aten::__or__", "aten::rsub", "aten::remainder", "aten::fmod",
    "aten::pow", "aten::clamp", "aten::masked_fill",  # (tensor exponents, bounds, masks)
}
# Factories sized by a list: its length.
_FACTORIES = {"aten::zeros", "aten::ones", "aten::empty", "aten::full", "aten::rand",
              "aten::randn", "aten::view", "aten::reshape", "aten::expand", "aten::new_zeros",
              "aten::new_ones", "aten::new_empty", "aten::new_full", "aten::repeat"}
# Edits that change a list's length: a list they edit has no length known from its maker.
_LIST_GROWERS = {"aten::append", "aten::insert", "aten::extend", "aten::pop", "aten::clear",
                 "aten::Delete", "aten::add_"}
# Recurrent cells: each result has the rank of the state given (input batched or not alike).
_CELLS = {"aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell"}


def known_ranks(graph: torch._C.Graph | torch._C.Block) -> dict[torch._C.Value, Any]:
    """The rank of each value the inference decides: an int for a tensor; a tuple of them for
    a tuple or a list built of tensors; ``("list", r)`` for a list of tensors of rank r. (Of
    a graph, or of its top block.)"""
    ranks: dict[torch._C.Value, Any] = {}
    for value in graph.inputs():
        _seed(value, ranks)
    _walk(graph.block() if isinstance(graph, torch._C.Graph) else graph, ranks)
    return ranks


def _seed(value: torch._C.Value, ranks: dict) -> None:
    kind = value.type()
    if isinstance(kind, torch._C.TensorType) and kind.dim() is not None:
        ranks[value] = kind.dim()


def _walk(block: Any, ranks: dict) -> None:
    made_here: set[int] = set()
    for node in block.nodes():
        kind = node.kind()
        if kind == "aten::append":
            _append(node, ranks, made_here)
        elif kind == "prim::Loop":
            _loop(node, ranks)
        elif kind == "prim::If":
            for inner in node.blocks():
                _walk(inner, ranks)
            branches = [[ranks.get(v) for v in inner.outputs()] for inner in node.blocks()]
            for k, output in enumerate(node.outputs()):
                if all(b[k] is not None and b[k] == branches[0][k] for b in branches):
                    ranks[output] = branches[0][k]
        else:
            _node(node, ranks)
        _follow_ones(node, ranks)  # (after: a squeeze's rank needs its input's)
        for output in node.outputs():  # (a type that says its rank: a traced value's)
            _seed(output, ranks)
            made_here.add(output.unique())


def _append(node: torch._C.Node, ranks: dict, made_here: set) -> None:
    """``lst.append(x)`` in the block that made ``lst`` empty: the ranks of its items so far
    (``query, key = (x.transpose(1, 0) for x in (query, key))``, scripted). A list made
    elsewhere, or once an item's rank is unknown, has no ranks here."""
    items, item = node.inputsAt(0), node.inputsAt(1)
    parts = ranks.get(items)
    broken = ("unknown items", items.unique())
    fresh = items.node().kind() == "prim::ListConstruct" and items.node().inputsSize() == 0
    if broken in ranks or items.unique() not in made_here or \
            not isinstance(ranks.get(item), int) or not (
                parts is None and fresh or
                isinstance(parts, tuple) and all(isinstance(r, int) for r in parts)):
        ranks.pop(items, None)
        ranks[broken] = True
        return
    ranks[items] = ranks[node.output()] = (*(parts or ()), ranks[item])


def _loop(node: torch._C.Node, ranks: dict) -> None:
    """A loop's carried values keep the rank they enter with when the body gives them back
    with it (tried with that assumption, then without the ones it broke)."""
    body = next(node.blocks())
    carried = list(node.inputs())[2:]
    params = list(body.inputs())[1:]
    assumed = [ranks.get(value) for value in carried]
    for _ in range(len(assumed) + 1):
        for value in _made_in(body):  # (nothing kept from a walk under another assumption)
            ranks.pop(value, None)
        for param, rank in zip(params, assumed):
            if rank is None:
                ranks.pop(param, None)
            else:
                ranks[param] = rank
        _walk(body, ranks)
        given = [ranks.get(value) for value in list(body.outputs())[1:]]
        broken = [k for k, rank in enumerate(assumed) if rank is not None and given[k] != rank]
        if not broken:
            break
        for k in broken:
            assumed[k] = None
    for output, rank in zip(node.outputs(), assumed):
        if rank is not None:
            ranks[output] = rank


def _made_in(block: Any) -> list:
    values = list(block.inputs())
    for node in block.nodes():
        values += list(node.outputs())
        for inner in node.blocks():
            values += _made_in(inner)
    return values


def _node(node: torch._C.Node, ranks: dict) -> None:
    kind = node.kind()
    inputs = list(node.inputs())
    outputs = list(node.outputs())
    known = [ranks.get(value) for value in inputs]
    tensors = [r for value, r in zip(inputs, known)
               if isinstance(value.type(), torch._C.TensorType)]
    result: Any = None
    if kind in _SAME and known and isinstance(known[0], int):
        result = known[0]
    elif kind == "aten::slice" and known and _element(known[0]) is not None and \
            isinstance(node.inputsAt(0).type(), torch._C.ListType):
        result = ("list", _element(known[0]))  # (some of a list's items: x.unbind(a)[::-1])
    elif kind == "aten::arange":
        result = 1
    elif kind in _VARIANCES and known and isinstance(known[0], int):
        _variance(node, known[0], outputs, ranks)
        return
    elif kind in _BROADCAST and tensors and all(isinstance(r, int) for r in tensors):
        result = max(tensors)
    elif kind == "aten::select" and isinstance(known[0], int) and known[0] > 0:
        result = known[0] - 1
    elif kind == "aten::unsqueeze" and isinstance(known[0], int):
        result = known[0] + 1
    elif kind in _SAME_EACH and known and isinstance(known[0], int):
        for output in outputs:
            ranks[output] = known[0]
        return
    elif kind in _REDUCTIONS and known and isinstance(known[0], int):
        _reduced(node, known[0], inputs, outputs, ranks)
        return
    elif kind == "aten::repeat_interleave" and isinstance(known[0], int) and \
            len(inputs) > 2 and inputs[2].node().kind() == "prim::Constant":
        result = 1 if inputs[2].toIValue() is None else known[0]  # (no dim: flattened)
    elif kind == "aten::flatten" and isinstance(known[0], int) and len(inputs) == 3:
        start, end = (value.toIValue() for value in inputs[1:])
        if isinstance(start, int) and isinstance(end, int) and known[0] > 0:
            result = known[0] - (end % known[0] - start % known[0])
    elif kind in ("aten::bmm", "aten::baddbmm"):
        result = 3
    elif kind == "aten::matmul" and all(isinstance(r, int) and r >= 2 for r in known[:2]):
        result = max(known[:2])
    elif kind == "aten::unflatten" and isinstance(known[0], int) and \
            _length(inputs[2]) is not None:
        result = known[0] - 1 + _length(inputs[2])
    elif kind in _FACTORIES:
        sizes = next((v for v in inputs if isinstance(v.type(), torch._C.ListType)), None)
        result = _length(sizes, ranks) if sizes is not None else None
    elif kind in _CELLS and len(inputs) > 1:
        state = known[1]
        rank = state[0] if isinstance(state, tuple) and state else state
        if isinstance(rank, int):
            for output in outputs:
                ranks[output] = rank
        return
    elif kind in ("prim::TupleConstruct", "prim::ListConstruct"):
        if all(isinstance(r, int) for r in known) and known:
            result = tuple(known)
        elif kind == "prim::TupleConstruct" and any(isinstance(r, int) for r in known):
            # (attention's (output, None) without weights: the output's rank read alone)
            result = tuple(r if isinstance(r, int) else None for r in known)
    elif kind in ("prim::TupleUnpack", "prim::ListUnpack"):
        parts = known[0]
        for k, output in enumerate(outputs):
            rank = parts[1] if isinstance(parts, tuple) and parts[:1] == ("list",) else \
                parts[k] if isinstance(parts, tuple) and k < len(parts) else None
            if isinstance(rank, int):
                ranks[output] = rank
        return
    elif kind in ("prim::TupleIndex", "aten::__getitem__") and len(inputs) == 2:
        result = _item(known[0], inputs[1])
    elif kind in ("aten::chunk", "aten::split", "aten::unbind", "aten::tensor_split") and \
            isinstance(known[0], int):
        result = ("list", known[0] - (kind == "aten::unbind"))
    elif kind in ("aten::cat", "aten::stack") and known:
        element = _element(known[0])
        if element is not None:
            result = element + (kind == "aten::stack")
    if result is not None and len(outputs) == 1 and (
            isinstance(outputs[0].type(), torch._C.TensorType) or isinstance(result, tuple)):
        ranks[outputs[0]] = result


# Ops whose result has their first argument's shape: its dims known to be 1 stay so.
_SHAPE_KEPT = {
    "aten::contiguous", "aten::clone", "aten::detach", "aten::to", "aten::type_as",
    "aten::relu", "aten::sigmoid", "aten::tanh", "aten::neg", "aten::abs", "aten::exp",
    "aten::log", "aten::sqrt", "aten::rsqrt", "aten::dropout", "aten::softmax",
    "aten::log_softmax", "aten::gelu", "aten::silu", "aten::cumsum", "aten::cumprod",
    "aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like",
    "aten::reciprocal", "aten::sign", "aten::floor", "aten::ceil", "aten::round", "aten::sin",
    "aten::cos", "aten::square", "aten::clamp_min", "aten::clamp_max", "aten::scatter",
    "aten::scatter_add", "aten::index_fill", "aten::fill_", "aten::zero_", "aten::flip",
    "aten::roll", "aten::argsort", "aten::logcumsumexp", "aten::nan_to_num",
}


# Resizes and pools of 1, 2 or 3 spatial dims (their last ones).
_SPATIAL = ("aten::upsample_", "aten::max_pool", "aten::avg_pool", "aten::adaptive_avg_pool",
            "aten::adaptive_max_pool")


def _ones(value: torch._C.Value, ranks: dict) -> frozenset:
    """The dims of ``value`` known to be of size 1 (an unsqueeze's, a kept reduced dim)."""
    return ranks.get(("ones", value.unique()), frozenset())


def _follow_ones(node: torch._C.Node, ranks: dict) -> None:
    """The dims known to be 1 of each result of ``node`` (none where not known), and the rank
    of ``squeeze(d)`` of a dim known to be 1: one less."""
    inputs, outputs = list(node.inputs()), list(node.outputs())
    if not outputs:
        return
    kind, rank = node.kind(), ranks.get(inputs[0]) if inputs else None
    found: frozenset = frozenset()
    constant = [v.toIValue() if v.node().kind() == "prim::Constant" else "?" for v in inputs]
    if not isinstance(rank, int) or len(outputs) != 1:
        pass
    elif kind in _SHAPE_KEPT:
        found = _ones(inputs[0], ranks)
    elif kind.endswith(("1d", "2d", "3d")) and kind.startswith(_SPATIAL):
        spatial = int(kind[-2])  # (resizes and pools: the leading dims keep their sizes)
        found = frozenset(d for d in _ones(inputs[0], ranks) if d < rank - spatial)
    elif kind == "aten::gather" and len(inputs) > 2:
        found = _ones(inputs[2], ranks)  # (the index's shape)
    elif kind == "aten::unsqueeze" and isinstance(constant[1], int):
        d = constant[1] % (rank + 1)
        found = frozenset({d} | {u + (u >= d) for u in _ones(inputs[0], ranks)})
    elif kind == "aten::squeeze" and len(inputs) == 2 and isinstance(constant[1], int) and \
            rank > 0 and constant[1] % rank in _ones(inputs[0], ranks):
        d = constant[1] % rank
        ranks[outputs[0]] = rank - 1
        found = frozenset(u - (u > d) for u in _ones(inputs[0], ranks) if u != d)
    elif kind in _BROADCAST and ranks.get(outputs[0]) is not None:
        found = _broadcast_ones(inputs, ranks.get(outputs[0]), ranks)
    elif kind in _REDUCTIONS | _VARIANCES and ranks.get(outputs[0]) == rank and rank and \
            len(constant) > 1:  # (keepdim: the dims reduced are 1)
        reduced = constant[1]
        if kind in _VARIANCES:
            with contextlib.suppress(RuntimeError):
                dims = node.namedInput("dim")
                reduced = dims.toIValue() if dims.node().kind() == "prim::Constant" else "?"
        reduced = [reduced] if isinstance(reduced, int) and not isinstance(reduced, bool) \
            else reduced
        if isinstance(reduced, list) and reduced and all(isinstance(d, int) for d in reduced):
            found = _ones(inputs[0], ranks) | {d % rank for d in reduced}
    ranks[("ones", outputs[0].unique())] = found if len(outputs) == 1 else frozenset()
    for output in outputs[1:]:
        ranks[("ones", output.unique())] = frozenset()


def _broadcast_ones(inputs: list, rank: int, ranks: dict) -> frozenset:
    """The dims of a broadcast's result of ``rank`` that are 1 in every tensor argument (a
    lower-ranked one's missing leading dims are 1)."""
    tensors = [v for v in inputs if isinstance(v.type(), torch._C.TensorType)]
    if not all(isinstance(ranks.get(v), int) for v in tensors):
        return frozenset()
    return frozenset(d for d in range(rank) if all(
        d - (rank - ranks[v]) < 0 or d - (rank - ranks[v]) in _ones(v, ranks) for v in tensors))


def _reduced(node: torch._C.Node, rank: int, inputs: list, outputs: list, ranks: dict) -> None:
    """The rank of a reduction's results: ``rank`` less the dims it reduces (every dim where
    none is given), or ``rank`` with keepdim. Only constant dims and keepdim decide."""
    if len(inputs) == 1 or len(inputs) == 2 and node.kind() in ("aten::sum", "aten::mean",
                                                                "aten::prod"):
        dims, keep = None, False  # (of every element: x.max(), x.sum(dtype=...))
    else:
        dims = inputs[1].toIValue() if inputs[1].node().kind() == "prim::Constant" \
            else "unknown"
        # (keepdim follows the dims)
        keep = inputs[2].toIValue() if len(inputs) > 2 and \
            inputs[2].node().kind() == "prim::Constant" else None
        if dims == "unknown" or not isinstance(keep, bool):
            return
    if isinstance(dims, bool) or not isinstance(dims, (int, list, tuple, type(None))):
        return  # (an overload whose second input is no dim: max(a, b), std's unbiased)
    if keep:
        result = rank
    elif dims is None or dims == []:  # (an empty list of dims is every dim)
        result = 0
    else:
        result = rank - (1 if isinstance(dims, int) else len(dims))
    for output in outputs:
        if isinstance(output.type(), torch._C.TensorType):
            ranks[output] = result


# Variances and deviations: their dims and keepdim by name (unbiased or correction between).
_VARIANCES = {"aten::var", "aten::std", "aten::var_mean", "aten::std_mean"}


def _variance(node: torch._C.Node, rank: int, outputs: list, ranks: dict) -> None:
    try:
        dims, keep = node.namedInput("dim"), node.namedInput("keepdim")
    except RuntimeError:  # (x.var(unbiased): of every element)
        result = 0
    else:
        keep = keep.toIValue() if keep.node().kind() == "prim::Constant" else None
        every = dims.type().kind() == "NoneType"
        count = None if every else _constant_length(dims)
        if keep is True:
            result = rank
        elif keep is False and (every or count == 0):  # (an empty list of dims is every dim)
            result = 0
        elif keep is False and count is not None:
            result = rank - count
        else:
            return
    for output in outputs:
        ranks[output] = result


def _constant_length(items: torch._C.Value) -> int | None:
    """The length of a list of ints that is a constant or built of items."""
    if items.node().kind() == "prim::Constant":
        value = items.toIValue()
        return len(value) if isinstance(value, (list, tuple)) else 1 if isinstance(value, int) \
            else None
    return items.node().inputsSize() if items.node().kind() == "prim::ListConstruct" else None


def _length(sizes: torch._C.Value, ranks: dict | None = None) -> int | None:
    """The length of a list of sizes, built in the graph, folded to a constant, or a tensor's
    shape (``x.view(y.shape)``) of a rank known."""
    maker = sizes.node()
    if any(use.user.kind() in _LIST_GROWERS for use in sizes.uses()):
        return _comprehension_length(sizes, ranks)
    if maker.kind() == "aten::size" and maker.inputsSize() == 1 and ranks is not None:
        rank = ranks.get(maker.inputsAt(0))
        return rank if isinstance(rank, int) else None
    if maker.kind() == "prim::ListConstruct":
        return maker.inputsSize()
    if maker.kind() == "aten::add" and isinstance(maker.inputsAt(0).type(), torch._C.ListType):
        lengths = [_length(part, ranks) for part in maker.inputs()]  # (x.shape[:p] + [2])
        return None if None in lengths else sum(lengths)
    if maker.kind() == "aten::slice" and maker.inputsSize() == 4 and \
            isinstance(maker.inputsAt(0).type(), torch._C.ListType):
        length = _length(maker.inputsAt(0), ranks)
        bounds = [v.toIValue() if v.node().kind() == "prim::Constant" else "?"
                  for v in list(maker.inputs())[1:]]
        if length is None or "?" in bounds or not bounds[2]:
            return None
        return len(range(length)[slice(*bounds)])
    if maker.kind() == "prim::Constant" and isinstance(sizes.toIValue(), (list, tuple)):
        return len(sizes.toIValue())
    return None


def _comprehension_length(items: torch._C.Value, ranks: dict | None) -> int | None:
    """The length of a list a ``for`` loop of a known count builds from empty, one append per
    iteration (``[n if i == a else 1 for i in range(x.dim())]``, the repeats of x.repeat):
    that count."""
    maker = items.node()
    growers = [use.user for use in items.uses() if use.user.kind() in _LIST_GROWERS]
    if maker.kind() != "prim::ListConstruct" or maker.inputsSize() or len(growers) != 1 or \
            growers[0].kind() != "aten::append":
        return None
    loop = growers[0].owningBlock().owningNode()
    if loop is None or loop.kind() != "prim::Loop" or loop.owningBlock() != maker.owningBlock():
        return None
    body = next(loop.blocks())
    if any(value.node().kind() != "prim::Constant" or value.toIValue() is not True
           for value in (loop.inputsAt(1), next(body.outputs()))):
        return None  # (a while loop, or a break)
    count = loop.inputsAt(0)
    if count.node().kind() == "prim::Constant" and isinstance(count.toIValue(), int):
        return count.toIValue()
    if count.node().kind() == "aten::dim" and ranks is not None:
        rank = ranks.get(count.node().inputsAt(0))
        return rank if isinstance(rank, int) else None
    return None


def _element(parts: Any) -> int | None:
    """The rank of every element of a list, when they all have one."""
    if isinstance(parts, tuple) and parts[:1] == ("list",):
        return parts[1]
    if isinstance(parts, tuple) and parts and all(isinstance(r, int) for r in parts) \
            and len(set(parts)) == 1:
        return parts[0]
    return None


def _item(parts: Any, index: torch._C.Value) -> int | None:
    if isinstance(parts, tuple) and parts[:1] == ("list",):
        return parts[1]
    if not isinstance(parts, tuple) or index.node().kind() != "prim::Constant":
        return None
    k = index.toIValue()
    return parts[k] if isinstance(k, int) and -len(parts) <= k < len(parts) else None
