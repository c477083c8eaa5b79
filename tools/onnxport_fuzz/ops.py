"""The op pool of the fuzzer: each entry picks operands among the values built so far and
returns the Python expression of one op application (or None when nothing fits).

Makers may propose invalid programs: the generator runs every proposal in eager at both sizes
and drops the ones torch refuses, so a maker only has to be right most of the time. Constants
never depend on the size of a dynamic axis (that would specialize it).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Callable, Optional

import torch

FLOATS = (torch.float32, torch.float16)


@dataclasses.dataclass
class Value:
    name: str
    ex: torch.Tensor   # at the example sizes
    sec: torch.Tensor  # at the second sizes

    @property
    def dyn(self) -> set[int]:
        return {a for a, (p, q) in enumerate(zip(self.ex.shape, self.sec.shape)) if p != q}

    @property
    def rank(self) -> int:
        return self.ex.dim()

    @property
    def dtype(self) -> torch.dtype:
        return self.ex.dtype

    def size(self, axis: int) -> int:
        """The size an op may rely on along ``axis`` (the smaller of the two runs)."""
        return min(self.ex.shape[axis], self.sec.shape[axis])

    def static(self, axis: int) -> bool:
        return axis % max(self.rank, 1) not in self.dyn


class Context:
    """What a maker sees: the values so far, the rng, and a way to add a weight."""

    def __init__(self, rng: random.Random, values: list[Value], add_param: Callable):
        self.rng = rng
        self.values = values
        self.add_param = add_param

    def pick(self, ok: Callable[[Value], bool] = lambda v: True) -> Optional[Value]:
        candidates = [v for v in self.values if ok(v)]
        if not candidates:
            return None
        # Recent values first, so programs chain ops rather than fan out from the inputs.
        weights = [1 + i for i in range(len(candidates))]
        return self.rng.choices(candidates, weights)[0]

    def pick_partner(self, v: Value, ok: Callable[[Value], bool] = lambda v: True) -> Optional[Value]:
        """Another value broadcastable with ``v`` (same shape, or trailing dims compatible)."""
        def compatible(w: Value) -> bool:
            if not ok(w):
                return False
            try:
                torch.broadcast_shapes(v.ex.shape, w.ex.shape)
                torch.broadcast_shapes(v.sec.shape, w.sec.shape)
                return True
            except RuntimeError:
                return False
        return self.pick(compatible)


OPS: dict[str, tuple[Callable[[Context], Optional[str]], float]] = {}


def op(name: str, weight: float = 1.0):
    def register(maker):
        OPS[name] = (maker, weight)
        return maker
    return register


def is_float(v: Value) -> bool:
    return v.dtype in FLOATS


def axis_of(ctx: Context, v: Value, static: bool = False) -> Optional[int]:
    axes = [a for a in range(v.rank) if not static or v.static(a)]
    return ctx.rng.choice(axes) if axes else None


# -- unary elementwise -------------------------------------------------------------------------
UNARY_FLOAT = {
    "abs": "torch.abs({})", "neg": "torch.neg({})", "exp": "torch.exp({})",
    "log": "torch.log({})", "sqrt": "torch.sqrt({})", "rsqrt": "torch.rsqrt({})",
    "sin": "torch.sin({})", "cos": "torch.cos({})", "tanh": "torch.tanh({})",
    "sigmoid": "torch.sigmoid({})", "relu": "F.relu({})", "gelu": "F.gelu({})",
    "gelu_tanh": "F.gelu({}, approximate='tanh')", "silu": "F.silu({})", "elu": "F.elu({})",
    "leaky_relu": "F.leaky_relu({}, 0.1)", "softplus": "F.softplus({})",
    "hardswish": "F.hardswish({})", "hardsigmoid": "F.hardsigmoid({})", "mish": "F.mish({})",
    "erf": "torch.erf({})", "floor": "torch.floor({})", "ceil": "torch.ceil({})",
    "round": "torch.round({})", "trunc": "torch.trunc({})", "sign": "torch.sign({})",
    "reciprocal": "torch.reciprocal({})", "log1p": "torch.log1p({})",
    "atan": "torch.atan({})", "clamp": "torch.clamp({}, -0.5, 0.75)",
    "square": "torch.square({})", "pow_scalar": "torch.pow({}, 3)",
    "isnan": "torch.isnan({})", "isinf": "torch.isinf({})", "hardtanh": "F.hardtanh({})",
    "relu6": "F.relu6({})", "logsigmoid": "F.logsigmoid({})", "nan_to_num": "torch.nan_to_num({})",
}
for _name, _template in UNARY_FLOAT.items():
    def _unary(ctx, template=_template):
        v = ctx.pick(is_float)
        return template.format(v.name) if v else None
    op(_name, 0.35)(_unary)


@op("unary_int", 0.5)
def unary_int(ctx):
    v = ctx.pick(lambda v: v.dtype in (torch.int64, torch.bool))
    if v is None:
        return None
    if v.dtype == torch.bool:
        return f"torch.{ctx.rng.choice(['logical_not', 'bitwise_not'])}({v.name})"
    return f"torch.{ctx.rng.choice(['abs', 'neg', 'sign', 'bitwise_not', 'square'])}({v.name})"


@op("cast", 0.7)
def cast(ctx):
    v = ctx.pick()
    target = ctx.rng.choice(["torch.float32", "torch.float16", "torch.int64", "torch.bool"])
    return f"{v.name}.to({target})"


# -- binary elementwise, with broadcasting and type promotion ---------------------------------
BINARY = {
    "add": "torch.add({}, {})", "sub": "torch.sub({}, {})", "mul": "torch.mul({}, {})",
    "div": "torch.div({}, {})", "div_floor": "torch.div({}, {}, rounding_mode='floor')",
    "div_trunc": "torch.div({}, {}, rounding_mode='trunc')", "remainder": "torch.remainder({}, {})",
    "fmod": "torch.fmod({}, {})", "maximum": "torch.maximum({}, {})",
    "minimum": "torch.minimum({}, {})", "pow": "torch.pow({}, {})", "atan2": "torch.atan2({}, {})",
    "eq": "torch.eq({}, {})", "ne": "torch.ne({}, {})", "lt": "torch.lt({}, {})",
    "le": "torch.le({}, {})", "gt": "torch.gt({}, {})", "ge": "torch.ge({}, {})",
    "logical_and": "torch.logical_and({}, {})", "logical_or": "torch.logical_or({}, {})",
    "bitwise_xor": "torch.bitwise_xor({}, {})",
}
for _name, _template in BINARY.items():
    def _binary(ctx, template=_template, name=_name):
        v = ctx.pick()
        if v is None:
            return None
        if name == "bitwise_xor" and v.dtype not in (torch.int64, torch.bool):
            return None
        roll = ctx.rng.random()
        if roll < 0.2:  # a Python scalar operand
            scalar = ctx.rng.choice(["2", "-3", "0.5", "1.5", "-0.25", "True"])
            first, second = (v.name, scalar) if ctx.rng.random() < 0.7 else (scalar, v.name)
            if "torch.maximum" in template or "torch.minimum" in template or "atan2" in template:
                first, second = v.name, f"torch.tensor({scalar})"
            if first != v.name and not template.startswith(("torch.add", "torch.sub", "torch.mul",
                                                            "torch.div", "torch.pow",
                                                            "torch.remainder", "torch.eq")):
                first, second = second, first
            return template.format(first, second)
        w = ctx.pick_partner(v)
        return template.format(v.name, w.name) if w else None
    op(_name, 0.6)(_binary)


@op("where", 1.0)
def where(ctx):
    cond = ctx.pick(lambda v: v.dtype == torch.bool)
    v = ctx.pick()
    if v is None:
        return None
    if cond is None:
        if not is_float(v):
            return None
        return f"torch.where({v.name} > 0, {v.name}, {ctx.rng.choice(['0.0', '-1.5'])})"
    w = ctx.pick_partner(v)
    if w is None:
        return None
    return f"torch.where({cond.name}, {v.name}, {w.name})"


@op("masked_fill", 0.5)
def masked_fill(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    value = ctx.rng.choice(["0.0", "-1e4", "float('-inf')", "2"])
    return f"{v.name}.masked_fill({v.name} != {v.name}, {value})" if is_float(v) else \
        f"{v.name}.masked_fill({v.name} > 0, {value if v.dtype != torch.int64 else '2'})"


# -- linear algebra ----------------------------------------------------------------------------
@op("matmul", 1.2)
def matmul(ctx):
    v = ctx.pick(lambda v: v.rank >= 1 and is_float(v) and v.static(-1))
    if v is None:
        return None
    k = v.ex.shape[-1]
    w = ctx.pick(lambda w: w.dtype == v.dtype and w.rank >= 2 and w.ex.shape[-2] == k
                 and w.static(-2))
    if w is not None and ctx.rng.random() < 0.6:
        return f"torch.matmul({v.name}, {w.name})"
    n = ctx.rng.choice([1, 3, 5])
    shape = (k, n) if ctx.rng.random() < 0.8 else (k,)
    return f"torch.matmul({v.name}, {ctx.add_param(shape, v.dtype)})"


@op("linear", 1.0)
def linear(ctx):
    v = ctx.pick(lambda v: v.rank >= 1 and is_float(v) and v.static(-1))
    if v is None:
        return None
    k, n = v.ex.shape[-1], ctx.rng.choice([2, 4, 7])
    bias = ", " + ctx.add_param((n,), v.dtype) if ctx.rng.random() < 0.7 else ""
    return f"F.linear({v.name}, {ctx.add_param((n, k), v.dtype)}{bias})"


# -- conv / pool -------------------------------------------------------------------------------
def _spatial(ctx, rank):
    return ctx.pick(lambda v: v.rank == rank and is_float(v) and v.static(1)
                    and all(v.size(a) >= 2 for a in range(2, rank)))


@op("conv1d", 0.7)
def conv1d(ctx):
    v = _spatial(ctx, 3)
    if v is None:
        return None
    c, out = v.ex.shape[1], ctx.rng.choice([2, 4])
    k = ctx.rng.choice([1, 2, 3])
    padding = ctx.rng.choice([0, 1, "'same'"])
    stride = 1 if padding == "'same'" else ctx.rng.choice([1, 2])
    return (f"F.conv1d({v.name}, {ctx.add_param((out, c, k), v.dtype)}, "
            f"{ctx.add_param((out,), v.dtype)}, stride={stride}, padding={padding})")


@op("conv2d", 1.0)
def conv2d(ctx):
    v = _spatial(ctx, 4)
    if v is None:
        return None
    c = v.ex.shape[1]
    groups = ctx.rng.choice([g for g in (1, 2, c) if c % g == 0])
    out = groups * ctx.rng.choice([1, 2])
    k = ctx.rng.choice([1, 2, 3])
    stride, padding, dilation = ctx.rng.choice([1, 2]), ctx.rng.choice([0, 1]), ctx.rng.choice([1, 1, 2])
    bias = ctx.add_param((out,), v.dtype) if ctx.rng.random() < 0.6 else "None"
    return (f"F.conv2d({v.name}, {ctx.add_param((out, c // groups, k, k), v.dtype)}, {bias}, "
            f"stride={stride}, padding={padding}, dilation={dilation}, groups={groups})")


@op("conv_transpose2d", 0.5)
def conv_transpose2d(ctx):
    v = _spatial(ctx, 4)
    if v is None:
        return None
    c, out, k = v.ex.shape[1], ctx.rng.choice([1, 3]), ctx.rng.choice([2, 3])
    stride, padding = ctx.rng.choice([1, 2]), ctx.rng.choice([0, 1])
    return (f"F.conv_transpose2d({v.name}, {ctx.add_param((c, out, k, k), v.dtype)}, "
            f"stride={stride}, padding={padding})")


@op("max_pool2d", 0.8)
def max_pool2d(ctx):
    v = _spatial(ctx, 4)
    if v is None:
        return None
    k = ctx.rng.choice([2, 3])
    stride, padding = ctx.rng.choice([1, 2, k]), ctx.rng.choice([0, 1])
    ceil = ctx.rng.choice([False, True])
    return f"F.max_pool2d({v.name}, {k}, stride={stride}, padding={padding}, ceil_mode={ceil})"


@op("avg_pool2d", 0.8)
def avg_pool2d(ctx):
    v = _spatial(ctx, 4)
    if v is None:
        return None
    k = ctx.rng.choice([2, 3])
    stride, padding = ctx.rng.choice([1, 2, k]), ctx.rng.choice([0, 1])
    ceil, include = ctx.rng.choice([False, True]), ctx.rng.choice([False, True])
    return (f"F.avg_pool2d({v.name}, {k}, stride={stride}, padding={padding}, ceil_mode={ceil}, "
            f"count_include_pad={include})")


@op("max_pool1d", 0.4)
def max_pool1d(ctx):
    v = _spatial(ctx, 3)
    if v is None:
        return None
    k = ctx.rng.choice([2, 3])
    return (f"F.max_pool1d({v.name}, {k}, stride={ctx.rng.choice([1, 2])}, "
            f"padding={ctx.rng.choice([0, 1])}, ceil_mode={ctx.rng.choice([False, True])})")


@op("adaptive_avg_pool2d", 0.5)
def adaptive_avg_pool2d(ctx):
    v = _spatial(ctx, 4)
    if v is None:
        return None
    size = ctx.rng.choice(["1", "(1, 1)"]) if v.dyn & {2, 3} else ctx.rng.choice(["1", "2", "(2, 1)"])
    return f"F.adaptive_avg_pool2d({v.name}, {size})"


# -- normalization -------------------------------------------------------------------------------
@op("layer_norm", 0.9)
def layer_norm(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank >= 1 and v.static(-1))
    if v is None:
        return None
    n = v.ex.shape[-1]
    affine = ctx.rng.random() < 0.7
    extra = f", {ctx.add_param((n,), v.dtype, 'positive')}, {ctx.add_param((n,), v.dtype)}" if affine else ""
    return f"F.layer_norm({v.name}, ({n},){extra})"


@op("batch_norm", 0.7)
def batch_norm(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank in (2, 3, 4) and v.static(1))
    if v is None:
        return None
    c = v.ex.shape[1]
    return (f"F.batch_norm({v.name}, {ctx.add_param((c,), v.dtype)}, "
            f"{ctx.add_param((c,), v.dtype, 'positive')}, {ctx.add_param((c,), v.dtype, 'positive')}, "
            f"{ctx.add_param((c,), v.dtype)}, training=False, eps=1e-5)")


@op("group_norm", 0.6)
def group_norm(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank in (3, 4) and v.static(1))
    if v is None:
        return None
    c = v.ex.shape[1]
    groups = ctx.rng.choice([g for g in (1, 2, c) if c % g == 0])
    return (f"F.group_norm({v.name}, {groups}, {ctx.add_param((c,), v.dtype, 'positive')}, "
            f"{ctx.add_param((c,), v.dtype)})")


@op("instance_norm", 0.5)
def instance_norm(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank in (3, 4))
    if v is None:
        return None
    if v.static(1) and ctx.rng.random() < 0.5:
        c = v.ex.shape[1]
        return (f"F.instance_norm({v.name}, weight={ctx.add_param((c,), v.dtype, 'positive')}, "
                f"bias={ctx.add_param((c,), v.dtype)})")
    return f"F.instance_norm({v.name})"


@op("rms_norm", 0.6)
def rms_norm(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank >= 1 and v.static(-1))
    if v is None:
        return None
    n = v.ex.shape[-1]
    weight = ", " + ctx.add_param((n,), v.dtype, "positive") if ctx.rng.random() < 0.6 else ""
    eps = ", eps=1e-6" if ctx.rng.random() < 0.5 else ""
    return f"F.rms_norm({v.name}, ({n},){weight}{eps})"


# -- shape ---------------------------------------------------------------------------------------
@op("reshape", 0.8)
def reshape(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    shape = list(v.ex.shape)
    dyn = v.dyn
    # Merge two neighbouring axes (at most one dynamic, written -1) or split a static one.
    if len(shape) >= 2 and ctx.rng.random() < 0.5:
        a = ctx.rng.randrange(len(shape) - 1)
        if a in dyn and a + 1 in dyn:
            return None
        target = [("-1" if i in dyn else str(s)) for i, s in enumerate(shape)]
        merged = "-1" if (a in dyn or a + 1 in dyn) else str(shape[a] * shape[a + 1])
        target[a:a + 2] = [merged]
        if target.count("-1") > 1:
            return None
    else:
        static = [a for a in range(len(shape)) if a not in dyn and shape[a] % 2 == 0]
        if not static:
            return f"{v.name}.reshape(-1)" if len(dyn) <= 1 else None
        a = ctx.rng.choice(static)
        target = [("-1" if i in dyn else str(s)) for i, s in enumerate(shape)]
        target[a:a + 1] = ["2", str(shape[a] // 2)]
        if target.count("-1") > 1:
            return None
    return f"{v.name}.reshape({', '.join(target)})"


@op("view_flatten", 0.6)
def flatten(ctx):
    v = ctx.pick(lambda v: v.rank >= 2)
    if v is None:
        return None
    start = ctx.rng.randrange(v.rank - 1)
    return f"torch.flatten({v.name}, {start})"


@op("permute", 0.8)
def permute(ctx):
    v = ctx.pick(lambda v: v.rank >= 2)
    if v is None:
        return None
    order = list(range(v.rank))
    ctx.rng.shuffle(order)
    return f"{v.name}.permute({', '.join(map(str, order))})"


@op("transpose", 0.6)
def transpose(ctx):
    v = ctx.pick(lambda v: v.rank >= 2)
    if v is None:
        return None
    a, b = ctx.rng.sample(range(-v.rank, 0), 2)
    return f"torch.transpose({v.name}, {a}, {b})"


@op("unsqueeze", 0.5)
def unsqueeze(ctx):
    v = ctx.pick(lambda v: v.rank <= 4)
    return f"{v.name}.unsqueeze({ctx.rng.randint(-v.rank - 1, v.rank)})" if v else None


@op("squeeze", 0.3)
def squeeze(ctx):
    v = ctx.pick(lambda v: 1 in v.ex.shape)
    if v is None:
        return None
    return f"{v.name}.squeeze({list(v.ex.shape).index(1)})"


@op("expand", 0.4)
def expand(ctx):
    v = ctx.pick(lambda v: 1 <= v.rank <= 3)
    if v is None:
        return None
    return f"{v.name}.unsqueeze(0).expand(3, {', '.join(['-1'] * v.rank)})"


@op("slice", 1.0)
def slice_(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    n = v.size(a)
    start = ctx.rng.choice([0, 1, -2, None])
    stop = ctx.rng.choice([None, -1, n, n + 3, 2])
    step = ctx.rng.choice([1, 1, 2, 3])
    text = f"{'' if start is None else start}:{'' if stop is None else stop}" + (f":{step}" if step != 1 else "")
    index = ", ".join([":"] * a + [text])
    return f"{v.name}[{index}]"


@op("select", 0.5)
def select(ctx):
    v = ctx.pick(lambda v: v.rank >= 2)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    i = ctx.rng.choice([0, -1, min(1, v.size(a) - 1)])
    return f"{v.name}[{', '.join([':'] * a + [str(i)])}]"


@op("advanced_index", 0.8)
def advanced_index(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    n = v.size(a)
    idx = [ctx.rng.randrange(-n, n) for _ in range(ctx.rng.choice([1, 3, 4]))]
    if ctx.rng.random() < 0.3 and v.rank >= 2:
        b = (a + 1) % v.rank
        m = v.size(b)
        idx2 = [ctx.rng.randrange(m) for _ in idx]
        parts = [":"] * v.rank
        parts[a], parts[b] = f"torch.tensor({idx})", f"torch.tensor({idx2})"
        return f"{v.name}[{', '.join(parts)}]"
    return f"{v.name}[{', '.join([':'] * a + [f'torch.tensor({idx})'])}]"


@op("bool_mask_index_put", 0.3)
def index_put(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank >= 1)
    if v is None:
        return None
    n = v.size(0)
    idx = sorted(set(ctx.rng.randrange(n) for _ in range(2)))
    return f"{v.name}.index_put((torch.tensor({idx}),), torch.tensor(0.5, dtype={v.name}.dtype))"


@op("flip", 0.4)
def flip(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    return f"torch.flip({v.name}, ({ctx.rng.randrange(v.rank)},))" if v else None


@op("repeat", 0.3)
def repeat(ctx):
    v = ctx.pick(lambda v: 1 <= v.rank <= 3)
    if v is None:
        return None
    reps = [ctx.rng.choice([1, 2]) for _ in range(v.rank)]
    return f"{v.name}.repeat({', '.join(map(str, reps))})"


@op("tril_triu", 0.3)
def tril(ctx):
    v = ctx.pick(lambda v: v.rank >= 2)
    if v is None:
        return None
    return f"torch.{ctx.rng.choice(['tril', 'triu'])}({v.name}, {ctx.rng.choice([0, 1, -1])})"


# -- reductions ----------------------------------------------------------------------------------
@op("reduce", 2.0)
def reduce(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    kind = ctx.rng.choice(["sum", "mean", "amax", "amin", "argmax", "argmin", "prod", "var",
                           "std", "logsumexp", "max_dim", "min_dim", "all", "any"])
    keepdim = ctx.rng.choice([False, True])
    a = ctx.rng.randrange(-v.rank, v.rank)
    if kind in ("mean", "var", "std", "logsumexp") and not is_float(v):
        return None
    if kind in ("all", "any"):
        return f"torch.{kind}({v.name}, {a}, keepdim={keepdim})"
    if kind in ("max_dim", "min_dim"):
        return f"torch.{kind[:3]}({v.name}, {a}, keepdim={keepdim})[{ctx.rng.choice([0, 1])}]"
    if kind in ("argmax", "argmin", "logsumexp", "prod"):
        return f"torch.{kind}({v.name}, {a}, keepdim={keepdim})"
    if kind in ("var", "std"):
        correction = ctx.rng.choice([0, 1])
        return f"torch.{kind}({v.name}, {a}, correction={correction}, keepdim={keepdim})"
    dims = f"({a},)" if ctx.rng.random() < 0.6 or v.rank < 2 else f"({a}, {(a + 1) % v.rank})"
    if (a + 1) % v.rank == a % v.rank:
        dims = f"({a},)"
    return f"torch.{kind}({v.name}, {dims}, keepdim={keepdim})"


@op("reduce_all", 0.4)
def reduce_all(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    kind = ctx.rng.choice(["sum", "amax", "mean", "max", "min", "argmax"])
    return f"torch.{kind}({v.name})"


@op("softmax", 0.9)
def softmax(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank >= 1)
    if v is None:
        return None
    kind = ctx.rng.choice(["softmax", "log_softmax"])
    return f"F.{kind}({v.name}, dim={ctx.rng.randrange(-v.rank, v.rank)})"


@op("cumsum", 0.6)
def cumsum(ctx):
    v = ctx.pick(lambda v: v.rank >= 1 and v.dtype != torch.bool)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    flipped = ctx.rng.random() < 0.2
    return (f"torch.cumsum({v.name}.flip({a}), {a}).flip({a})" if flipped
            else f"torch.cumsum({v.name}, {a})")


# -- joining and splitting --------------------------------------------------------------------------
@op("cat", 0.9)
def cat(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    others = [w for w in ctx.values if w.rank == v.rank and all(
        w.ex.shape[i] == v.ex.shape[i] and w.sec.shape[i] == v.sec.shape[i]
        for i in range(v.rank) if i != a)]
    w = ctx.rng.choice(others)
    return f"torch.cat([{v.name}, {w.name}], dim={a})"


@op("stack", 0.5)
def stack(ctx):
    v = ctx.pick()
    if v is None:
        return None
    same = [w for w in ctx.values if w.ex.shape == v.ex.shape and w.sec.shape == v.sec.shape]
    w = ctx.rng.choice(same)
    return f"torch.stack([{v.name}, {w.name}], dim={ctx.rng.randint(0, v.rank)})"


@op("split", 0.5)
def split(ctx):
    v = ctx.pick(lambda v: v.rank >= 1 and any(v.static(a) and v.ex.shape[a] >= 2 for a in range(v.rank)))
    if v is None:
        return None
    a = ctx.rng.choice([a for a in range(v.rank) if v.static(a) and v.ex.shape[a] >= 2])
    n = v.ex.shape[a]
    if ctx.rng.random() < 0.5:
        return f"torch.split({v.name}, {ctx.rng.randint(1, n - 1)}, dim={a})[{ctx.rng.choice([0, -1])}]"
    sizes = [1, n - 1]
    return f"torch.split({v.name}, {sizes}, dim={a})[{ctx.rng.choice([0, 1])}]"


@op("chunk", 0.4)
def chunk(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    return f"torch.chunk({v.name}, {ctx.rng.choice([2, 3])}, dim={a})[{ctx.rng.choice([0, -1])}]"


# -- gather / scatter ---------------------------------------------------------------------------------
@op("gather", 0.6)
def gather(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    # The index is made from the input's own shape so that it follows dynamic axes.
    n = v.size(a)
    k = ctx.rng.randint(0, n - 1)
    shift = ctx.rng.randint(1, 3)
    return (f"torch.gather({v.name}, {a}, (torch.ones_like({v.name}, dtype=torch.int64)"
            f".cumsum({a}) * {shift}) % {v.name}.shape[{a}])") if ctx.rng.random() < 0.5 else \
        f"torch.gather({v.name}, {a}, torch.full_like({v.name}, {k}, dtype=torch.int64))"


@op("index_select", 0.6)
def index_select(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    n = v.size(a)
    idx = [ctx.rng.randrange(n) for _ in range(ctx.rng.choice([1, 2, 4]))]
    return f"torch.index_select({v.name}, {a}, torch.tensor({idx}))"


@op("scatter", 0.5)
def scatter(ctx):
    v = ctx.pick(lambda v: v.rank >= 1 and v.dtype != torch.bool)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    index = (f"(torch.ones_like({v.name}, dtype=torch.int64).cumsum({a}) * "
             f"{ctx.rng.randint(1, 2)}) % {v.name}.shape[{a}]")
    kind = ctx.rng.choice(["scatter", "scatter_add", "scatter_reduce"])
    if kind == "scatter_reduce":
        reduce = ctx.rng.choice(["sum", "amax", "amin", "prod"])
        return f"torch.scatter_reduce({v.name}, {a}, {index}, {v.name} * 2, reduce='{reduce}')"
    return f"torch.{kind}({v.name}, {a}, {index}, {v.name} * 2)"


# -- the rest --------------------------------------------------------------------------------------
@op("interpolate", 0.7)
def interpolate(ctx):
    v = _spatial(ctx, 4)
    if v is None:
        return None
    mode = ctx.rng.choice(["nearest", "bilinear", "bilinear_ac", "bicubic"])
    align = ""
    if mode == "bilinear_ac":
        mode, align = "bilinear", ", align_corners=True"
    size = ("scale_factor=2" if ctx.rng.random() < 0.6 or v.dyn & {2, 3}
            else f"size=({ctx.rng.randint(2, 7)}, {ctx.rng.randint(2, 7)})")
    return f"F.interpolate({v.name}, {size}, mode='{mode}'{align})"


@op("roll", 0.5)
def roll(ctx):
    v = ctx.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    a = ctx.rng.randrange(v.rank)
    shift = ctx.rng.choice([1, -1, 2, v.size(a) + 1])
    return f"torch.roll({v.name}, {shift}, {a})"


@op("sdpa", 0.8)
def sdpa(ctx):
    q = ctx.pick(lambda v: is_float(v) and v.rank in (3, 4) and v.static(-1))
    if q is None:
        return None
    e = q.ex.shape[-1]
    k = ctx.pick(lambda v: v.dtype == q.dtype and v.rank == q.rank and v.ex.shape[-1] == e
                 and v.ex.shape[:-2] == q.ex.shape[:-2] and v.sec.shape[:-2] == q.sec.shape[:-2])
    causal = ctx.rng.random() < 0.3
    scale = ", scale=0.3" if ctx.rng.random() < 0.3 else ""
    if causal:
        k = q
    return (f"F.scaled_dot_product_attention({q.name}, {k.name}, {k.name}, "
            f"is_causal={causal}{scale})")


@op("outer_mlp", 0.3)
def mlp(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank >= 1 and v.static(-1))
    if v is None:
        return None
    k = v.ex.shape[-1]
    return (f"F.linear(F.gelu(F.linear({v.name}, {ctx.add_param((8, k), v.dtype)})), "
            f"{ctx.add_param((k, 8), v.dtype)})")


@op("topk", 0.3)
def topk(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank >= 1 and v.size(-1) >= 2)
    if v is None:
        return None
    # Indices only where they are unique: torch and ONNX Runtime order ties (and NaNs)
    # differently, and neither promises an order.
    distinct = all(not t.isnan().any() and bool((t.sort(-1)[0].diff(dim=-1) != 0).all())
                   for t in (v.ex.float(), v.sec.float()))
    return f"torch.topk({v.name}, 2, dim=-1)[{ctx.rng.choice([0, 1]) if distinct else 0}]"


@op("sort", 0.3)
def sort(ctx):
    v = ctx.pick(lambda v: is_float(v) and v.rank >= 1)
    if v is None:
        return None
    return f"torch.sort({v.name}, dim=-1, descending={ctx.rng.choice([False, True])})[0]"
