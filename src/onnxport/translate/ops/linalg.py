"""Matrix products: linear, matmul and the BLAS-style fused forms."""

from __future__ import annotations

import math

import onnx_ir as ir

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import cast, count_at_or_below, expected_dtype, rank
from onnxport.translate.registry import translates


@translates("aten::linear")
def linear(g, input, weight, bias=None):
    """linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"""
    if rank(input) == 2 and rank(weight) == 2:
        return g.op("Gemm", input, weight, bias, transB_i=1)
    if _flattens_to_gemm(g, input, weight):
        return _linear_as_gemm(g, input, weight, bias)
    # A transpose of a weight used once is folded into the stored weight by a pass.
    out = g.op("MatMul", input, g.op("Transpose", weight, perm_i=[1, 0]) if rank(weight) == 2 else weight)
    if bias is not None:
        out = g.op("Add", out, bias)
    return out


def _flattens_to_gemm(g, input, weight) -> bool:
    return (g.opset >= 11 and rank(input) >= 3 and rank(weight) == 2
            and isinstance(input.shape[-1], int) and input.dtype in _GEMM_DTYPES)


_GEMM_DTYPES = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16}


def _linear_as_gemm(g, input, weight, bias):
    """[..., K] -> Reshape [M, K] -> Gemm -> Reshape [..., N]: the form ONNX Runtime's own
    MatMul+Add fusion makes, here once, so that passes.FlatRowwise can keep the rows flat from
    one Gemm to the next and drop the Reshapes in between."""
    leading, features = list(input.shape)[:-1], input.shape[-1]
    outputs = weight.shape[0]
    rows = g.op("Reshape", input, g.const([-1, features]))
    count = math.prod(leading) if all(isinstance(d, int) for d in leading) else None
    rows.shape = ir.Shape([count if count is not None else ir.SymbolicDim(None), features])
    product = g.op("Gemm", rows, weight, bias, transB_i=1)
    product.shape = ir.Shape([rows.shape[0], outputs])
    symbolic = [i for i, d in enumerate(leading) if not isinstance(d, int)]
    if len(symbolic) <= 1 and isinstance(outputs, int):
        # One unknown dimension is what -1 stands for: no Shape subgraph needed.
        return g.op("Reshape", product, g.const([-1 if i in symbolic else d
                                                  for i, d in enumerate(leading)] + [outputs]))
    size = g.op("Shape", input, end_i=-1) if g.opset >= 15 else g.op(
        "Slice", g.op("Shape", input), g.const([0]), g.const([-1]))
    last = g.const([outputs]) if isinstance(outputs, int) else g.op(
        "Shape", weight, start_i=0, end_i=1) if g.opset >= 15 else g.op(
        "Slice", g.op("Shape", weight), g.const([0]), g.const([1]))
    return g.op("Reshape", product, g.op("Concat", size, last, axis_i=0))


@translates("aten::matmul", "aten::mm", "aten::bmm")
def matmul(g, self, other):
    """matmul(Tensor self, Tensor other) -> Tensor"""
    return g.op("MatMul", self, other)


