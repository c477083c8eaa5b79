"""Which dimensions asked to be dynamic the model fixes to one size, and the line of model code
that fixes each: read from the guards torch's ShapeEnv records while torch.export traces."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import math
import operator
import os
import re
import sysconfig
import traceback
from typing import Any, Callable, Iterator, Mapping

import sympy
import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from onnxport.capture.program_run import recorded_shapes_hold

TORCH_FOLDER = os.path.dirname(torch.__file__) + os.sep
ONNXPORT_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB_FOLDER = sysconfig.get_paths()["stdlib"] + os.sep


@dataclasses.dataclass
class Guard:
    """A condition torch assumed about one size symbol, and where in model code."""

    expr: Any  # a sympy relation, or Eq(symbol, value) for a replacement
    symbol: Any
    location: str | None
    sources: list[str]


@dataclasses.dataclass
class FixedDim:
    """A dimension asked to be dynamic that the capture did not keep dynamic."""

    position: int  # index of the tensor input
    axis: int
    size: int  # the example's size, which the graph is valid for
    location: str | None  # the model code that fixed it, when torch tells
    upper: int | None = None  # set when the graph is valid up to this size only
    reason: str | None = None  # why it is static when no guard says (a shape eager disagrees on)


def is_model_frame(filename: str) -> bool:
    """Model code is any Python file outside torch, onnxport and the standard library
    (torchvision, timm or transformers code counts: it is where the model is written)."""
    if filename.startswith("<") or filename.startswith(TORCH_FOLDER):
        return False
    if filename.startswith(ONNXPORT_FOLDER):
        return False
    if filename.startswith(_STDLIB_FOLDER) and "-packages" + os.sep not in filename:
        return False
    return True


def _format(frame: traceback.FrameSummary) -> str:
    code = (frame.line or "").strip()
    return f"{frame.filename}:{frame.lineno} in {frame.name}" + (f": {code}" if code else "")


def model_location(frames: list[traceback.FrameSummary]) -> str | None:
    """The innermost frame of model code, formatted ``file:line in function: code``."""
    for frame in reversed(frames):
        if is_model_frame(frame.filename):
            return _format(frame)
    return None


def failure_location(error: BaseException) -> str | None:
    """The line of model code where ``error`` was raised (the innermost, across chained errors)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        location = model_location(traceback.extract_tb(error.__traceback__))
        if location is not None:
            return location
        error = error.__cause__ or error.__context__
    return None


def _current_location() -> str | None:
    from torch._guards import TracingContext

    user_stack = TracingContext.extract_stack()  # strict mode: the stack dynamo traced
    if user_stack:
        return model_location(list(user_stack))
    # The Python stack is not enough: a guard raised from an ATen kernel (a contiguity check in
    # linear) reaches Python through C++; torch's own traceback walks across it.
    from torch.utils._traceback import CapturedTraceback

    return model_location(list(CapturedTraceback.extract().summary()))


def _single_symbol(expr: Any) -> Any:
    free = getattr(expr, "free_symbols", ())
    return next(iter(free)) if len(free) == 1 else None


@contextlib.contextmanager
def recording_guards() -> Iterator[list[Guard]]:
    """Record every guard on a single size symbol (``s0 == 1``, ``s0 <= 4``) and every
    replacement of a symbol by a number, with the model line that caused it."""
    guards: list[Guard] = []
    log_guard = ShapeEnv._log_guard
    set_replacement = ShapeEnv._set_replacement

    def sources(shape_env, symbol) -> list[str]:
        return [source.name for source in shape_env.var_to_sources.get(symbol, [])]

    def recording_log_guard(self, prefix, g, forcing_spec):
        symbol = _single_symbol(g)
        if symbol is not None:
            guards.append(Guard(g, symbol, _current_location(), sources(self, symbol)))
        return log_guard(self, prefix, g, forcing_spec)

    def recording_set_replacement(self, a, tgt, msg):
        if isinstance(tgt, (int, sympy.Integer)):
            guards.append(Guard(sympy.Eq(a, tgt), a, _current_location(), sources(self, a)))
        return set_replacement(self, a, tgt, msg)

    ShapeEnv._log_guard = recording_log_guard
    ShapeEnv._set_replacement = recording_set_replacement
    try:
        yield guards
    finally:
        ShapeEnv._log_guard = log_guard
        ShapeEnv._set_replacement = set_replacement


