"""Matrix decompositions ONNX has no op for (QR, Householder products, the matrix exponential,
eigen- and singular values, pseudo-inverses), composed from ONNX ops for static matrix sizes.

Each is unrolled over the static matrix size with the builder (batch axes may stay dynamic)
and computed in float64 whatever the input dtype, so that the result is closer to exact than
LAPACK's float32 and matches it within float32 tolerance. Only results that are unique are
returned: singular and eigenvectors (unique up to sign, which LAPACK chooses by its own
rounding) are refused with an error saying so.
"""

from __future__ import annotations

import itertools

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import cast, reduce
from onnxport.translate.registry import translates

DOUBLE = ir.DataType.DOUBLE
# A decomposition of an n x n matrix unrolls O(n) (QR) or O(n^2) (a Jacobi sweep) steps into
# the graph; past this size the graph would be huge and slow to build.
MAX_SIZE = 32
# A QR step is a few nodes (one reflector), so QR unrolls further than a Jacobi sweep.
MAX_QR_SIZE = 64
# Jacobi sweeps converge quadratically: a few sweeps reach float64 round-off for n <= 32. The
# loop stops as soon as the off-diagonal part is negligible, this is only its upper bound.
MAX_SWEEPS = 40
_JACOBI_TOLERANCE = 1e-13


def _matrix_size(g, A, op: str, position: int = 0, unrolled=min, limit: int = MAX_SIZE
                 ) -> tuple[int, int]:
    """The static (rows, columns) of the matrix argument ``A``, or a clear error.
    ``unrolled(rows, columns)`` is the number of steps the graph unrolls (None: no limit)."""
    fake = g.arguments[position] if len(g.arguments) > position else None
    shape = list(fake.shape) if isinstance(fake, torch.Tensor) else (
        list(A.shape) if A.shape is not None else None)
    if shape is None or len(shape) < 2:
        raise TranslationError(f"{op}: the input must be a batch of matrices of known rank")
    rows, columns = shape[-2], shape[-1]
    if not isinstance(rows, int) or not isinstance(columns, int):
        raise TranslationError(
            f"{op}: ONNX has no linear-algebra decompositions, so onnxport unrolls {op} over the "
            f"matrix size, which must be static; its last two axes are ({rows}, {columns}). "
            "Export with static matrix sizes (batch axes may stay dynamic), or register a "
            "custom translation")
    if unrolled is not None and unrolled(rows, columns) > limit:
        raise TranslationError(
            f"{op}: onnxport unrolls {op} over the matrix size, up to {limit} steps; this "
            f"matrix is {rows} x {columns}. Register a custom translation for larger matrices")
    return rows, columns


def _batch_shape(g, A):
    shape = g.op("Shape", A)
    return g.op("Slice", shape, g.const([0]), g.const([-2]))


def _filled(g, A, trailing: list[int], dtype: ir.DataType, value: float = 0.0):
    """A tensor of ``A``'s batch shape + ``trailing``, filled with ``value``."""
    shape = g.op("Concat", _batch_shape(g, A), g.const(trailing), axis_i=0)
    return g.op("ConstantOfShape", shape,
                value_t=ir.tensor(torch.tensor([value], dtype=_torch_dtype(dtype))))


def _torch_dtype(dtype: ir.DataType) -> torch.dtype:
    from onnx_ir.tensor_adapters import to_torch_dtype

    return to_torch_dtype(dtype)


def _eye(g, rows: int, columns: int | None = None):
    return g.const(torch.eye(rows, columns if columns is not None else rows,
                             dtype=torch.float64), DOUBLE)


def _column(g, A, j: int):
    """Column ``j`` of a batch of matrices, as [..., m, 1]."""
    return g.op("Slice", A, g.const([j]), g.const([j + 1]), g.const([-1]))


def _entry(g, A, i: int, j: int):
    """Entry (i, j) of a batch of matrices, as [..., 1, 1]."""
    return g.op("Slice", A, g.const([i, j]), g.const([i + 1, j + 1]), g.const([-2, -1]))


def _transpose(g, A):
    """The transpose of the last two axes (Transpose needs the rank: ``A``'s is known)."""
    rank = len(A.shape) if A.shape is not None else None
    if rank is None:
        raise TranslationError(f"the rank of {A.name} is unknown")
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    out = g.op("Transpose", A, perm_i=perm)
    out.shape = ir.Shape([A.shape[i] for i in perm])
    return out


def _with_rank(value, rank: int):
    if value.shape is None:
        value.shape = ir.Shape([None] * rank)
    return value


def _sum_last(g, x, axis: int = -2):
    return g.op("ReduceSum", x, g.const([axis]), keepdims_i=1)


def _to_double(g, A, rank: int):
    return _with_rank(cast(g, A, DOUBLE), rank)


def _result_rank(g, position: int = 0) -> int:
    fake = g.arguments[position]
    return fake.dim()


