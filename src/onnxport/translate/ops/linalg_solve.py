"""Linear solves and the factorizations behind them (LU as LAPACK getrf, Cholesky as potrf,
triangular substitution), composed from ONNX ops: ONNX has no linalg ops, so the algorithms
are unrolled over the matrix size, which must be static (the batch dims may be dynamic).

Errors of singular or non-positive-definite inputs are not raised: torch raises them in eager
from the `info` of the factorization (aten::_linalg_check_errors), a data-dependent check that
an ONNX graph cannot make. `info` itself is computed as LAPACK does (the 1-based step whose
pivot was zero, or whose diagonal was not positive), so the _ex variants report it.

Pivots are LAPACK's: the first largest candidate, as i?amax takes it. Where two candidates tie
in exact arithmetic (small-integer matrices) and rounding breaks the tie, the tie may break
the other way than in torch's LAPACK, whose blocked kernels round in another order: LU and
pivots then differ from eager's (both valid factorizations); solves and inverses do not.
"""

from __future__ import annotations

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import rank, reduce, squeeze, unsqueeze
from onnxport.translate.registry import translates

# Each step of the unrolled algorithms is ~25 nodes and every step reads the whole matrix:
# past this size the graph is large and slow, and a custom translation is the better way.
MAX_UNROLLED_SIZE = 64


def _matrix_size(g, x: ir.Value, what: str = "A") -> tuple[int, int]:
    """The static (rows, columns) of a batch of matrices, or a clear error."""
    op = _described(g)
    dims = list(x.shape)[-2:] if x.shape is not None and len(x.shape) >= 2 else None
    if dims is None or not all(isinstance(d, int) for d in dims):
        shown = "unknown" if dims is None else " x ".join(str(d) for d in dims)
        raise TranslationError(
            f"{op}: the matrix dims of {what} ({shown}) must be static, since ONNX has no linear "
            "algebra ops and the factorization is unrolled over them (the batch dims may be "
            "dynamic). Export with static matrix dims (leave them out of dynamic_shapes) or "
            "register a custom translation for the op.")
    if max(dims) > MAX_UNROLLED_SIZE:
        raise TranslationError(
            f"{op}: {what} is {dims[0]}x{dims[1]}; onnxport unrolls linalg factorizations into "
            f"plain ONNX ops only up to {MAX_UNROLLED_SIZE}x{MAX_UNROLLED_SIZE}. Register a "
            "custom translation (e.g. to an ONNX Runtime contrib op) or move the solve out of "
            "the exported model.")
    return dims[0], dims[1]


def _described(g) -> str:
    """The op being translated, what it was decomposed from, and the user's line."""
    p = g.provenance
    text = p.aten or "a linalg op"
    if p.decomposed_from:
        text += f" (from {p.decomposed_from})"
    return text + (f" at {p.source}" if p.source else "")


# -- small pieces ---------------------------------------------------------------------------
def _slice(g, x, starts, ends, axes):
    return g.op("Slice", x, g.const(list(starts)), g.const(list(ends)), g.const(list(axes)))


def _rows(g, x, start, end):
    return _slice(g, x, [start], [end], [-2])


def _columns(g, x, start, end):
    return _slice(g, x, [start], [end], [-1])


def _transpose(g, x, rank_: int | None = None):
    """Swap the last two axes (of a value of rank rank_ when its shape is not recorded)."""
    n = rank(x) if rank_ is None else rank_
    swapped = g.op("Transpose", x, perm_i=list(range(n - 2)) + [n - 1, n - 2])
    if x.shape is None:
        return swapped
    dims = list(x.shape)
    return _shaped(swapped, dims[:-2] + [dims[-1], dims[-2]])


def _shaped(value, dims):
    """value with its shape recorded: the helpers read the matrix dims (and rank) of what
    they are given, intermediate values included."""
    value.shape = ir.Shape([d if isinstance(d, int) else ir.SymbolicDim(None) for d in dims])
    return value


def _batch_shape(g, x):
    if g.opset >= 15:
        return g.op("Shape", x, end_i=-2)
    return _slice(g, g.op("Shape", x), [0], [-2], [0])


def _mask(g, rows: int, columns: int, predicate) -> ir.Value:
    """A constant bool [rows, columns] mask, True where predicate(row, column)."""
    return g.const(torch.tensor([[bool(predicate(i, j)) for j in range(columns)]
                                 for i in range(rows)], dtype=torch.bool).reshape(rows, columns))


def _zeros_like_batch(g, x, trailing: list[int], dtype: ir.DataType) -> ir.Value:
    """Zeros of shape batch(x) + trailing."""
    shape = g.op("Concat", _batch_shape(g, x), g.const(trailing), axis_i=0)
    return g.op("ConstantOfShape", shape,
                value=ir.tensor(torch.zeros(1, dtype=_torch_dtype(dtype))))


def _torch_dtype(dtype: ir.DataType) -> torch.dtype:
    from onnxport.translate.builder import to_torch_dtype

    return to_torch_dtype(dtype)