# On an accelerator torch picks kernels by size: cuDNN's batch norm takes a batch of at most
# 65535 in eval (an H200, torch 2.11), and another kernel with the same arithmetic beyond. The
# guard bounds the dim in the program, but it is no limit of the model: no warning for it.
KERNEL_CHOICE_BOUND = 65535


def fixed_dims(program: torch.export.ExportedProgram, user_inputs: list[str],
               requested: Mapping[tuple[int, int], Any], guards: list[Guard],
               inputs: tuple | None = None,
               differs: Callable[[tuple[int, int], int], bool] | None = None) -> list[FixedDim]:
    """The requested dynamic dims (tensor input position, axis) -> requested max) that the
    program does not keep dynamic over the requested range: a number in the placeholder's shape,
    a symbol torch found equal to a number, or one whose range torch bounded, or that a guard
    pins (``inputs``, the example's tensor inputs, tell where the program holds beyond it;
    ``differs(dim, size)``, whether the program computes other results than the model with
    that dim at that size, where a guard on the size modulo a number refuses it)."""
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    bounds_of = size_bounds(program)
    pinning = _PinningGuards(program, inputs, differs)
    found = []
    for (position, axis), wanted_max in requested.items():
        if position >= len(user_inputs):
            continue
        value = placeholders[user_inputs[position]].meta.get("val")
        if not isinstance(value, torch.Tensor) or axis >= value.dim():
            continue
        size = static_size(value.shape[axis])
        if isinstance(size, int):
            found.append(FixedDim(position, axis, size, _replacement_location(guards, size, axis)))
            continue
        expr = size.node.expr
        if not isinstance(expr, sympy.Symbol):
            continue  # a derived dim (2 * batch): torch checked it against the given one
        example = size.node.hint
        # (A guard tells only where.)
        lower, upper = bounds_of(size)
        if holds_at_small_sizes_only(lower, upper) and (
                wanted_max is None or wanted_max > upper):
            equal = [g for g in guards if g.symbol == expr and isinstance(g.expr, sympy.Eq)
                     and any(isinstance(side, sympy.Integer) for side in g.expr.args)]
            where = equal[0].location if equal else _bound_location(guards, expr)
            found.append(FixedDim(position, axis, int(example), where))
        elif upper is not None and (wanted_max is None or upper < wanted_max) and \
                not kernel_choice(value, upper):
            found.append(FixedDim(position, axis, int(example), _bound_location(guards, expr),
                                  upper=upper))
        elif (pinned := pinning.of(expr, int(example), (position, axis))) is not None:
            found.append(FixedDim(position, axis, int(example), None, reason=(
                f"torch.export's program holds only where {pinned}, which sizes far from it "
                "do not meet (model code read the size as a Python number: a branch on it, "
                "int(x.size(0) / 2), a count of pieces); PyTorch checks that when the "
                "program runs, ONNX would not")))
    return found


def upper_bounds(program: torch.export.ExportedProgram,
                 user_inputs: list[str]) -> dict[tuple[str, int], int]:
    """(input placeholder, axis) -> the largest size torch's program holds for, for each
    dynamic input dim whose range torch bounded (a guard on a size: a branch, a count of
    pieces). PyTorch's own program refuses larger sizes when it runs; so does the ONNX model
    (translation checks them). A bound of kernel choice on an accelerator is no limit of the
    model (KERNEL_CHOICE_BOUND)."""
    bounds_of = size_bounds(program)
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    found = {}
    for name in user_inputs:
        value = placeholders[name].meta.get("val") if name in placeholders else None
        if not isinstance(value, torch.Tensor):
            continue
        for axis, size in enumerate(value.shape):
            if not isinstance(size, torch.SymInt) or not isinstance(size.node.expr, sympy.Symbol):
                continue
            _, upper = bounds_of(size)
            if upper is None or kernel_choice(value, upper):
                continue
            found[(name, axis)] = upper
    return found


# A size of an input in torch.export's guard code: L['x'].size()[0], L['d']['a'].stride()[1].
_REFERENCE = re.compile(r"L(?:\[[^\[\]]+\])+\.(?:size|stride)\(\)\[\d+\]"
                        r"|L(?:\[[^\[\]]+\])+\.storage_offset\(\)")