# -- Householder reflections (LAPACK's geqrf, orgqr, ormqr) ---------------------------------------
def _householder_qr(g, A, rows: int, columns: int, dtype: ir.DataType):
    """LAPACK geqr2 on a float64 batch: (the reflectors below R's diagonal and R above, tau,
    whether each matrix's factorization is undetermined [..., 1, 1]).

    Column k's reflector is LAPACK's dlarfg: beta = -sign(alpha) * norm, tau = (beta - alpha)
    / beta, v = x / (alpha - beta), which gives the same signs of Q and R as torch.

    For a rank-deficient matrix, a column's remainder below the diagonal is only rounding
    noise (eager's float32 noise, not ours), and the reflector built from it, so Q and R, is
    arbitrary: such a matrix (a remainder not above 1000 eps(dtype) |A| but not exactly zero,
    where both skip the reflection) is flagged, and its results are NaN rather than a valid
    factorization that differs from eager's."""
    zero, one = g.const(0.0, DOUBLE), g.const(1.0, DOUBLE)
    row_index = torch.arange(rows)
    column_index = torch.arange(columns)
    scale = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", A, A), g.const([-2, -1]), keepdims_i=1))
    negligible = g.op("Mul", scale, g.const(1000 * torch.finfo(_torch_dtype(dtype)).eps, DOUBLE))
    undetermined = None
    taus = []
    for k in range(min(rows, columns)):
        x = _column(g, A, k)  # [..., m, 1]
        alpha = _entry(g, A, k, k)
        # Masks pick rows and columns with Where: a product with 0 would turn inf into NaN.
        below = g.const((row_index > k).reshape(rows, 1))
        tail = g.op("Where", below, x, zero)
        xnorm2 = _sum_last(g, g.op("Mul", tail, tail))
        norm = g.op("Sqrt", g.op("Add", g.op("Mul", alpha, alpha), xnorm2))
        sign = g.op("Where", g.op("Less", alpha, zero), g.const(-1.0, DOUBLE), one)
        beta = g.op("Neg", g.op("Mul", sign, norm))
        # No reflection (tau = 0) when the column is already zero below the diagonal.
        identity = g.op("Equal", xnorm2, zero)
        noise = g.op("And", g.op("Not", identity), g.op("LessOrEqual", norm, negligible))
        undetermined = noise if undetermined is None else g.op("Or", undetermined, noise)
        safe_beta = g.op("Where", identity, one, beta)
        tau = g.op("Where", identity, zero, g.op("Div", g.op("Sub", safe_beta, alpha), safe_beta))
        scale = g.op("Div", one, g.op("Where", identity, one, g.op("Sub", alpha, beta)))
        unit = g.const((row_index == k).to(torch.float64).reshape(rows, 1), DOUBLE)
        v = g.op("Where", below, g.op("Mul", tail, scale), unit)  # [..., m, 1]
        # H = I - tau v v^T applied to the columns right of k.
        vt_a = g.op("MatMul", _transpose(g, _with_rank(v, len(A.shape))), A)  # [..., 1, n]
        right = g.const((column_index > k).reshape(1, columns))
        update = g.op("MatMul", g.op("Mul", v, tau), vt_a)
        A = _with_rank(g.op("Where", right, g.op("Sub", A, update), A), len(A.shape))
        # Column k becomes beta on the diagonal and v below it (R above stays).
        above = g.const((row_index < k).reshape(rows, 1))
        on_diagonal = g.const((row_index == k).reshape(rows, 1))
        new_column = g.op("Where", above, x, g.op(
            "Where", on_diagonal, g.op("Where", identity, alpha, beta),
            g.op("Mul", tail, g.op("Where", identity, one, scale))))
        is_k = g.const((column_index == k).reshape(1, columns))
        A = _with_rank(g.op("Where", is_k, new_column, A), len(A.shape))
        taus.append(tau)
    tau = taus[0] if len(taus) == 1 else g.op("Concat", *taus, axis_i=-1)  # [..., 1, k]
    return A, g.op("Squeeze", tau, g.const([-2])), undetermined


def _nan_where(g, flag, x):
    return g.op("Where", flag, g.const(float("nan"), DOUBLE), x)


def _apply_reflectors(g, V, tau, C, rows: int, count: int, left: bool, transpose: bool):
    """C multiplied by Q = H_0 H_1 ... H_{count-1} (or Q^T), from the left or the right, where
    H_i = I - tau_i v_i v_i^T and v_i is column i of V below the diagonal with a 1 on it."""
    row_index = torch.arange(rows)
    rank = len(C.shape)
    order = list(range(count))
    # Q C applies H_{count-1} first; Q^T C and C Q apply H_0 first; C Q^T applies it last.
    if left != transpose:
        order.reverse()
    for i in order:
        below = g.const((row_index > i).reshape(rows, 1))
        unit = g.const((row_index == i).to(torch.float64).reshape(rows, 1), DOUBLE)
        v = _with_rank(g.op("Where", below, _column(g, V, i), unit), rank)
        t = g.op("Unsqueeze", g.op("Slice", tau, g.const([i]), g.const([i + 1]), g.const([-1])),
                 g.const([-1]))  # [..., 1, 1]
        if left:  # H C = C - tau v (v^T C)
            product = g.op("MatMul", g.op("Mul", v, t), g.op("MatMul", _transpose(g, v), C))
        else:  # C H = C - tau (C v) v^T
            product = g.op("MatMul", g.op("Mul", g.op("MatMul", C, v), t), _transpose(g, v))
        C = _with_rank(g.op("Sub", C, product), rank)
    return C