def _empty(g, dtype: ir.DataType) -> ir.Value:
    """torch's at::empty({0}), what the not-computed outputs of lu_unpack are."""
    return g.const(torch.zeros(0, dtype=_torch_dtype(dtype)))


def _broadcast_batch(g, x, other):
    """x expanded to the batch dims it broadcasts to with other's (matrix dims kept)."""
    if rank(other) <= 2:
        return x
    shape = g.op("Concat", _batch_shape(g, other), g.const([1, 1]), axis_i=0)
    dims = list(x.shape)
    return _shaped(g.op("Expand", x, shape),
                   [None] * (max(len(dims), rank(other)) - 2) + dims[-2:])


def _first_flag(g, flags: list[ir.Value], like: ir.Value) -> ir.Value:
    """LAPACK's info: the 1-based index of the first True of flags ([..., 1, 1] each), else 0;
    int32 with the batch dims of ``like``."""
    info = _zeros_like_batch(g, like, [1, 1], ir.DataType.INT32)
    for step in reversed(range(len(flags))):
        info = g.op("Where", flags[step], g.const(step + 1, ir.DataType.INT32), info)
    return squeeze(g, info, [-2, -1])


def _swap_rows(g, x, k: int, is_pivot: ir.Value, is_k: ir.Value):
    """Rows k and p of x [..., m, c] exchanged (p one-hot in is_pivot [..., m, 1]), with Where
    so that the values move exactly."""
    zero = g.const(0, x.dtype) if x.dtype == ir.DataType.INT64 else g.const(0.0, x.dtype)
    row_p = reduce(g, "ReduceSum", g.op("Where", is_pivot, x, zero), [-2], True)
    row_k = _rows(g, x, k, k + 1)
    return g.op("Where", is_k, row_p, g.op("Where", is_pivot, row_k, x))


# -- LU (getrf) -----------------------------------------------------------------------------
def _lu(g, A, pivot: bool = True):
    """Right-looking LU with partial pivoting, pivot = first max |a| of the column as in
    LAPACK's i?amax. Returns (LU [..., m, n], perm [..., m] int64 (the row of A at each row of
    LU), pivots [..., min(m, n)] int32 (1-based, LAPACK's ipiv), info [...] int32)."""
    m, n = _matrix_size(g, A)
    shape = list(A.shape)
    steps = min(m, n)
    dtype = A.dtype
    arange = g.const(torch.arange(m).reshape(m, 1))
    order = g.const(torch.arange(m).reshape(m, 1))
    zero = g.const(0.0, dtype)
    pivots, flags = [], []
    for k in range(steps):
        is_k = _mask(g, m, 1, lambda i, _: i == k)
        if pivot:
            column = _slice(g, A, [k, k], [m, k + 1], [-2, -1])
            p = g.op("Add", g.op("ArgMax", g.op("Abs", column), axis_i=-2, keepdims_i=1),
                     g.const(k))
            is_pivot = g.op("Equal", arange, p)
            A = _swap_rows(g, A, k, is_pivot, is_k)
            order = _swap_rows(g, order, k, is_pivot, is_k)
            pivots.append(p)
        diagonal = _slice(g, A, [k, k], [k + 1, k + 1], [-2, -1])
        singular = g.op("Equal", diagonal, zero)
        flags.append(singular)
        column = _columns(g, A, k, k + 1)
        # A zero pivot leaves the column unscaled (getf2/getrf2 skip the scaling; under
        # partial pivoting the column below is all zeros then).
        multipliers = g.op("Where", singular, column, g.op("Div", column, diagonal))
        if k + 1 < m and k + 1 < n:
            update = g.op("Sub", A, g.op("Mul", multipliers, _rows(g, A, k, k + 1)))
            # Where, not a masked product: 0 * inf elsewhere would make NaNs.
            A = g.op("Where", _mask(g, m, n, lambda i, j: i > k and j > k), update, A)
        if k + 1 < m:
            A = g.op("Where", _mask(g, m, n, lambda i, j: i > k and j == k), multipliers, A)
    A = _shaped(g.op("Identity", A) if steps == 0 else A, shape)
    # Swapped, the order has A's batch dims already; else it is still the constant arange.
    order = _shaped(order, shape[:-2] + [m, 1]) if pivots else _broadcast_batch(g, order, A)
    perm = _shaped(squeeze(g, order, [-1]), shape[:-1])
    if pivots:
        ipiv = g.op("Add", squeeze(g, g.op("Concat", *pivots, axis_i=-1), [-2]), g.const(1))
        ipiv = g.op("Cast", ipiv, to_i=int(ir.DataType.INT32))
    elif not pivot and steps:
        ipiv = g.op("Expand", g.const(torch.arange(1, steps + 1, dtype=torch.int32)),
                    g.op("Concat", _batch_shape(g, A), g.const([1]), axis_i=0))
    else:
        ipiv = squeeze(g, _zeros_like_batch(g, A, [1, 0], ir.DataType.INT32), [-2])
    return A, perm, ipiv, _first_flag(g, flags, A)


