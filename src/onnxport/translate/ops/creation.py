"""Tensor creation: arange, full, zeros/ones and their *_like and new_* forms, windows, eye,
one_hot and the triangle indices."""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

from onnxport.translate.ops._helpers import (
    CONSTANT_LIMIT, as_tensor, cast, expected_dtype, filled, shape_list,
)
from onnxport.errors import TranslationError
from onnxport.translate.registry import translates

@translates("aten::full")
def full(g, size, fill_value, **_):
    """full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return filled(g, list(size), fill_value, expected_dtype(g))


@translates("aten::zeros", "aten::empty", "aten::ones")
def zeros(g, size, *_, **__):
    """zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    fill = 1 if "ones" in g.provenance.aten else 0
    return filled(g, list(size), fill, expected_dtype(g))


@translates("aten::new_zeros", "aten::new_ones", "aten::new_empty", "aten::new_full")
def new_zeros(g, self, size, *rest, **__):
    """new_zeros(Tensor self, SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    name = g.provenance.aten
    fill = rest[0] if "new_full" in name else (1 if "new_ones" in name else 0)
    return filled(g, list(size), fill, expected_dtype(g))


@translates("aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like")
def zeros_like(g, self, *rest, **__):
    """full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor"""
    name = g.provenance.aten
    fill = rest[0] if "full_like" in name else (1 if "ones_like" in name else 0)
    dtype = expected_dtype(g)
    shape = g.static_shape(self)
    if shape is not None:
        return filled(g, shape, fill, dtype)
    if isinstance(fill, ir.Value) or dtype == ir.DataType.BFLOAT16 and g.opset < 20:
        # a fill read from the model's values (x.max()), or a bfloat16 one ConstantOfShape
        # cannot hold before opset 20: one element spread over self's shape
        one = filled(g, [], fill, dtype)
        return g.op("Expand", one, g.op("Shape", self))
    from onnx_ir.tensor_adapters import to_torch_dtype

    out = g.op("ConstantOfShape", g.op("Shape", self),
               value=ir.tensor(torch.tensor([fill], dtype=to_torch_dtype(dtype)).numpy()))
    out.dtype = dtype
    return out


@translates("aten::fill", "aten::fill_")
def fill(g, self, value):
    """fill.Scalar(Tensor self, Scalar value) -> Tensor"""
    dtype = self.dtype
    shape = g.static_shape(self)
    if shape is not None and not isinstance(value, ir.Value):
        return filled(g, shape, value, dtype)
    fill_value = as_tensor(g, value, self)
    return g.op("Expand", fill_value, g.op("Shape", self))


@translates("aten::scalar_tensor")
def scalar_tensor(g, s, **_):
    """scalar_tensor(Scalar s, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    if isinstance(s, ir.Value):  # a symbolic scalar, 1-D [1] in the graph: make it 0-d
        return g.op("Reshape", cast(g, s, expected_dtype(g)), g.const([], ir.DataType.INT64))
    return as_tensor(g, s, dtype=expected_dtype(g))


@translates("aten::arange")
def arange(g, *args, **kwargs):
    """arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    numbers = [a for a in args if isinstance(a, (int, float, ir.Value))]
    if len(numbers) == 1:
        start, end, step = 0, numbers[0], 1
    elif len(numbers) == 2:
        (start, end), step = numbers, 1
    else:
        start, end, step = numbers[:3]
    dtype = expected_dtype(g)
    if not any(isinstance(n, ir.Value) for n in (start, end, step)):
        from onnx_ir.tensor_adapters import to_torch_dtype

        values = torch.arange(start, end, step, dtype=to_torch_dtype(dtype))
        return g.const(values)
    if dtype in (ir.DataType.INT64, ir.DataType.INT32):
        out = g.op("Range", as_tensor(g, start, dtype=dtype), as_tensor(g, end, dtype=dtype),
                   as_tensor(g, step, dtype=dtype))
        return out
    # torch counts ceil((end - start) / step) elements in double and makes start + i * step
    # in double; Range in float32 counts one too many or too few when the float32 rounding of
    # end / step crosses an integer.
    start, end, step = (as_tensor(g, n, dtype=ir.DataType.DOUBLE) for n in (start, end, step))
    count = g.op("Ceil", g.op("Div", g.op("Sub", end, start), step))
    count = cast(g, g.op("Max", count, g.const(0.0, ir.DataType.DOUBLE)), ir.DataType.INT64)
    count = g.op("Reshape", count, g.const([], ir.DataType.INT64))
    index = g.op("Range", g.const(0, ir.DataType.INT64), count, g.const(1, ir.DataType.INT64))
    values = g.op("Add", start, g.op("Mul", cast(g, index, ir.DataType.DOUBLE), step))
    return cast(g, values, dtype)


@translates("aten::tril", "aten::triu", since_opset=14)
def tril(g, self, diagonal=0):
    """tril(Tensor self, int diagonal=0) -> Tensor"""
    upper = "triu" in g.provenance.aten
    if isinstance(diagonal, ir.Value):  # a size the model computed (n - 4): a 0-d k
        k = g.op("Reshape", cast(g, diagonal, ir.DataType.INT64), g.const([], ir.DataType.INT64))
    else:
        k = g.const(diagonal, ir.DataType.INT64) if diagonal else None
    return g.op("Trilu", self, k, upper_i=int(upper))


@translates("aten::tril", "aten::triu")
def tril_before_14(g, self, diagonal=0):
    """tril(Tensor self, int diagonal=0) -> Tensor  (before Trilu: compare positions)"""
    from onnxport.translate.ops.attention import lower_triangle
    from onnxport.translate.ops.shape import size_of

    r = len(self.shape)
    rows, columns = size_of(g, self, r - 2), size_of(g, self, r - 1)
    if "triu" in g.provenance.aten:  # triu(k) keeps what tril(k - 1) drops
        below = g.op("Sub", diagonal, g.const([1], ir.DataType.INT64)) \
            if isinstance(diagonal, ir.Value) else diagonal - 1
        keep = g.op("Not", lower_triangle(g, rows, columns, below))
    else:
        keep = lower_triangle(g, rows, columns, diagonal)
    return g.op("Where", keep, self, g.const(0, self.dtype))


# torch's windows (w[i], i < n, over d = n when periodic else n - 1) as sums of cosines:
# w = a0 - a1 cos(2 pi i / d) + a2 cos(4 pi i / d); bartlett is 1 - |2 i / d - 1|.
_WINDOWS = {"hann": (0.5, 0.5), "blackman": (0.42, 0.5, 0.08), "bartlett": None}


@translates("aten::hann_window", "aten::hann_window.periodic",
            "aten::hamming_window", "aten::hamming_window.periodic",
            "aten::hamming_window.periodic_alpha", "aten::hamming_window.periodic_alpha_beta",
            "aten::blackman_window", "aten::blackman_window.periodic",
            "aten::bartlett_window", "aten::bartlett_window.periodic")
def window(g, window_length, periodic=True, alpha=0.54, beta=0.46, **_):
    """hamming_window.periodic_alpha_beta(int window_length, bool periodic, float alpha, float beta, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    (hann, blackman and bartlett take window_length and periodic.) torch's own values as a
    constant, length 1 included (torch makes it [1]), when torch fixed the length at capture
    (torch 2.11 keeps hann whole; later ones decompose it); computed in double when the length
    is a run's value (a traced size)."""
    kind = g.provenance.aten.removeprefix("aten::").split("_window")[0]
    if not isinstance(window_length, ir.Value):
        extra = (float(alpha), float(beta)) if kind == "hamming" else ()
        values = getattr(torch, f"{kind}_window")(int(window_length), bool(periodic), *extra,
                                                  dtype=torch.float64)
        return as_tensor(g, values, dtype=expected_dtype(g))
    coefficients = (float(alpha), float(beta)) if kind == "hamming" else _WINDOWS[kind]
    return _window_of_a_run_length(g, window_length, bool(periodic), coefficients)


def _window_of_a_run_length(g, length: ir.Value, periodic: bool,
                            coefficients: tuple[float, ...] | None) -> ir.Value:
    """The window of ``coefficients`` (None: bartlett) for a length computed at run time, in
    double; [1] for n = 1 as torch gives it."""
    f64 = ir.DataType.DOUBLE
    n = as_tensor(g, length, dtype=ir.DataType.INT64)
    index = cast(g, g.op("Range", g.const(0, ir.DataType.INT64), n,
                         g.const(1, ir.DataType.INT64)), f64)
    denominator = cast(g, n, f64) if periodic else \
        g.op("Sub", cast(g, n, f64), g.const(1.0, f64))
    denominator = g.op("Max", denominator, g.const(1.0, f64))
    if coefficients is None:
        ramp = g.op("Div", g.op("Mul", index, g.const(2.0, f64)), denominator)
        window = g.op("Sub", g.const(1.0, f64), g.op("Abs", g.op("Sub", ramp, g.const(1.0, f64))))
    else:
        angle = g.op("Div", g.op("Mul", index, g.const(2 * math.pi, f64)), denominator)
        window = g.const(coefficients[0], f64)
        for k, coefficient in enumerate(coefficients[1:], start=1):
            term = g.op("Cos", angle if k == 1 else g.op("Mul", angle, g.const(float(k), f64)))
            window = g.op("Sub" if k % 2 else "Add", window,
                          g.op("Mul", g.const(coefficient, f64), term))
    window = g.op("Where", g.op("Equal", n, g.const(1, ir.DataType.INT64)),
                  g.const(1.0, f64), window)
    return cast(g, window, expected_dtype(g) or ir.DataType.FLOAT)


@translates("aten::kaiser_window", "aten::kaiser_window.periodic", "aten::kaiser_window.beta")
def kaiser_window(g, window_length, periodic=True, beta=12.0, **_):
    """kaiser_window.beta(int window_length, bool periodic, float beta, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    torch's own values, as a constant: the window needs its length at export time."""
    if isinstance(window_length, ir.Value):
        raise TranslationError(
            f"torch.kaiser_window at {g.provenance.source or 'an unknown line'} takes a length "
            "computed at run time (a dynamic size); its ONNX form needs the length at export "
            "time: make the window once (a buffer of the model), or keep that size static")
    values = torch.kaiser_window(int(window_length), bool(periodic), float(beta),
                                 dtype=torch.float64)
    return as_tensor(g, values, dtype=expected_dtype(g))


@translates("aten::tril_indices", "aten::triu_indices")
def triangle_indices(g, row, col, offset=0, **_):
    """tril_indices(int row, int col, int offset=0, *, ScalarType? dtype=long, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    torch's own indices, as a constant (the sizes are plain ints in the schema)."""
    if any(isinstance(v, ir.Value) for v in (row, col, offset)):
        raise TranslationError(
            f"{g.provenance.aten} at {g.provenance.source or 'an unknown line'} takes a size "
            "computed at run time (a dynamic size); its ONNX form needs row, col and offset at "
            "export time: keep those sizes static")
    function = torch.tril_indices if "tril" in g.provenance.aten else torch.triu_indices
    return as_tensor(g, function(int(row), int(col), int(offset)),
                     dtype=expected_dtype(g) or ir.DataType.INT64)


@translates("aten::one_hot")
def one_hot(g, self, num_classes=-1):
    """one_hot(Tensor self, int num_classes=-1) -> Tensor

    ONNX OneHot, its depth the class count, a run's value where it is a dynamic size, or
    for -1 the largest index plus one, as torch computes it."""
    if isinstance(num_classes, ir.Value):
        depth = as_tensor(g, num_classes, dtype=ir.DataType.INT64)
    elif int(num_classes) < 0:
        largest = g.op("ReduceMax", cast(g, self, ir.DataType.INT64), keepdims_i=0)
        depth = g.op("Add", largest, g.const(1, ir.DataType.INT64))
    else:
        depth = g.const(int(num_classes), ir.DataType.INT64)
    values = g.const([0, 1], ir.DataType.INT64)
    return g.op("OneHot", cast(g, self, ir.DataType.INT64), depth, values, axis_i=-1)


@translates("aten::linspace")
def linspace(g, start, end, steps, *_, **__):
    """linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor

    torch's kernel, in double: start + i * step for the first half, end - (steps - 1 - i) *
    step for the rest, step = (end - start) / (steps - 1), start alone for one step; the
    count may be a run's value."""
    f64, i64 = ir.DataType.DOUBLE, ir.DataType.INT64
    dtype = expected_dtype(g) or ir.DataType.FLOAT
    count = as_tensor(g, steps, dtype=i64)
    first, last = as_tensor(g, start, dtype=f64), as_tensor(g, end, dtype=f64)
    index = g.op("Range", g.const(0, i64), count, g.const(1, i64))
    gaps = cast(g, g.op("Max", g.op("Sub", count, g.const(1, i64)), g.const(1, i64)), f64)
    step = g.op("Div", g.op("Sub", last, first), gaps)
    half = g.op("Div", count, g.const(2, i64))
    from_start = g.op("Add", first, g.op("Mul", cast(g, index, f64), step))
    before_end = cast(g, g.op("Sub", g.op("Sub", count, g.const(1, i64)), index), f64)
    from_end = g.op("Sub", last, g.op("Mul", before_end, step))
    # (One step is the start: torch's halfway point is 0 then.)
    use_start = g.op("Or", g.op("Less", index, half), g.op("Equal", count, g.const(1, i64)))
    values = g.op("Where", use_start, from_start, from_end)
    return cast(g, values, dtype)


@translates("aten::eye")
def eye(g, n, *_, **__):
    """eye(SymInt n, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _eye(g, n, n)


@translates("aten::eye.m")
def eye_m(g, n, m, *_, **__):
    """eye.m(SymInt n, SymInt m, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor"""
    return _eye(g, n, m)


def _eye(g, n, m):
    from onnx_ir.tensor_adapters import to_torch_dtype

    dtype = expected_dtype(g)
    if isinstance(n, int) and isinstance(m, int) and n * m <= CONSTANT_LIMIT:
        return g.const(torch.eye(n, m, dtype=to_torch_dtype(dtype)))
    # Sizes known at run time (or large): EyeLike of a tensor of that shape.
    zeros = g.op("ConstantOfShape", shape_list(g, [n, m]),
                 value=ir.tensor(torch.zeros(1, dtype=torch.float32).numpy()))
    # In float, then cast: ONNX Runtime's EyeLike makes few dtypes (no bool, no float16).
    out = g.op("EyeLike", zeros, dtype_i=int(ir.DataType.FLOAT))
    out.dtype = ir.DataType.FLOAT
    return cast(g, out, dtype)