@translates("aten::geqrf", since_opset=13)
def geqrf(g, self):
    """geqrf(Tensor self) -> (Tensor a, Tensor tau)"""
    rows, columns = _matrix_size(g, self, "geqrf", limit=MAX_QR_SIZE)
    rank = _result_rank(g)
    if min(rows, columns) == 0:
        return g.op("Identity", self), _filled(g, self, [0], self.dtype)
    reflectors, tau, undetermined = _householder_qr(g, _to_double(g, self, rank), rows, columns,
                                                    self.dtype)
    reflectors = _nan_where(g, undetermined, reflectors)
    tau = _nan_where(g, g.op("Squeeze", undetermined, g.const([-1])), tau)
    return cast(g, reflectors, self.dtype), cast(g, tau, self.dtype)


@translates("aten::linalg_qr", since_opset=13)
def linalg_qr(g, A, mode="reduced"):
    """linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)"""
    rows, columns = _matrix_size(g, A, "linalg_qr", limit=MAX_QR_SIZE)
    rank = _result_rank(g)
    k = min(rows, columns)
    r_rows = rows if mode == "complete" else k
    q_columns = rows if mode == "complete" else k
    if k == 0:
        r = _filled(g, A, [r_rows, columns], A.dtype)
        if mode == "r":
            return g.const(torch.zeros(0, dtype=_torch_dtype(A.dtype))), r
        eye = g.op("Expand", cast(g, _eye(g, rows, q_columns), A.dtype),
                   g.op("Concat", _batch_shape(g, A), g.const([rows, q_columns]), axis_i=0))
        return eye, r
    reflectors, tau, undetermined = _householder_qr(g, _to_double(g, A, rank), rows, columns,
                                                    A.dtype)
    upper = g.const(torch.triu(torch.ones(r_rows, columns, dtype=torch.bool)))
    r_part = reflectors if r_rows == rows else g.op(
        "Slice", reflectors, g.const([0]), g.const([r_rows]), g.const([-2]))
    r = _nan_where(g, undetermined, g.op("Where", upper, r_part, g.const(0.0, DOUBLE)))
    if mode == "r":
        return g.const(torch.zeros(0, dtype=_torch_dtype(A.dtype))), cast(g, r, A.dtype)
    eye = g.op("Expand", _eye(g, rows, q_columns),
               g.op("Concat", _batch_shape(g, A), g.const([rows, q_columns]), axis_i=0))
    q = _apply_reflectors(g, reflectors, tau, _with_rank(eye, rank), rows, k, left=True,
                          transpose=False)
    return cast(g, _nan_where(g, undetermined, q), A.dtype), cast(g, r, A.dtype)


@translates("aten::linalg_householder_product", since_opset=13)
def householder_product(g, input, tau):
    """linalg_householder_product(Tensor input, Tensor tau) -> Tensor"""
    rows, columns = _matrix_size(g, input, "linalg_householder_product",
                                 limit=MAX_QR_SIZE)
    fake_tau = g.arguments[1]
    count = fake_tau.shape[-1]
    if not isinstance(count, int):
        raise TranslationError("linalg_householder_product: the number of reflectors (tau's "
                               "last axis) must be static")
    rank = _result_rank(g)
    eye = g.op("Expand", _eye(g, rows, columns),
               g.op("Concat", _batch_shape(g, input), g.const([rows, columns]), axis_i=0))
    q = _apply_reflectors(g, _to_double(g, input, rank), cast(g, tau, DOUBLE),
                          _with_rank(eye, rank), rows, count, left=True, transpose=False)
    return cast(g, q, input.dtype)


@translates("aten::ormqr", since_opset=13)
def ormqr(g, self, input2, input3, left=True, transpose=False):
    """ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool transpose=False) -> Tensor"""
    rows, _ = _matrix_size(g, self, "ormqr", limit=MAX_QR_SIZE)
    _matrix_size(g, input3, "ormqr", position=2, unrolled=None)
    count = g.arguments[1].shape[-1]
    if not isinstance(count, int):
        raise TranslationError("ormqr: the number of reflectors (tau's last axis) must be static")
    rank = g.expected.dim()
    C = _to_double(g, input3, rank)
    out = _apply_reflectors(g, _to_double(g, self, g.arguments[0].dim()), cast(g, input2, DOUBLE),
                            C, rows, count, left=left, transpose=transpose)
    return cast(g, out, input3.dtype)


# -- Jacobi rotations (eigenvalues of symmetric matrices, singular values) ------------------------
def _rotation(g, app, aqq, apq):
    """(c, s) of the Jacobi rotation that zeroes apq of a symmetric 2 x 2 block (Golub and
    Van Loan, Algorithm 8.4.1); the identity when apq is already zero."""
    zero, one = g.const(0.0, DOUBLE), g.const(1.0, DOUBLE)
    is_zero = g.op("Equal", apq, zero)
    safe = g.op("Where", is_zero, one, apq)
    tau = g.op("Div", g.op("Sub", aqq, app), g.op("Mul", safe, g.const(2.0, DOUBLE)))
    sign = g.op("Where", g.op("Less", tau, zero), g.const(-1.0, DOUBLE), one)
    t = g.op("Div", sign, g.op("Add", g.op("Abs", tau),
                               g.op("Sqrt", g.op("Add", one, g.op("Mul", tau, tau)))))
    t = g.op("Where", is_zero, zero, t)
    c = g.op("Div", one, g.op("Sqrt", g.op("Add", one, g.op("Mul", t, t))))
    return c, g.op("Mul", t, c)