def _permutation_matrix(g, perm, m: int, dtype: ir.DataType):
    """P with A = P @ (A's rows in perm's order): P[..., r, c] = (perm[..., c] == r)."""
    arange = g.const(torch.arange(m).reshape(m, 1))
    P = g.op("Cast", g.op("Equal", unsqueeze(g, perm, [-2]), arange), to_i=int(dtype))
    return _shaped(P, list(perm.shape)[:-1] + [m, m])


def _perm_from_pivots(g, pivots, m: int):
    """The row order (int64 [..., m]) that LAPACK's ipiv swaps produce, applied in turn."""
    steps = pivots.shape[-1] if pivots.shape is not None else None
    if not isinstance(steps, int):
        raise TranslationError(f"{_described(g)}: the pivots' last dim must be static, as the "
                               "matrix dims are (the interchanges are unrolled)")
    targets = g.op("Sub", g.op("Cast", pivots, to_i=int(ir.DataType.INT64)), g.const(1))
    arange = g.const(torch.arange(m).reshape(m, 1))
    order = g.const(torch.arange(m).reshape(m, 1))
    for k in range(steps):
        p = unsqueeze(g, _slice(g, targets, [k], [k + 1], [-1]), [-1])
        order = _swap_rows(g, order, k, g.op("Equal", arange, p),
                           _mask(g, m, 1, lambda i, _: i == k))
    batch = g.op("Shape", pivots, end_i=-1) if g.opset >= 15 else _slice(
        g, g.op("Shape", pivots), [0], [-1], [0])
    order = g.op("Expand", order, g.op("Concat", batch, g.const([1, 1]), axis_i=0))
    return _shaped(squeeze(g, order, [-1]), list(pivots.shape)[:-1] + [m])


# -- triangular solves ----------------------------------------------------------------------
def _solve_triangular(g, A, B, upper: bool, unit: bool = False):
    """X with A X = B by substitution, reading only A's upper or lower triangle (and not its
    diagonal when unit). A [..., n, n], B [..., n, k]; batch dims broadcast."""
    n, _ = _matrix_size(g, A)
    if rank(A) > 2:
        B = _broadcast_batch(g, B, A)
    order = list(reversed(range(n))) if upper else list(range(n))
    rows: dict[int, ir.Value] = {}
    for i in order:
        b = _rows(g, B, i, i + 1)
        known = sorted(rows)
        if known:
            lo, hi = known[0], known[-1] + 1
            coefficients = _slice(g, A, [i, lo], [i + 1, hi], [-2, -1])
            solved = g.op("Concat", *(rows[j] for j in range(lo, hi)), axis_i=-2) \
                if hi - lo > 1 else rows[lo]
            b = g.op("Sub", b, g.op("MatMul", coefficients, solved))
        if not unit:
            b = g.op("Div", b, _slice(g, A, [i, i], [i + 1, i + 1], [-2, -1]))
        rows[i] = b
    shape = [None] * (max(rank(A), rank(B)) - 2) + [n, B.shape[-1]]
    if n == 0:
        return _shaped(g.op("Identity", B), shape)
    return _shaped(g.op("Concat", *(rows[i] for i in range(n)), axis_i=-2) if n > 1
                   else rows[0], shape)


def _solve_with_lu(g, LU, perm, B, adjoint: bool = False):
    """X with A X = B (or A^T X = B) from A = P L U (perm: LU's row order of A)."""
    n, _ = _matrix_size(g, LU)
    P = _permutation_matrix(g, perm, n, B.dtype)
    if adjoint:
        # A^T = U^T L^T P^T: U^T y = B, L^T z = y, X = P z.
        y = _solve_triangular(g, _transpose(g, LU), B, upper=False)
        z = _solve_triangular(g, _transpose(g, LU), y, upper=True, unit=True)
        return _shaped(g.op("MatMul", P, z), list(z.shape))
    # The permutation matrix's product only moves values (one 1 per row).
    rows = _shaped(g.op("MatMul", _transpose(g, P), B),
                   [None] * (max(rank(LU), rank(B)) - 2) + [n, B.shape[-1]])
    return _solve_triangular(g, LU, _solve_triangular(g, LU, rows, upper=False, unit=True),
                             upper=True)


def _is_vector_rhs(A, B) -> bool:
    """torch's linalg_solve_is_vector_rhs."""
    a, b = list(A.shape), list(B.shape)
    return len(b) == 1 or (len(b) == len(a) - 1 and b == a[:-1])