class _PinningGuards:
    """The guards of ``program`` that pin a size it keeps symbolic (read once, when a dim
    first asks).

    ``int(x.size(0) / 2)`` becomes a constant with the guard ``math.trunc(size / 2) == 2``,
    and a branch on ``x.size(0) // 2 == 3`` is taken once with that guard; torch keeps such
    guards only as code that the program's module checks when called (not as a replacement
    or a range, so the dim looks dynamic). ``ExportedProgram._guards_code`` is the one place
    they are (torch 2.11 to 2.14); without it there is nothing to check. A guard on how many
    pieces one of the program's splits makes is left alone (:meth:`_counts_pieces`): the
    translation computes the pieces of split, chunk and unbind at run time (and fails the
    run where torch makes another count). A guard on a piece's size is not: torch records
    the shapes after it as that size (``(x.chunk(2)[1] * 2)`` of 3 rows has 1 row, and
    repeat_interleave's Reshape was built on that)."""

    def __init__(self, program: torch.export.ExportedProgram, inputs: tuple | None = None,
                 differs: Callable[[tuple[int, int], int], bool] | None = None):
        self.program, self.inputs, self.differs = program, inputs, differs

    @functools.cached_property
    def _read(self) -> tuple[list[str], Any, bool]:
        program = self.program
        codes = getattr(program, "_guards_code", None) or []
        fake = next((n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"
                     and isinstance(n.meta.get("val"), torch.Tensor)), None)
        shape_env = getattr(getattr(fake, "fake_mode", None), "shape_env", None)
        splits = any(getattr(n.target, "__name__", "").split(".")[0] in _SPLITS
                     for n in program.graph.nodes if n.op == "call_function")
        return codes, shape_env, splits

    def of(self, symbol: Any, example: int, where: tuple[int, int] | None = None) -> str | None:
        """A guard on this size alone, an equality true at the example and at none of its
        multiples 2..17 (which meet any ``size % p == r`` the example meets, for p <= 16).
        With the example ``inputs`` and ``where`` the size is (input position, axis), a guard
        of a program that splits pins it only where the program's recorded shapes do not
        hold at a size the guard refuses (:func:`recorded_shapes_hold`): a piece's size the
        translation computes at run time, read by no Reshape, leaves the axis dynamic."""
        codes, shape_env, splits = self._read
        if not codes or shape_env is None:
            return None
        names = {source.name if isinstance(source.name, str) else source.name()
                 for source in shape_env.var_to_sources.get(symbol, [])}
        holds_beyond = None  # (the program runs once, for the first guard that needs it)
        for code in codes:
            references = set(_REFERENCE.findall(code))
            if len(references) != 1 or not references <= names:
                continue
            guard = _Guard.parse(code, references.pop())
            if guard is None or guard.holds(example) is not True:
                continue
            if guard.periodic:
                if self._refuses_where_the_model_runs(guard, example, where):
                    return code
                continue
            if any(guard.holds(example * m) is not False for m in range(2, 18)):
                continue
            if splits and not guard.floating:
                if self._counts_pieces(guard, symbol):
                    continue
                if holds_beyond is None:
                    holds_beyond = self._holds_beyond(where, example)
                # (A program whose shapes hold may still compute the model's results at the
                # example only: torch.zeros(x.chunk(3)[2].size(0)) of a piece it took as 1.)
                if holds_beyond and not self._refuses_where_the_model_runs(guard, example,
                                                                           where):
                    continue
            return code
        return None

    def _refuses_where_the_model_runs(self, guard: "_Guard", example: int,
                                      where: tuple[int, int] | None) -> bool:
        """Whether a guard on the size modulo a number (true at the example) refuses a size
        where the model runs and the program, run there without its guards, computes other
        results (``differs``): a branch on the size's parity taken once, a Reshape built
        on it. A guard that refuses what the model refuses too (a view of the size in 2
        halves) or whose program holds there (tensor_split's pieces, computed at run time)
        leaves the axis dynamic."""
        if self.differs is None or where is None:
            return False
        refused = next((size for size in range(example + 1, example + 41)
                        if guard.holds(size) is False), None)
        return refused is not None and self.differs(where, refused)

    def _holds_beyond(self, where: tuple[int, int] | None, example: int) -> bool:
        if self.inputs is None or where is None or where[0] >= len(self.inputs):
            return False
        return all(recorded_shapes_hold(self.program, self.inputs, *where, size)
                   for size in (2 * example + 1, 3 * example + 2))

    def _counts_pieces(self, guard: "_Guard", symbol: Any) -> bool:
        """Whether ``guard`` says, at every size from 1 to 40 of ``symbol``, what one of the
        program's splits says by making as many pieces as it recorded (each split run on a
        meta tensor of its input's size there)."""
        for node in self.program.graph.nodes:
            pieces = node.meta.get("val")
            if node.op != "call_function" or not isinstance(pieces, (list, tuple)) or \
                    getattr(node.target, "__name__", "").split(".")[0] not in _SPLITS:
                continue
            told = [(said, count == len(pieces)) for size in range(1, 41)
                    if (said := guard.holds(size)) is not None
                    and (count := _piece_count(node, symbol, size)) is not None]
            if len(told) > 20 and all(said == made for said, made in told):
                return True
        return False