def _rotation_matrices(g, n: int, p: int, q: int, c, s):
    """J and J^T of the rotation in plane (p, q): J_pp = J_qq = c, J_pq = s, J_qp = -s."""
    diagonal = torch.zeros(n, n, dtype=torch.float64)
    diagonal[p, p] = diagonal[q, q] = 1.0
    skew = torch.zeros(n, n, dtype=torch.float64)
    skew[p, q], skew[q, p] = 1.0, -1.0
    base = g.op("Add", _eye(g, n), g.op("Mul", g.op("Sub", c, g.const(1.0, DOUBLE)),
                                        g.const(diagonal, DOUBLE)))
    s_skew = g.op("Mul", s, g.const(skew, DOUBLE))
    return g.op("Add", base, s_skew), g.op("Sub", base, s_skew)


def _jacobi(g, B, V, n: int, rank: int, one_sided: bool, name: str):
    """Cyclic Jacobi sweeps in an ONNX Loop until B's off-diagonal part (of B^T B when
    one-sided) is negligible. Two-sided: B <- J^T B J (B symmetric, its eigenvalues end on the
    diagonal). One-sided (Hestenes): B <- B J, whose columns end orthogonal with the singular
    values as norms. V, when given, accumulates the rotations (the eigen / right singular
    vectors)."""
    body = g.subgraph(g._node_name(name))
    prefix = body.graph.name.replace("/", "_")
    body.add_input(f"{prefix}_iteration", ir.DataType.INT64, [])
    body.add_input(f"{prefix}_condition", ir.DataType.BOOL, [])
    b = body.add_input(f"{prefix}_B", DOUBLE, [None] * rank)
    v = body.add_input(f"{prefix}_V", DOUBLE, [None] * rank) if V is not None else None
    for p, q in itertools.combinations(range(n), 2):
        if one_sided:
            column_p, column_q = _column(body, b, p), _column(body, b, q)
            app = _sum_last(body, body.op("Mul", column_p, column_p))
            aqq = _sum_last(body, body.op("Mul", column_q, column_q))
            apq = _sum_last(body, body.op("Mul", column_p, column_q))
        else:
            app, aqq, apq = _entry(body, b, p, p), _entry(body, b, q, q), _entry(body, b, p, q)
        c, s = _rotation(body, app, aqq, apq)
        J, JT = _rotation_matrices(body, n, p, q, c, s)
        b = body.op("MatMul", b, J)
        if not one_sided:
            b = body.op("MatMul", JT, b)
        b = _with_rank(b, rank)
        if v is not None:
            v = _with_rank(body.op("MatMul", v, J), rank)
    gram = _with_rank(body.op("MatMul", _transpose(body, b), b), rank) if one_sided else b
    off_diagonal = body.const(1.0 - torch.eye(n, dtype=torch.float64), DOUBLE)
    off = body.op("ReduceSum", body.op("Mul", body.op("Mul", gram, gram), off_diagonal),
                  keepdims_i=0)
    total = body.op("ReduceSum", body.op("Mul", gram, gram), keepdims_i=0)
    body.add_output(body.op("Greater", off,
                            body.op("Mul", total, body.const(_JACOBI_TOLERANCE ** 2, DOUBLE))))
    body.add_output(b)
    if v is not None:
        body.add_output(v)
    carried = [B] + ([V] if V is not None else [])
    results = g.op("Loop", g.const(MAX_SWEEPS), g.const(True), *carried, body_g=body.graph,
                   outputs=len(carried))
    results = results if isinstance(results, tuple) else (results,)
    for result in results:
        result.dtype = DOUBLE  # the builder would take the trip count's
    return [_with_rank(r, rank) for r in results]


def _symmetric(g, A, n: int, upper: bool, rank: int):
    """The symmetric matrix of A's lower (or upper) triangle, the only part LAPACK reads."""
    keep = torch.tril(torch.ones(n, n, dtype=torch.bool))
    if upper:
        keep = keep.T.contiguous()
    strict = keep & ~torch.eye(n, dtype=torch.bool)
    zero = g.const(0.0, DOUBLE)
    triangle = g.op("Where", g.const(keep), A, zero)
    mirrored = _transpose(g, _with_rank(g.op("Where", g.const(strict), A, zero), rank))
    return _with_rank(g.op("Add", triangle, mirrored), rank)


def _diagonal(g, B, n: int):
    """The diagonal of a batch of n x n matrices, as [..., n]."""
    return g.op("ReduceSum", g.op("Mul", B, _eye(g, n)), g.const([-1]), keepdims_i=0)


def _sorted(g, values, n: int, descending: bool):
    result, _ = g.op("TopK", values, g.const([n]), axis_i=-1, largest_i=int(descending),
                     sorted_i=1, outputs=2)
    return result