# -- Cholesky (potrf) -----------------------------------------------------------------------
def _cholesky(g, A):
    """Lower L with L L^T = A from A's lower triangle, column by column; info as potrf's
    (first column whose diagonal is not > 0)."""
    n, _ = _matrix_size(g, A)
    columns, flags = [], []
    zero = g.const(0.0, A.dtype)
    for j in range(n):
        c = _columns(g, A, j, j + 1)
        if columns:
            known = g.op("Concat", *columns, axis_i=-1) if len(columns) > 1 else columns[0]
            row = _transpose(g, _rows(g, known, j, j + 1), rank(A))
            c = g.op("Sub", c, g.op("MatMul", known, row))
        square = _rows(g, c, j, j + 1)
        flags.append(g.op("Not", g.op("Greater", square, zero)))
        diagonal = g.op("Sqrt", square)
        column = g.op("Where", _mask(g, n, 1, lambda i, _: i == j), diagonal,
                      g.op("Div", c, diagonal))
        columns.append(g.op("Where", _mask(g, n, 1, lambda i, _: i < j), zero, column))
    if n == 0:
        return _shaped(g.op("Identity", A), list(A.shape)), _first_flag(g, flags, A)
    L = g.op("Concat", *columns, axis_i=-1) if n > 1 else columns[0]
    return _shaped(L, list(A.shape)), _first_flag(g, flags, A)


# -- translations ---------------------------------------------------------------------------
@translates("aten::_linalg_check_errors", since_opset=13)
def linalg_check_errors(g, info, api_name, *, is_matrix):
    """_linalg_check_errors(Tensor info, str api_name, *, bool is_matrix) -> ()"""
    # torch raises here when info != 0 (a singular or not positive-definite input): a
    # data-dependent error an ONNX graph cannot raise; the results are then inf/NaN.
    return None


@translates("aten::linalg_lu_factor_ex", since_opset=13)
def linalg_lu_factor_ex(g, A, *, pivot=True, check_errors=False):
    """linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (Tensor LU, Tensor pivots, Tensor info)"""
    LU, _, pivots, info = _lu(g, A, pivot)
    return LU, pivots, info


@translates("aten::linalg_lu", since_opset=13)
def linalg_lu(g, A, *, pivot=True):
    """linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)"""
    m, n = _matrix_size(g, A)
    LU, perm, _, _ = _lu(g, A, pivot)
    L, U = _unpack_lu(g, LU, m, n)
    P = _permutation_matrix(g, perm, m, A.dtype) if pivot else _empty(g, A.dtype)
    return P, L, U


def _unpack_lu(g, LU, m: int, n: int):
    k = min(m, n)
    eye = g.const(torch.eye(m, k), LU.dtype)
    L = g.op("Where", _mask(g, m, k, lambda i, j: i > j), _columns(g, LU, 0, k), eye)
    U = g.op("Where", _mask(g, k, n, lambda i, j: i <= j), _rows(g, LU, 0, k),
             g.const(0.0, LU.dtype))
    return L, U