def _piece_count(node: torch.fx.Node, symbol: Any, size: int) -> int | None:
    """How many pieces split ``node`` makes where ``symbol`` is ``size`` (its input's other
    sizes as in the example), or None where that cannot be told."""
    source = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(source, torch.Tensor) or any(
            isinstance(a, torch.fx.Node) for a in pytree.tree_leaves((node.args[1:],
                                                                      node.kwargs))):
        return None
    shape = []
    for dim in source.shape:
        expr = dim.node.expr if isinstance(dim, torch.SymInt) else sympy.Integer(dim)
        if expr.free_symbols <= {symbol}:
            value = sympy.sympify(expr.xreplace({symbol: sympy.Integer(size)}))
            if not value.is_number or value < 0:
                return None
            shape.append(int(value))
        else:
            shape.append(int(dim.node.hint))
    try:
        return len(node.target(torch.empty(shape, device="meta"), *node.args[1:],
                               **node.kwargs))
    except (RuntimeError, ValueError, TypeError, IndexError):
        return None


def pinning_guard(program: torch.export.ExportedProgram, size: Any, inputs: tuple | None = None,
                  where: tuple[int, int] | None = None,
                  differs: Callable[[tuple[int, int], int], bool] | None = None) -> str | None:
    """The guard code of ``program`` that pins the dynamic ``size`` (a SymInt of an input,
    axis ``where`` of the example ``inputs``) to its example's value and what few sizes share
    its result (:class:`_PinningGuards`; ``differs`` as for :func:`fixed_dims`)."""
    if not isinstance(size, torch.SymInt) or not isinstance(size.node.expr, sympy.Symbol):
        return None
    return _PinningGuards(program, inputs, differs).of(size.node.expr, int(size.node.hint),
                                                       where)


_SPLITS = {"split", "split_with_sizes", "chunk", "tensor_split", "unbind", "unsafe_split"}


class _Guard:
    """An equality of torch's guard code on one size, or any comparison of it modulo a number
    (``size % 2 == 0``: :attr:`periodic`), evaluated by walking its syntax tree (arithmetic,
    comparisons and math.trunc/floor/ceil, max and min; nothing else runs)."""

    _BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
               ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
               ast.Div: lambda a, b: a / b, ast.Mod: lambda a, b: a % b}
    _CALLS = {"math.trunc": math.trunc, "math.floor": math.floor, "math.ceil": math.ceil,
              "max": max, "min": min, "torch.sym_float": float, "abs": abs, "round": round}

    _COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
                ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}

    def __init__(self, tree: ast.Compare):
        self.tree = tree
        self.floating = any(isinstance(node, ast.Div) or isinstance(node, ast.Call)
                            and ast.unparse(node.func).startswith(("math.", "torch.sym_float"))
                            for node in ast.walk(tree))
        self.periodic = any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)
                            for node in ast.walk(tree))

    @classmethod
    def parse(cls, code: str, reference: str) -> "_Guard | None":
        try:
            body = ast.parse(code.replace(reference, "size"), mode="eval").body
        except SyntaxError:
            return None
        if not isinstance(body, ast.Compare) or len(body.ops) != 1 or \
                type(body.ops[0]) not in cls._COMPARE:
            return None
        guard = cls(body)
        return guard if guard.periodic or isinstance(body.ops[0], ast.Eq) else None

    def holds(self, size: int) -> bool | None:
        try:
            return self._COMPARE[type(self.tree.ops[0])](
                self._value(self.tree.left, size), self._value(self.tree.comparators[0], size))
        except (LookupError, ArithmeticError, TypeError):
            return None  # something it does not know: no verdict

    def _value(self, node: ast.AST, size: int) -> Any:
        if isinstance(node, ast.Name) and node.id == "size":
            return size
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self._value(node.operand, size)
        if isinstance(node, ast.BinOp):
            return self._BINARY[type(node.op)](self._value(node.left, size),
                                               self._value(node.right, size))
        if isinstance(node, ast.Call) and not node.keywords:
            return self._CALLS[ast.unparse(node.func)](*(self._value(a, size)
                                                         for a in node.args))
        raise LookupError(ast.dump(node))