def _eigen(g, A, n: int, rank: int, upper: bool, vectors: bool):
    """(eigenvalues [..., n] unsorted, eigenvectors or None) of the symmetric matrix that A's
    lower (upper) triangle defines."""
    B = _symmetric(g, _to_double(g, A, rank), n, upper, rank)
    V = None
    if vectors:
        V = _with_rank(g.op("Expand", _eye(g, n),
                            g.op("Concat", _batch_shape(g, A), g.const([n, n]), axis_i=0)), rank)
    if n > 1:
        B, *rest = _jacobi(g, B, V, n, rank, one_sided=False, name="JacobiEigen")
        V = rest[0] if vectors else None
    return _diagonal(g, B, n), V


def _one_sided(g, A, rows: int, columns: int, rank: int, vectors: bool):
    """Hestenes' one-sided Jacobi on a matrix with rows >= columns: (W = A V, whose column
    norms are the singular values, V or None)."""
    W = _to_double(g, A, rank)
    V = None
    if vectors:
        V = _with_rank(g.op("Expand", _eye(g, columns),
                            g.op("Concat", _batch_shape(g, A), g.const([columns, columns]),
                                 axis_i=0)), rank)
    if columns > 1:
        W, *rest = _jacobi(g, W, V, columns, rank, one_sided=True, name="JacobiSVD")
        V = rest[0] if vectors else None
    return W, V


def _norms(g, W):
    return g.op("Sqrt", g.op("ReduceSum", g.op("Mul", W, W), g.const([-2]), keepdims_i=0))


def _singular_values(g, A, rows: int, columns: int, rank: int):
    """The singular values [..., min(m, n)] in descending order, as float64."""
    if rows < columns:
        A, rows, columns = _transpose(g, A), columns, rows
    W, _ = _one_sided(g, A, rows, columns, rank, vectors=False)
    return _sorted(g, _norms(g, W), columns, descending=True)


_VECTORS_REFUSED = (
    "{op}: the {what} vectors are unique only up to sign (and to rotations within repeated "
    "values), and LAPACK's choice depends on its rounding, so no composition of ONNX ops can "
    "reproduce eager's vectors reliably; onnxport refuses rather than return vectors that "
    "differ from eager. Use the values only ({values}), or results that do not depend on the "
    "vectors' signs (linalg.pinv, linalg.matrix_rank, linalg.cond), or register a custom "
    "translation")


# Ops whose decompositions ask _linalg_svd / _linalg_eigh for vectors (when the input may need a
# gradient) but use only the values: there the vectors are never read, and are left empty.
_VALUES_ONLY = {"aten::linalg_svdvals", "aten::linalg_eigvalsh", "aten::linalg_matrix_rank",
                "aten::matrix_rank", "aten::linalg_cond", "aten::linalg_matrix_norm",
                "aten::linalg_norm", "aten::norm", "aten::nuclear_norm"}


def _origin(g) -> str:
    """The op (without its overload) whose decomposition the call being translated is in."""
    origin = g.provenance.decomposed_from
    namespace, _, name = origin.partition("::")
    return f"{namespace}::{name.split('.')[0]}" if name else origin


@translates("aten::_linalg_svd", since_opset=13)
def linalg_svd(g, A, full_matrices=False, compute_uv=True, *, driver=None):
    """_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)"""
    rows, columns = _matrix_size(g, A, "linalg_svd")
    rank = _result_rank(g)
    k = min(rows, columns)
    empty = g.const(torch.zeros(0, dtype=_torch_dtype(A.dtype)))
    if k == 0 and not compute_uv:
        return empty, _filled(g, A, [0], A.dtype), g.op("Identity", empty)
    if k == 0:
        # Nothing to choose a sign for: U and Vh are empty or identities, S is empty.
        u_meta, _, vh_meta = g.expected
        u, vh = [_filled(g, A, list(meta.shape[-2:]), A.dtype) if meta.numel() == 0 else
                 g.op("Expand", cast(g, _eye(g, meta.shape[-1]), A.dtype),
                      g.op("Concat", _batch_shape(g, A), g.const(list(meta.shape[-2:])), axis_i=0))
                 for meta in (u_meta, vh_meta)]
        return u, _filled(g, A, [0], A.dtype), vh
    if compute_uv and _origin(g) not in _VALUES_ONLY:
        raise TranslationError(_VECTORS_REFUSED.format(op="linalg_svd", what="singular",
                                                       values="torch.linalg.svdvals"))
    values = cast(g, _singular_values(g, A, rows, columns, rank), A.dtype)
    return empty, values, g.op("Identity", empty)


@translates("aten::linalg_svdvals", since_opset=13)
def linalg_svdvals(g, A, *, driver=None):
    """linalg_svdvals(Tensor A, *, str? driver=None) -> Tensor"""
    # Its decomposition asks _linalg_svd for the vectors when A may need a gradient.
    _, values, _ = linalg_svd(g, A, compute_uv=False)
    return values


@translates("aten::linalg_eigvalsh", since_opset=13)
def linalg_eigvalsh(g, A, UPLO="L"):
    """linalg_eigvalsh(Tensor A, str UPLO="L") -> Tensor"""
    values, _ = linalg_eigh(g, A, UPLO, compute_v=False)
    return values