@translates("aten::lu_unpack", since_opset=13)
def lu_unpack(g, LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)"""
    m, n = _matrix_size(g, LU_data, "LU_data")
    if unpack_data:
        L, U = _unpack_lu(g, LU_data, m, n)
    else:
        L = U = _empty(g, LU_data.dtype)
    if unpack_pivots:
        P = _permutation_matrix(g, _perm_from_pivots(g, LU_pivots, m), m, LU_data.dtype)
    else:
        P = _empty(g, LU_data.dtype)
    return P, L, U


@translates("aten::linalg_lu_solve", since_opset=13)
def linalg_lu_solve(g, LU, pivots, B, *, left=True, adjoint=False):
    """linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor"""
    n, _ = _matrix_size(g, LU, "LU")
    perm = _perm_from_pivots(g, pivots, n)
    if left:
        return _solve_with_lu(g, LU, perm, B, adjoint)
    # X A = B is A^T X^T = B^T (X A^T = B is A X^T = B^T).
    return _transpose(g, _solve_with_lu(g, LU, perm, _transpose(g, B), not adjoint))


@translates("aten::lu_solve", since_opset=13)
def lu_solve(g, self, LU_data, LU_pivots):
    """lu_solve(Tensor self, Tensor LU_data, Tensor LU_pivots) -> Tensor"""
    return linalg_lu_solve(g, LU_data, LU_pivots, self)


@translates("aten::_linalg_solve_ex", since_opset=13)
def linalg_solve_ex(g, A, B, *, left=True, check_errors=False):
    """_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor result, Tensor LU, Tensor pivots, Tensor info)"""
    LU, perm, pivots, info = _lu(g, A)
    vector = left and _is_vector_rhs(A, B)
    rhs = _shaped(unsqueeze(g, B, [-1]), list(B.shape) + [1]) if vector else B
    if left:
        result = _solve_with_lu(g, LU, perm, rhs)
    else:
        # torch factors A (not A^T) for left=False too, and solves A^T X^T = B^T with it.
        result = _transpose(g, _solve_with_lu(g, LU, perm, _transpose(g, rhs), adjoint=True))
    if vector:
        result = squeeze(g, result, [-1])
    return result, LU, pivots, info


@translates("aten::linalg_inv_ex", since_opset=13)
def linalg_inv_ex(g, A, *, check_errors=False):
    """linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)"""
    n, _ = _matrix_size(g, A)
    LU, perm, _, info = _lu(g, A)
    # P^T @ I is the permutation matrix itself: the two triangular solves are all that is left.
    rows = _transpose(g, _permutation_matrix(g, perm, n, A.dtype))
    lower = _solve_triangular(g, LU, rows, upper=False, unit=True)
    return _solve_triangular(g, LU, lower, upper=True), info


@translates("aten::linalg_solve_triangular", since_opset=13)
def linalg_solve_triangular(g, A, B, *, upper, left=True, unitriangular=False):
    """linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> Tensor"""
    if left:
        return _solve_triangular(g, A, B, upper, unitriangular)
    return _transpose(g, _solve_triangular(g, _transpose(g, A), _transpose(g, B), not upper,
                                           unitriangular))


@translates("aten::triangular_solve", since_opset=13)
def triangular_solve(g, self, A, upper=True, transpose=False, unitriangular=False):
    """triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)"""
    coefficients = _transpose(g, A) if transpose else A
    solution = _solve_triangular(g, coefficients, self, upper != transpose, unitriangular)
    return solution, g.op("Identity", _broadcast_batch(g, A, self))


@translates("aten::linalg_cholesky_ex", since_opset=13)
def linalg_cholesky_ex(g, A, *, upper=False, check_errors=False):
    """linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)"""
    if upper:
        # U = L^T of the factor of A^T, whose lower triangle is A's upper one.
        L, info = _cholesky(g, _transpose(g, A))
        return _transpose(g, L), info
    return _cholesky(g, A)


@translates("aten::cholesky", since_opset=13)
def cholesky(g, self, upper=False):
    """cholesky(Tensor self, bool upper=False) -> Tensor"""
    # The deprecated torch.cholesky, which torch 2.11 still has and keeps whole (torch 2.14
    # removed it): linalg_cholesky_ex's factor.
    return linalg_cholesky_ex(g, self, upper=upper)[0]


def _lower_factor(g, factor, upper: bool):
    return _transpose(g, factor) if upper else factor


@translates("aten::cholesky_solve", since_opset=13)
def cholesky_solve(g, self, input2, upper=False):
    """cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor"""
    L = _lower_factor(g, input2, upper)
    y = _solve_triangular(g, L, self, upper=False)
    return _solve_triangular(g, _transpose(g, L), y, upper=True)


@translates("aten::cholesky_inverse", since_opset=13)
def cholesky_inverse(g, self, upper=False):
    """cholesky_inverse(Tensor self, bool upper=False) -> Tensor"""
    n, _ = _matrix_size(g, self)
    identity = g.const(torch.eye(n), self.dtype)
    L = _lower_factor(g, self, upper)
    y = _solve_triangular(g, L, identity, upper=False)
    return _solve_triangular(g, _transpose(g, L), y, upper=True)


# -- LDL^T with Bunch-Kaufman pivoting (sytrf, lower) ----------------------------------------
# Whether a step takes a 1x1 or a 2x2 pivot depends on the data, so each column is a step that
# computes both updates and keeps the one LAPACK's dsytf2 takes (and does nothing when it is
# the second column of a 2x2 block).
_BUNCH_KAUFMAN_ALPHA = (1 + 17 ** 0.5) / 8


def _gather_row(g, x, is_row):
    """Row r of x [..., n, c] (is_row [..., n, 1] one-hot): [..., 1, c], values moved exactly."""
    return reduce(g, "ReduceSum", g.op("Where", is_row, x, g.const(0.0, x.dtype)), [-2], True)


def _gather_column(g, x, is_column):
    return reduce(g, "ReduceSum", g.op("Where", is_column, x, g.const(0.0, x.dtype)), [-1], True)


def _symmetric_swap(g, S, a, b, first: int, n: int):
    """Rows and columns a and b ([..., 1, 1] indices) of S's trailing block S[first:, first:]
    exchanged, as dsytf2's interchange; the columns before ``first`` (L so far) stay."""
    rows, columns = g.const(torch.arange(n).reshape(n, 1)), g.const(torch.arange(n).reshape(1, n))
    in_columns = _mask(g, 1, n, lambda _, j: j >= first)
    in_rows = _mask(g, n, 1, lambda i, _: i >= first)
    row_a, row_b = g.op("Equal", rows, a), g.op("Equal", rows, b)
    S = g.op("Where", g.op("And", row_a, in_columns), _gather_row(g, S, row_b),
             g.op("Where", g.op("And", row_b, in_columns), _gather_row(g, S, row_a), S))
    column_a, column_b = g.op("Equal", columns, a), g.op("Equal", columns, b)
    return g.op("Where", g.op("And", column_a, in_rows), _gather_column(g, S, column_b),
                g.op("Where", g.op("And", column_b, in_rows), _gather_column(g, S, column_a), S))