@translates("aten::addmm")
def addmm(g, self, mat1, mat2, *, beta=1, alpha=1):
    """addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    if mat1.shape is not None and len(mat1.shape) == 2 and mat1.shape[1] == 0:
        # An empty inner dimension: the product is zeros (ONNX Runtime before 1.32 returned
        # garbage from Gemm with K = 0), so the result is beta * self at the product's shape.
        rows = g.op("Shape", mat1, start_i=0, end_i=1) if g.opset >= 15 else \
            g.op("Slice", g.op("Shape", mat1), g.const([0]), g.const([1]))
        columns = g.op("Shape", mat2, start_i=1, end_i=2) if g.opset >= 15 else \
            g.op("Slice", g.op("Shape", mat2), g.const([1]), g.const([2]))
        scaled = g.op("Mul", self, g.const(beta, self.dtype))
        return g.op("Expand", scaled, g.op("Concat", rows, columns, axis_i=0))
    return g.op("Gemm", mat1, mat2, self, alpha_f=alpha, beta_f=beta)


@translates("aten::baddbmm", "aten::addbmm")
def baddbmm(g, self, batch1, batch2, *, beta=1, alpha=1):
    """baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor"""
    product = g.op("MatMul", batch1, batch2)
    if "addbmm" in g.provenance.aten and "baddbmm" not in g.provenance.aten:
        # addbmm adds the sum of the batch of products: one [n, p] matrix.
        product = g.op("ReduceSum", product, g.const([0]), keepdims_i=0)
    if alpha != 1:
        product = g.op("Mul", product, g.const(alpha, product.dtype))
    base = self if beta == 1 else g.op("Mul", self, g.const(beta, self.dtype))
    return g.op("Add", base, product) if beta != 0 else product


@translates("aten::dot", "aten::vdot", "aten::mv")
def dot(g, self, other):
    """dot(Tensor self, Tensor tensor) -> Tensor"""
    return g.op("MatMul", self, other)


@translates("aten::inner")
def inner(g, self, other):
    """inner(Tensor self, Tensor other) -> Tensor"""
    a, b = rank(self), rank(other)
    if a == 0 or b == 0:
        return g.op("Mul", self, other)  # with a scalar, inner is the product
    if b == 1:
        return g.op("MatMul", self, other)
    # Contract the last axes of both: self [..., k] @ other [..., k] moved to [k, ...].
    moved = g.op("Transpose", other, perm_i=[b - 1] + list(range(b - 1)))
    flat = g.op("Reshape", moved, g.const([0, -1]))
    out = g.op("MatMul", self, flat)
    if b == 2:
        return out
    shape = g.op("Concat", _leading_shape(g, self), _leading_shape(g, other), axis_i=0)
    return g.op("Reshape", out, shape)


def _leading_shape(g, x):
    """The shape of ``x`` without its last axis."""
    if g.opset >= 15:
        return g.op("Shape", x, end_i=-1)
    return g.op("Slice", g.op("Shape", x), g.const([0]), g.const([-1]))


@translates("aten::_grouped_mm", "transformers::grouped_mm_fallback", since_opset=15)
def grouped_mm(g, self, mat2, offs=None, bias=None, out_dtype=None):
    """_grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None, ScalarType? out_dtype=None) -> Tensor

    A mixture of experts' product (transformers' grouped_mm experts): the rows of ``self``
    [S, K], sorted by expert, each times its expert's [K, N] of ``mat2`` [E, K, N]; expert i
    takes the rows from offs[i - 1] to offs[i]. Every row times every expert, then each row's
    own picked: E x S x N values, where gathering a [K, N] weight per row would hold
    S x K x N. Rows past the last offset are zeros (transformers' fallback leaves them so)."""
    if offs is None or rank(self) != 2 or rank(mat2) != 3:
        raise TranslationError(f"{g.provenance.aten}: only rows [S, K] grouped by offsets over "
                               "experts [E, K, N] are translated")
    experts = g.op("Shape", mat2, start_i=0, end_i=1)
    rows = g.op("Squeeze", g.op("Shape", self, start_i=0, end_i=1), g.const([0]))
    positions = g.op("Range", g.const(0, ir.DataType.INT64), rows, g.const(1, ir.DataType.INT64))
    ends = g.op("Cast", offs, to_i=int(ir.DataType.INT64))
    expert = count_at_or_below(g, ends, positions)  # (how many experts end at or before it)
    past_the_last = g.op("GreaterOrEqual", expert, experts)
    expert = g.op("Min", expert, g.op("Sub", experts, g.const([1])))
    products = g.op("MatMul", self, mat2)  # [E, S, N]
    index = g.op("Expand", g.op("Unsqueeze", expert, g.const([0, 2])),
                 g.op("Concat", g.const([1]), g.op("Shape", products, start_i=1), axis_i=0))
    picked = g.op("Squeeze", g.op("GatherElements", products, index, axis_i=0), g.const([0]))
    if bias is not None:
        picked = g.op("Add", picked, g.op("Gather", bias, expert, axis_i=0))
    zero = g.op("CastLike", g.const(0.0), picked)
    picked = g.op("Where", g.op("Unsqueeze", past_the_last, g.const([1])), zero, picked)
    dtype = expected_dtype(g)
    return picked if dtype is None else cast(g, picked, dtype)