@translates("aten::_linalg_eigh", since_opset=13)
def linalg_eigh(g, A, UPLO="L", compute_v=True):
    """_linalg_eigh(Tensor A, str UPLO="L", bool compute_v=True) -> (Tensor eigenvalues, Tensor eigenvectors)"""
    rows, columns = _matrix_size(g, A, "linalg_eigh", unrolled=max)
    rank = _result_rank(g)
    if rows == 0:
        vectors = g.op("Identity", A) if compute_v else g.const(
            torch.zeros(0, dtype=_torch_dtype(A.dtype)))
        return _filled(g, A, [0], A.dtype), vectors
    if compute_v and _origin(g) not in _VALUES_ONLY:
        raise TranslationError(_VECTORS_REFUSED.format(op="linalg_eigh", what="eigen",
                                                       values="torch.linalg.eigvalsh"))
    values, _ = _eigen(g, A, rows, rank, UPLO.upper() == "U", vectors=False)
    values = cast(g, _sorted(g, values, rows, descending=False), A.dtype)
    return values, g.const(torch.zeros(0, dtype=_torch_dtype(A.dtype)))


def _tolerance(g, atol, rtol, largest, rows: int, columns: int, dtype: ir.DataType):
    """torch's pinv threshold max(atol, rtol * largest), with its defaults: rtol = eps *
    max(m, n) unless atol is given and positive (then 0)."""
    default_rtol = torch.finfo(_torch_dtype(dtype)).eps * max(rows, columns)
    zero = g.const(0.0, DOUBLE)
    atol = cast(g, atol, DOUBLE) if atol is not None else None
    if rtol is not None:
        rtol = cast(g, rtol, DOUBLE)
    elif atol is not None:
        rtol = g.op("Where", g.op("Greater", atol, zero), zero, g.const(default_rtol, DOUBLE))
    else:
        rtol = g.const(default_rtol, DOUBLE)
    threshold = g.op("Mul", g.op("Unsqueeze", rtol, g.const([-1])), largest)
    if atol is not None:
        threshold = g.op("Max", g.op("Unsqueeze", atol, g.const([-1])), threshold)
    return threshold


@translates("aten::linalg_pinv.atol_rtol_tensor", since_opset=13)
def linalg_pinv(g, self, *, atol=None, rtol=None, hermitian=False):
    """linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None, bool hermitian=False) -> Tensor"""
    rows, columns = _matrix_size(g, self, "linalg_pinv",
                                 unrolled=max if hermitian else min)
    rank = _result_rank(g)
    if min(rows, columns) == 0:
        return _filled(g, self, [columns, rows], self.dtype)
    zero = g.const(0.0, DOUBLE)
    if hermitian:
        values, V = _eigen(g, self, rows, rank, upper=False, vectors=True)
        magnitude = g.op("Abs", values)
        largest = reduce(g, "ReduceMax", magnitude, [-1], True)
        keep = g.op("Greater", magnitude, _tolerance(g, atol, rtol, largest, rows, columns,
                                                     self.dtype))
        inverse = g.op("Where", keep, g.op("Div", g.const(1.0, DOUBLE),
                                           g.op("Where", keep, values, g.const(1.0, DOUBLE))),
                       zero)
        scaled = g.op("Mul", V, g.op("Unsqueeze", inverse, g.const([-2])))
        return cast(g, g.op("MatMul", scaled, _transpose(g, V)), self.dtype)
    pinv, _ = _pseudo_inverse(g, _to_double(g, self, rank), rows, columns, rank,
                              lambda largest: _tolerance(g, atol, rtol, largest, rows, columns,
                                                         self.dtype))
    return cast(g, pinv, self.dtype)


def _pseudo_inverse(g, A, rows: int, columns: int, rank: int, threshold):
    """(pinv(A), singular values, unsorted) of a float64 batch, zeroing the singular values
    not above ``threshold(largest singular value [..., 1])``."""
    m, n = rows, columns
    if rows < columns:
        A, m, n = _transpose(g, A), columns, rows
    W, V = _one_sided(g, A, m, n, rank, vectors=True)
    singular = _norms(g, W)
    largest = reduce(g, "ReduceMax", singular, [-1], True)
    keep = g.op("Greater", singular, threshold(largest))
    # W = U diag(s), so pinv = V diag(1/s) U^T = V diag(1/s^2) W^T.
    one = g.const(1.0, DOUBLE)
    safe = g.op("Where", keep, singular, one)
    factor = g.op("Where", keep, g.op("Div", one, g.op("Mul", safe, safe)),
                  g.const(0.0, DOUBLE))
    pinv = g.op("MatMul", g.op("Mul", V, g.op("Unsqueeze", factor, g.const([-2]))),
                _transpose(g, W))
    if rows < columns:
        pinv = _transpose(g, _with_rank(pinv, rank))
    return _with_rank(pinv, rank), (singular, keep)


@translates("aten::linalg_matrix_sqrth", since_opset=13)
def linalg_matrix_sqrth(g, self):
    """linalg_matrix_sqrth(Tensor self) -> Tensor"""
    rows, columns = _matrix_size(g, self, "linalg_matrix_sqrth", unrolled=max)
    rank = _result_rank(g)
    if rows == 0:
        return g.op("Identity", self)
    # V diag(sqrt(l)) V^T is a function of the matrix, unique whatever the eigenvectors' signs.
    # Like eager, negative eigenvalues (of a matrix that is not positive semi-definite, or
    # rounding's) count as zero.
    values, V = _eigen(g, self, rows, rank, upper=False, vectors=True)
    roots = g.op("Sqrt", g.op("Max", values, g.const(0.0, DOUBLE)))
    X = g.op("MatMul", g.op("Mul", V, g.op("Unsqueeze", roots, g.const([-2]))),
             _transpose(g, V))
    return cast(g, X, self.dtype)