class _Sytf2:
    """LAPACK's dsytf2 (Bunch-Kaufman LDL^T of the lower triangle), one column at a time, on
    the builder: the pieces of each step."""

    def __init__(self, g, A):
        self.g, self.n, self.rank, self.dtype = g, _matrix_size(g, A)[0], rank(A), A.dtype
        self.lower = _mask(g, self.n, self.n, lambda i, j: i >= j)

    def symmetrized(self, x):
        return self.g.op("Where", self.lower, x, _transpose(self.g, x, self.rank))

    def element(self, x, i, j):
        return _slice(self.g, x, [i, j], [i + 1, j + 1], [-2, -1])

    def scalar(self, value):
        return self.g.const(value, self.dtype)

    def pivot(self, S, j, active, rows, columns):
        """Column j's choice: (zero column, kept in place, a 2x2 block, kp the row swapped in,
        kk the last column of the block)."""
        g, n, scalar = self.g, self.n, self.scalar
        diagonal = g.op("Abs", self.element(S, j, j))
        below = g.op("Abs", _slice(g, S, [j + 1, j], [n, j + 1], [-2, -1]))
        imax = g.op("Add", g.op("ArgMax", below, axis_i=-2, keepdims_i=1), g.const(j + 1))
        colmax = reduce(g, "ReduceMax", below, [-2], True)
        zero = g.op("Equal", g.op("Max", diagonal, colmax), scalar(0.0))
        is_imax = g.op("Equal", rows, imax)
        row_imax = g.op("Abs", _gather_row(g, S, is_imax))
        off_diagonal = g.op("And", _mask(g, 1, n, lambda _, c: c >= j),
                            g.op("Not", g.op("Equal", columns, imax)))
        rowmax = reduce(g, "ReduceMax", g.op("Where", off_diagonal, row_imax, scalar(0.0)),
                        [-1], True)
        at_imax = _gather_column(g, row_imax, g.op("Equal", columns, imax))
        alpha_colmax = g.op("Mul", scalar(_BUNCH_KAUFMAN_ALPHA), colmax)
        keep = g.op("Or", zero, g.op("Or", g.op("GreaterOrEqual", diagonal, alpha_colmax),
                                     g.op("GreaterOrEqual", diagonal, g.op(
                                         "Mul", alpha_colmax, g.op("Div", colmax, rowmax)))))
        one_by_one = g.op("GreaterOrEqual", at_imax,
                          g.op("Mul", scalar(_BUNCH_KAUFMAN_ALPHA), rowmax))
        two = g.op("Not", g.op("Or", keep, one_by_one))
        if active is not None:
            two = g.op("And", two, active)
        kk = g.op("Add", g.const(j), g.op("Cast", two, to_i=int(ir.DataType.INT64)))
        kp = g.op("Where", keep, g.const(j), imax)
        if active is not None:
            kp = g.op("Where", active, kp, kk)
        return zero, two, kp, kk

    def one_by_one(self, S2, j):
        """A 1x1 pivot: dsyr with -1/d, then the column scaled by 1/d."""
        g, n = self.g, self.n
        reciprocal = g.op("Div", self.scalar(1.0), self.element(S2, j, j))
        column = _columns(g, S2, j, j + 1)
        row = g.op("Mul", g.op("Neg", reciprocal), _rows(g, S2, j, j + 1))
        updated = g.op("Add", S2, g.op("Mul", column, row))
        one = g.op("Where", _mask(g, n, n, lambda i, c: i > j and c > j), updated, S2)
        return g.op("Where", _mask(g, n, n, lambda i, c: i > j and c == j),
                    g.op("Mul", column, reciprocal), self.symmetrized(one))

    def two_by_two(self, S2, j):
        """A 2x2 pivot, dsytf2's loop with its order of operations."""
        g, n, rank_, element = self.g, self.n, self.rank, self.element
        d21 = element(S2, j + 1, j)
        d11 = g.op("Div", element(S2, j + 1, j + 1), d21)
        d22 = g.op("Div", element(S2, j, j), d21)
        t = g.op("Div", self.scalar(1.0), g.op("Sub", g.op("Mul", d11, d22), self.scalar(1.0)))
        d21 = g.op("Div", t, d21)
        x0, x1 = _columns(g, S2, j, j + 1), _columns(g, S2, j + 1, j + 2)
        wk = g.op("Mul", d21, g.op("Sub", g.op("Mul", d11, x0), x1))
        wkp1 = g.op("Mul", d21, g.op("Sub", g.op("Mul", d22, x1), x0))
        product = g.op("Add", g.op("Mul", x0, _transpose(g, wk, rank_)),
                       g.op("Mul", x1, _transpose(g, wkp1, rank_)))
        trailing = _mask(g, n, n, lambda i, c: i >= j + 2 and c >= j + 2)
        block = self.symmetrized(g.op("Where", trailing, g.op("Sub", S2, product), S2))
        return g.op("Where", _mask(g, n, n, lambda i, c: i >= j + 2 and c == j), wk,
                    g.op("Where", _mask(g, n, n, lambda i, c: i >= j + 2 and c == j + 1),
                         wkp1, block))