def holds_at_small_sizes_only(lower: int | None, upper: int | None) -> bool:
    """Whether a dynamic dim torch bounded to [``lower``, ``upper``] is as good as fixed: one
    size, or at most 2 (a split into pieces of 2 from an example of 1 holds up to there, and
    the program equates sizes that differ beyond). Such a dim is made static."""
    return upper is not None and (upper == lower or upper <= 2)


def static_size(size: Any) -> Any:
    """``size`` as an int when torch knows its value (a SymInt may hold a number)."""
    if isinstance(size, torch.SymInt) and size.node.expr.is_number:
        return int(size.node.expr)
    return size


def finite_bound(value: Any) -> int | None:
    """A finite bound as an int; None for torch's int_oo."""
    if isinstance(value, (int, sympy.Integer)) and not isinstance(value, bool):
        return int(value)
    return None


def size_bounds(program: torch.export.ExportedProgram) -> Callable[[Any], tuple]:
    """A function giving the (lower, upper) bounds that ``program``'s ranges keep for a size:
    a SymInt of one symbol (None for an end without a bound, and for anything else). The
    ranges are what torch kept of its guards (some it records and drops, such as checks of
    its own caches)."""
    ranges = {str(symbol): bounds for symbol, bounds in program.range_constraints.items()}

    def bounds_of(size: Any) -> tuple[int | None, int | None]:
        bounds = ranges.get(str(size.node.expr)) if isinstance(size, torch.SymInt) else None
        if bounds is None:
            return None, None
        return finite_bound(bounds.lower), finite_bound(bounds.upper)

    return bounds_of


def kernel_choice(value: torch.Tensor, upper: int) -> bool:
    """Whether ``upper`` bounds a dim of ``value`` only by torch's choice of kernel on an
    accelerator (KERNEL_CHOICE_BOUND): no limit of the model."""
    return value.device.type not in ("cpu", "meta") and upper >= KERNEL_CHOICE_BOUND


def _replacement_location(guards: list[Guard], size: int, axis: int) -> str | None:
    """The model line behind a symbol torch replaced by ``size`` (its placeholder shows the
    number only, so the guard is found by value and axis)."""
    suffix = f".size()[{axis}]"
    for guard in guards:
        if isinstance(guard.expr, sympy.Eq) and sympy.Integer(size) in guard.expr.args and any(
                source.endswith(suffix) for source in guard.sources):
            if guard.location is not None:
                return guard.location
    return None


def _bound_location(guards: list[Guard], symbol: Any) -> str | None:
    for guard in guards:
        if guard.symbol == symbol and guard.location is not None:
            return guard.location
    return None


def describe(fixed: FixedDim, input_name: str, dim_name: str | None) -> str:
    named = f" ({dim_name!r})" if dim_name else ""
    if fixed.reason is not None:
        return f"axis {fixed.axis}{named} of input {input_name!r} is kept at {fixed.size}: {fixed.reason}"
    where = f"at {fixed.location}" if fixed.location else "(torch did not say where)"
    if fixed.upper is not None:
        return (f"axis {fixed.axis}{named} of input {input_name!r} is bounded to at most "
                f"{fixed.upper} by the model {where}")
    return (f"axis {fixed.axis}{named} of input {input_name!r} is fixed to {fixed.size} by the "
            f"model {where}")


__all__ = ["FixedDim", "Guard", "describe", "failure_location", "fixed_dims", "recording_guards"]