@translates("aten::linalg_polar", since_opset=13)
def linalg_polar(g, A):
    """linalg_polar(Tensor A) -> (Tensor U, Tensor H)"""
    rows, columns = _matrix_size(g, A, "linalg_polar")
    rank = _result_rank(g)
    if columns == 0:
        return _filled(g, A, [rows, 0], A.dtype), _filled(g, A, [0, 0], A.dtype)
    # A V = W = U' diag(s) (one-sided Jacobi), so A = (U' V^T)(V diag(s) V^T). H is unique;
    # U is unique only for a full-column-rank A. For a rank-deficient one (a singular value
    # not above eps * max(m, n) * the largest, matrix_rank's default) eager's U is LAPACK's
    # choice of vectors, which nothing here can reproduce: that matrix's U is NaN instead of
    # an orthonormal matrix that differs from eager's.
    W, V = _one_sided(g, _to_double(g, A, rank), rows, columns, rank, vectors=True)
    norms = _norms(g, W)
    singular = g.op("Unsqueeze", norms, g.const([-2]))
    Vt = _transpose(g, V)
    U = g.op("MatMul", g.op("Div", W, singular), Vt)
    H = g.op("MatMul", g.op("Mul", V, singular), Vt)
    ratio = torch.finfo(_torch_dtype(A.dtype)).eps * max(rows, columns)
    largest = reduce(g, "ReduceMax", norms, [-1], True)
    deficient = reduce(g, "ReduceMin", cast(g, g.op("Greater", norms, g.op(
        "Mul", largest, g.const(ratio, DOUBLE))), DOUBLE), [-1], True)
    U = g.op("Where", g.op("Equal", g.op("Unsqueeze", deficient, g.const([-1])),
                          g.const(0.0, DOUBLE)), g.const(float("nan"), DOUBLE), U)
    return cast(g, U, A.dtype), cast(g, H, A.dtype)


def _empty_lstsq(g, A, b, columns: int, vector: bool, driver: str, rank: int):
    """lstsq of empty matrices, as eager returns it: a zero solution, rank 0, and zero
    residuals when gels computes them."""
    right = 1 if vector else g.arguments[1].shape[-1]
    if not isinstance(right, int):
        raise TranslationError("linalg_lstsq: the number of right-hand sides must be static")
    # A's batch with B's trailing sizes: B broadcasts against A in eager.
    like = b if not vector else g.op("Unsqueeze", b, g.const([-1]))
    like = _with_rank(like, rank)
    solution = _filled(g, like, [columns] if vector else [columns, right], A.dtype)
    residuals_meta = g.expected[1]
    residuals = (_filled(g, like, [right], A.dtype) if residuals_meta.numel() > 0 or
                 residuals_meta.dim() > 1 else g.const(torch.zeros(0, dtype=_torch_dtype(A.dtype))))
    if driver == "gels":
        matrix_rank = g.const(torch.zeros(0, dtype=torch.int64))
    else:
        shape = g.op("Concat", _batch_shape(g, like), g.const([], ir.DataType.INT64), axis_i=0)
        matrix_rank = g.op("ConstantOfShape", shape,
                           value_t=ir.tensor(torch.tensor([0], dtype=torch.int64)))
    singular = (_filled(g, like, [0], A.dtype) if driver in ("gelss", "gelsd") else
                g.const(torch.zeros(0, dtype=_torch_dtype(A.dtype))))
    return solution, residuals, matrix_rank, singular


def _default_driver(rank_meta, solution_meta, batch_rank: int) -> str:
    """The driver eager used when none was named: gelsy on the CPU, gels on CUDA (its only
    one). gels records an empty rank, [0]; gelsy one rank per matrix, of the batch's shape."""
    batch = tuple(solution_meta.shape[:batch_rank])
    empty_rank = tuple(rank_meta.shape) == (0,)
    return "gels" if empty_rank and not (len(batch) == 1 and batch[0] == 0) else "gelsy"