def _ldl(g, A):
    """(LD [..., n, n] as sytrf's lower output, pivots int32 [..., n] (LAPACK's ipiv), info)."""
    steps = _Sytf2(g, A)
    n, shape = steps.n, list(A.shape)
    # The lower triangle mirrored: the trailing block is kept symmetric, bit for bit, so that a
    # row read sees what sytrf reads from its column.
    S = g.op("Where", steps.lower, A, _transpose(g, A))
    rows = g.const(torch.arange(n).reshape(n, 1))
    columns = g.const(torch.arange(n).reshape(1, n))
    skip = None  # [..., 1, 1]: this column is the second of a 2x2 block
    previous = None  # the ipiv of the last step, repeated by the second column of a 2x2 block
    pivots, flags = [], []
    for j in range(n):
        active = g.op("Not", skip) if skip is not None else None
        if j == n - 1:
            diagonal = g.op("Abs", steps.element(S, j, j))
            zero = g.op("Equal", diagonal, steps.scalar(0.0))
            flags.append(g.op("And", zero, active) if active is not None else zero)
            ipiv = g.const(torch.full((1, 1), j + 1, dtype=torch.int64))
            pivots.append(ipiv if skip is None else g.op("Where", skip, previous, ipiv))
            break
        zero, two, kp, kk = steps.pivot(S, j, active, rows, columns)
        S2 = _symmetric_swap(g, S, kk, kp, j, n)
        one = steps.one_by_one(S2, j)
        one_step = g.op("Not", g.op("Or", two, zero))
        if active is not None:
            one_step = g.op("And", one_step, active)
        result = g.op("Where", one_step, one, S2)
        if j < n - 2:
            result = g.op("Where", two, steps.two_by_two(S2, j), result)
        S = result
        ipiv = g.op("Add", kp, g.const(1))
        ipiv = g.op("Where", two, g.op("Neg", ipiv), ipiv)
        if skip is not None:
            ipiv = g.op("Where", skip, previous, ipiv)
        pivots.append(ipiv)
        flags.append(g.op("And", zero, active) if active is not None else zero)
        previous, skip = ipiv, two
    if n == 0:
        LD = g.op("Identity", A)
        ipiv = squeeze(g, _zeros_like_batch(g, A, [1, 0], ir.DataType.INT32), [-2])
    else:
        LD = g.op("Where", steps.lower, S, steps.scalar(0.0))
        ipiv = squeeze(g, g.op("Concat", *pivots, axis_i=-1) if n > 1 else pivots[0], [-2])
        # The constant ipiv of a 1x1 matrix has no batch dims yet.
        ipiv = g.op("Expand", ipiv, g.op("Concat", _batch_shape(g, A), g.const([1]), axis_i=0))
        ipiv = g.op("Cast", ipiv, to_i=int(ir.DataType.INT32))
    return _shaped(LD, shape), ipiv, _first_flag(g, flags, A)


@translates("aten::linalg_ldl_factor_ex", since_opset=13)
def linalg_ldl_factor_ex(g, self, *, hermitian=False, check_errors=False):
    """linalg_ldl_factor_ex(Tensor self, *, bool hermitian=False, bool check_errors=False) -> (Tensor LD, Tensor pivots, Tensor info)"""
    # hermitian only matters for complex inputs (hetrf), which are not exported.
    return _ldl(g, self)


@translates("aten::linalg_ldl_factor", since_opset=13)
def linalg_ldl_factor(g, self, *, hermitian=False):
    """linalg_ldl_factor(Tensor self, *, bool hermitian=False) -> (Tensor LD, Tensor pivots)"""
    LD, pivots, _ = _ldl(g, self)
    return LD, pivots