@translates("aten::linalg_lstsq", since_opset=13)
def linalg_lstsq(g, self, b, rcond=None, *, driver=None):
    """linalg_lstsq(Tensor self, Tensor b, float? rcond=None, *, str? driver=None) -> (Tensor solution, Tensor residuals, Tensor rank, Tensor singular_values)"""
    rows, columns = _matrix_size(g, self, "linalg_lstsq")
    rank = _result_rank(g)
    solution_meta, residuals_meta, rank_meta, singular_meta = g.expected
    vector = g.arguments[1].dim() == rank - 1
    driver = driver or _default_driver(rank_meta, solution_meta, rank - (1 if vector else 2))
    empty = g.const(torch.zeros(0, dtype=_torch_dtype(self.dtype)))
    empty_rank = g.const(torch.zeros(0, dtype=torch.int64))
    if min(rows, columns) == 0:
        return _empty_lstsq(g, self, b, columns, vector, driver, rank)
    if driver in ("gelss", "gelsd") and rows > columns:
        raise TranslationError(
            f"linalg_lstsq: with driver={driver!r} the residuals exist only when every matrix "
            "is full-rank, so the output's shape depends on the data; use driver='gelsy' or "
            "'gels'")
    # Every driver's solution is the least-squares one of minimal norm, for the singular
    # values above rcond * the largest (gels assumes full rank, where it is the same).
    ratio = rcond if rcond is not None and rcond > 0 else (
        torch.finfo(_torch_dtype(self.dtype)).eps * max(rows, columns))
    A = _to_double(g, self, rank)
    B = _to_double(g, b, rank - 1 if vector else rank)
    if vector:
        B = _with_rank(g.op("Unsqueeze", B, g.const([-1])), rank)
    pinv, (singular, keep) = _pseudo_inverse(
        g, A, rows, columns, rank, lambda largest: g.op("Mul", largest, g.const(ratio, DOUBLE)))
    X = _with_rank(g.op("MatMul", pinv, B), rank)
    if driver == "gels":
        # gels assumes full rank: for a rank-deficient matrix eager divides by R's rounding
        # noise, which nothing here reproduces; that matrix's solution is NaN instead.
        full_rank = reduce(g, "ReduceMin", cast(g, keep, DOUBLE), [-1], True)
        X = g.op("Where", g.op("Equal", g.op("Unsqueeze", full_rank, g.const([-1])),
                               g.const(0.0, DOUBLE)), g.const(float("nan"), DOUBLE), X)
    residuals = empty
    if residuals_meta.numel() > 0 or (rows > columns and driver == "gels"):
        error = g.op("Sub", g.op("MatMul", A, X), B)
        residuals = cast(g, g.op("ReduceSum", g.op("Mul", error, error), g.const([-2]),
                                 keepdims_i=0), self.dtype)
    solution = g.op("Squeeze", X, g.const([-1])) if vector else X
    matrix_rank = empty_rank if driver == "gels" else g.op(
        "ReduceSum", cast(g, keep, ir.DataType.INT64), g.const([-1]), keepdims_i=0)
    singular_values = empty
    if driver in ("gelss", "gelsd"):
        singular_values = cast(g, _sorted(g, singular, min(rows, columns), descending=True),
                               self.dtype)
    return cast(g, solution, self.dtype), residuals, matrix_rank, singular_values


# -- the matrix exponential ------------------------------------------------------------------------
_TAYLOR_DEGREE = 14
# Scaled to a 1-norm of at most 1/2, the Taylor remainder of degree 14 is below 0.5^15 / 15!,
# far under float64's round-off.
_SCALED_NORM = 0.5


@translates("aten::linalg_matrix_exp", since_opset=13)
def matrix_exp(g, self):
    """linalg_matrix_exp(Tensor self) -> Tensor"""
    rows, columns = _matrix_size(g, self, "linalg_matrix_exp", unrolled=None)
    rank = _result_rank(g)
    if rows == 0:
        return g.op("Identity", self)
    A = _to_double(g, self, rank)
    # Scaling and squaring: s = ceil(log2(|A|_1 / 0.5)) squarings (one s for the batch, its
    # largest: more squarings of a smaller matrix lose nothing). A non-finite norm gives 0
    # squarings, and the NaNs of the Taylor sum, like eager.
    norm = reduce(g, "ReduceMax", g.op("ReduceSum", g.op("Abs", A), g.const([-2]), keepdims_i=0),
                  None, False)
    finite = g.op("Not", g.op("Or", g.op("IsNaN", norm), g.op("IsInf", norm)))
    safe_norm = g.op("Where", finite, norm, g.const(0.0, DOUBLE))
    log2 = g.op("Div", g.op("Log", g.op("Div", safe_norm, g.const(_SCALED_NORM, DOUBLE))),
                g.const(float(torch.log(torch.tensor(2.0, dtype=torch.float64))), DOUBLE))
    # float64's largest finite value is below 2^1024: at most 1025 squarings.
    squarings = g.op("Clip", g.op("Ceil", log2), g.const(0.0, DOUBLE), g.const(1100.0, DOUBLE))
    scaled = g.op("Div", A, g.op("Pow", g.const(2.0, DOUBLE), squarings))
    eye = _eye(g, rows)
    # Horner: I + X (I + X/2 (I + X/3 (...))).
    E = eye
    for k in range(_TAYLOR_DEGREE, 0, -1):
        E = g.op("Add", eye, g.op("MatMul", g.op("Div", scaled, g.const(float(k), DOUBLE)), E))
    body = g.subgraph(g._node_name("Squaring"))
    prefix = body.graph.name.replace("/", "_")
    body.add_input(f"{prefix}_iteration", ir.DataType.INT64, [])
    condition = body.add_input(f"{prefix}_condition", ir.DataType.BOOL, [])
    current = body.add_input(f"{prefix}_E", DOUBLE, [None] * rank)
    body.add_output(condition)
    body.add_output(body.op("MatMul", current, current))
    count = g.op("Cast", squarings, to_i=int(ir.DataType.INT64))
    E = g.op("Loop", count, None, _with_rank(E, rank), body_g=body.graph)
    E.dtype = DOUBLE
    return cast(g, E, self.dtype)