class _Sytrs:
    """LAPACK's dsytrs (lower): L D L^T X = P B from sytrf's LD and pivots, on the builder."""

    def __init__(self, g, LD):
        self.g, self.LD, self.n = g, LD, _matrix_size(g, LD, "LD")[0]
        self.rows = g.const(torch.arange(self.n).reshape(self.n, 1))

    def element(self, i, j):
        return _slice(self.g, self.LD, [i, j], [i + 1, j + 1], [-2, -1])

    def row_of(self, i):
        return _mask(self.g, self.n, 1, lambda r, _: r == i)

    def swap(self, x, i: int, target):
        return _swap_rows(self.g, x, i, self.g.op("Equal", self.rows, target), self.row_of(i))

    def dot_below(self, x, column: int, below: int):
        """LD[below:, column]^T @ x[below:]: [..., 1, k]."""
        g, LD = self.g, self.LD
        coefficients = _slice(g, LD, [below, column], [self.n, column + 1], [-2, -1])
        return g.op("MatMul", _transpose(g, coefficients, rank(LD)), _rows(g, x, below, self.n))

    def blocks(self, ipiv):
        """Per column: the row it swaps with, whether it opens a 2x2 block, whether it closes
        one (the pivots' signs), whether it is a 1x1 block."""
        g, n = self.g, self.n
        negative = [g.op("Less", _slice(g, ipiv, [j], [j + 1], [-2]), g.const(0))
                    for j in range(n)]
        target = [g.op("Sub", g.op("Where", negative[j], g.op(
            "Neg", _slice(g, ipiv, [j], [j + 1], [-2])), _slice(g, ipiv, [j], [j + 1], [-2])),
                       g.const(1)) for j in range(n)]
        first, second = [], [None]
        for j in range(n):
            opens = negative[j] if second[j] is None else g.op("And", negative[j],
                                                               g.op("Not", second[j]))
            first.append(opens)
            second.append(opens)
        one = [g.op("Not", negative[j]) for j in range(n)]
        return target, first, second, one

    def forward_single(self, X, j, target):
        """Column j of L D y = P B as a 1x1 block."""
        g, LD = self.g, self.LD
        below = _mask(g, self.n, 1, lambda r, _: r > j)
        swapped = self.swap(X, j, target)
        row = _rows(g, swapped, j, j + 1)
        eliminated = g.op("Where", below, g.op("Sub", swapped, g.op(
            "Mul", _columns(g, LD, j, j + 1), row)), swapped)
        return g.op("Where", self.row_of(j), g.op("Div", row, self.element(j, j)), eliminated)

    def forward_block(self, X, j, target):
        """Columns j and j + 1 of L D y = P B as a 2x2 block."""
        g, LD, element = self.g, self.LD, self.element
        swapped = self.swap(X, j + 1, target)
        if j + 2 < self.n:
            below2 = _mask(g, self.n, 1, lambda r, _: r > j + 1)
            step = g.op("Sub", swapped, g.op("Mul", _columns(g, LD, j, j + 1),
                                             _rows(g, swapped, j, j + 1)))
            step = g.op("Sub", step, g.op("Mul", _columns(g, LD, j + 1, j + 2),
                                          _rows(g, swapped, j + 1, j + 2)))
            swapped = g.op("Where", below2, step, swapped)
        akm1k = element(j + 1, j)
        akm1 = g.op("Div", element(j, j), akm1k)
        ak = g.op("Div", element(j + 1, j + 1), akm1k)
        denominator = g.op("Sub", g.op("Mul", akm1, ak), g.const(1.0, LD.dtype))
        bkm1 = g.op("Div", _rows(g, swapped, j, j + 1), akm1k)
        bk = g.op("Div", _rows(g, swapped, j + 1, j + 2), akm1k)
        new_j = g.op("Div", g.op("Sub", g.op("Mul", ak, bkm1), bk), denominator)
        new_j1 = g.op("Div", g.op("Sub", g.op("Mul", akm1, bk), bkm1), denominator)
        return g.op("Where", self.row_of(j), new_j,
                    g.op("Where", self.row_of(j + 1), new_j1, swapped))

    def backward(self, X, j, target, one, second):
        """Column j of L^T x = y, then the interchanges undone."""
        g, n, row_of, swap = self.g, self.n, self.row_of, self.swap
        if j + 1 < n:
            reduced = g.op("Where", row_of(j), g.op("Sub", _rows(g, X, j, j + 1),
                                                    self.dot_below(X, j, j + 1)), X)
        else:
            reduced = X
        result = g.op("Where", one, swap(reduced, j, target), X)
        if j >= 1 and j + 1 < n:
            closing = g.op("Where", row_of(j - 1), g.op("Sub", _rows(g, X, j - 1, j),
                                                        self.dot_below(X, j - 1, j + 1)),
                           reduced)
            result = g.op("Where", second, swap(closing, j, target), result)
        elif j >= 1:
            result = g.op("Where", second, swap(reduced, j, target), result)
        return result


@translates("aten::linalg_ldl_solve", since_opset=13)
def linalg_ldl_solve(g, LD, pivots, B, *, hermitian=False):
    """linalg_ldl_solve(Tensor LD, Tensor pivots, Tensor B, *, bool hermitian=False) -> Tensor"""
    # sytrs (lower): L D L^T X = P B, the pivots' signs telling 1x1 from 2x2 blocks of D.
    sytrs = _Sytrs(g, LD)
    n = sytrs.n
    rank_ = max(rank(LD), rank(B))
    if rank(LD) > 2:
        B = _broadcast_batch(g, B, LD)
    ipiv = unsqueeze(g, g.op("Cast", pivots, to_i=int(ir.DataType.INT64)), [-1])
    target, first, second, one = sytrs.blocks(ipiv)
    X = B
    for j in range(n):  # L D y = P B
        result = g.op("Where", one[j], sytrs.forward_single(X, j, target[j]), X)
        if j + 1 < n:
            result = g.op("Where", first[j], sytrs.forward_block(X, j, target[j]), result)
        X = result
    for j in reversed(range(n)):  # L^T x = y, then the interchanges undone
        X = sytrs.backward(X, j, target[j], one[j], second[j])
    return _shaped(g.op("Identity", X) if n == 0 else X,
                   [None] * (rank_ - 2) + [n, B.shape[-1]])
