"""Spectral ops: torch.fft.* and torch.stft/istft as ONNX DFT and STFT (opset >= 17). A complex
tensor lives in the graph as its real and imaginary parts on a last axis of 2, DFT's own
layout; abs, real, imag, conj and view_as_real/view_as_complex read that layout."""

from __future__ import annotations

import math

import onnx_ir as ir
import torch

from onnxport.errors import TranslationError
from onnxport.translate.ops._helpers import cast, squeeze, unsqueeze
from onnxport.translate.registry import COMPLEX_LAYOUT_OPS, translates, wrap_translations


def _spectral(*names: str, identity_on_real: bool = False):
    """Register a translation that handles complex values in their layout (DFT needs 17).
    ``identity_on_real``: of a real tensor the op is the tensor itself, at any opset."""
    def decorator(function):
        COMPLEX_LAYOUT_OPS.update(names)
        translates(*names, since_opset=17)(function)
        translates(*names, since_opset=1)(_needs_opset_17(names[0], identity_on_real))
        return function
    return decorator


def _needs_opset_17(name: str, identity_on_real: bool = False):
    def translation(g, *args, **kwargs):
        if identity_on_real and args and not is_complex(args[0]):
            return args[0]
        where = f" (at {g.provenance.source})" if g.provenance.source else ""
        raise TranslationError(
            f"{name}{where} needs opset_version >= 17: ONNX has no DFT nor STFT before opset "
            f"17; export with opset_version=17 or later (at opset {g.opset} the options are a "
            "custom translation, onnxport.register_custom_op_symbolic, or "
            "operator_export_type=ONNX_FALLTHROUGH)")
    return translation


def is_complex(x) -> bool:
    return isinstance(x, ir.Value) and bool(x.meta.get("complex"))


def _length(shape: list, axis: int, name: str) -> int:
    if not isinstance(shape[axis], int):
        raise TranslationError(f"{name}: the signal length along a transformed axis must be "
                               "known at export (a dynamic axis may be batch-like, not a "
                               "transformed one)")
    return shape[axis]


def _as_layout(g, x: ir.Value, full: bool = False) -> tuple[ir.Value, list]:
    """A real tensor as a complex one with zero imaginary parts (DFT takes [..., 1]; ``full``
    writes the zeros, for the transforms that conjugate or mirror it), and the layout's shape
    (the builder does not infer shapes, so the FFT tracks them itself)."""
    if x.shape is None:
        raise TranslationError(f"the rank of {x.name} is unknown; the FFT needs it")
    shape = list(x.shape)
    if is_complex(x):
        return x, shape
    if not x.dtype.is_floating_point():
        # torch promotes integer and bool signals to float; DFT takes floats only.
        x = cast(g, x, ir.DataType.FLOAT)
    x = unsqueeze(g, x, [-1])
    if not full:
        return x, shape + [1]
    pads = [0] * (2 * (len(shape) + 1))
    pads[-1] = 1
    return g.op("Pad", x, g.const(pads)), shape + [2]


def _resize(g, x: ir.Value, shape: list, axis: int, size: int, name: str) -> ir.Value:
    """``x`` cropped or zero-padded to ``size`` along ``axis`` (torch's ``n``/``s``)."""
    current = _length(shape, axis, name)
    shape[axis] = size
    if current == size:
        return x
    if current > size:
        return g.op("Slice", x, g.const([0]), g.const([size]), g.const([axis]))
    pads = [0] * (2 * len(shape))
    pads[len(shape) + axis] = size - current
    return g.op("Pad", x, g.const(pads))


def _dft(g, x: ir.Value, axis: int, *, inverse: bool = False, onesided: bool = False):
    """One DFT along ``axis`` (an axis of the layout, not the last); ONNX's inverse includes
    the 1/n factor."""
    attributes = dict(inverse_i=int(inverse), onesided_i=int(onesided))
    if g.opset >= 20:
        out = g.op("DFT", x, None, g.const(axis), **attributes)
    else:
        out = g.op("DFT", x, axis_i=axis, **attributes)
    out.dtype = x.dtype
    return out


def _conj(g, x: ir.Value) -> ir.Value:
    sign = g.const([1.0, -1.0], x.dtype)
    return g.op("Mul", x, sign)


def _real_part(g, x: ir.Value) -> ir.Value:
    return squeeze(g, g.op("Slice", x, g.const([0]), g.const([1]), g.const([-1])), [-1])


def _imag_part(g, x: ir.Value) -> ir.Value:
    return squeeze(g, g.op("Slice", x, g.const([1]), g.const([2]), g.const([-1])), [-1])


def _c2r(g, x: ir.Value, shape: list, axis: int, n: int, name: str) -> ir.Value:
    """The real inverse DFT of length ``n`` of a one-sided spectrum (n // 2 + 1 bins): the
    other half is the conjugate mirror; torch ignores the imaginary parts of bins 0 and n/2,
    and so does the real part of the inverse."""
    x = _resize(g, x, shape, axis, n // 2 + 1, name)
    mirrored = n - n // 2 - 1
    if mirrored > 0:
        back = g.op("Slice", x, g.const([mirrored]), g.const([0]), g.const([axis]),
                    g.const([-1]))
        x = g.op("Concat", x, _conj(g, back), axis_i=axis)
    shape[axis] = n
    shape.pop()
    return _real_part(g, _dft(g, x, axis, inverse=True))


def _scale(g, x: ir.Value, factor: float) -> ir.Value:
    if abs(factor - 1.0) < 1e-12:
        return x
    return g.op("Mul", x, g.const(factor, x.dtype))


def _norm_factor(norm: str | None, n: int, forward: bool) -> float:
    """What torch multiplies a transform of ``n`` points by, for ``norm``."""
    norm = norm or "backward"
    if norm == "ortho":
        return 1 / math.sqrt(n)
    if norm not in ("backward", "forward"):
        raise TranslationError(f"unknown FFT norm {norm!r}")
    return 1 / n if (norm == "forward") == forward else 1.0


def _axes(x_rank: int, dims, s) -> tuple[list[int], list[int | None]]:
    """The transformed axes (non-negative, of the torch tensor) and their sizes."""
    if dims is None:
        dims = list(range(x_rank - len(s), x_rank)) if s is not None else list(range(x_rank))
    dims = [d + x_rank if d < 0 else d for d in dims]
    sizes = list(s) if s is not None else [None] * len(dims)
    if len(sizes) != len(dims):
        raise TranslationError("FFT: s and dim must have the same length")
    return dims, [None if v is None or v == -1 else int(v) for v in sizes]


def _fftn(g, self, s, dim, norm, *, kind: str, name: str):
    """Every torch.fft transform: ``kind`` is c2c, c2c_inverse, r2c, c2r, hermitian (hfft:
    complex to real, forward) or ihermitian (ihfft: real to complex, inverse)."""
    x, shape = _as_layout(g, self, full=kind in ("c2r", "hermitian"))
    dims, sizes = _axes(len(shape) - 1, dim, s)
    forward = kind in ("c2c", "r2c", "hermitian")
    onnx_scale = 1.0  # what ONNX's inverse DFTs divided by
    points = 1
    if kind in ("c2r", "hermitian"):
        *others, (last, last_size) = list(zip(dims, sizes))
        if kind == "hermitian":
            x = _conj(g, x)
        for axis, size in others:
            if size is not None:
                x = _resize(g, x, shape, axis, size, name)
            length = _length(shape, axis, name)
            x = _dft(g, x, axis, inverse=True)
            onnx_scale /= length
            points *= length
        n = last_size if last_size is not None else 2 * (_length(shape, last, name) - 1)
        x = _c2r(g, x, shape, last, n, name)
        onnx_scale /= n
        points *= n
    else:
        order = list(zip(dims, sizes))
        if kind in ("r2c", "ihermitian"):
            order = order[-1:] + order[:-1]  # the one-sided transform first, on real input
        for index, (axis, size) in enumerate(order):
            if size is not None:
                x = _resize(g, x, shape, axis, size, name)
            length = _length(shape, axis, name)
            onesided = kind in ("r2c", "ihermitian") and index == 0
            inverse = kind == "c2c_inverse"
            x = _dft(g, x, axis, inverse=inverse, onesided=onesided)
            shape[axis], shape[-1] = (length // 2 + 1 if onesided else length), 2
            if inverse:
                onnx_scale /= length
            points *= length
        if kind == "ihermitian":
            x = _conj(g, x)
    return _scale(g, x, _norm_factor(norm, points, forward) / onnx_scale)


_ONE_DIM = {"fft": "c2c", "ifft": "c2c_inverse", "rfft": "r2c", "irfft": "c2r",
            "hfft": "hermitian", "ihfft": "ihermitian"}


def _register_family(short: str, kind: str) -> None:
    @_spectral(f"aten::fft_{short}")
    def one_dim(g, self, n=None, dim=-1, norm=None):
        return _fftn(g, self, None if n is None else [n], [dim], norm, kind=kind,
                     name=f"torch.fft.{short}")

    @_spectral(f"aten::fft_{short}2")
    def two_dim(g, self, s=None, dim=(-2, -1), norm=None):
        return _fftn(g, self, s, list(dim), norm, kind=kind, name=f"torch.fft.{short}2")

    @_spectral(f"aten::fft_{short}n")
    def n_dim(g, self, s=None, dim=None, norm=None):
        return _fftn(g, self, s, dim, norm, kind=kind, name=f"torch.fft.{short}n")

    one_dim.__doc__ = f"fft_{short}(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor"
    two_dim.__doc__ = f"fft_{short}2(Tensor self, SymInt[1]? s=None, int[1] dim=[-2,-1], str? norm=None) -> Tensor"
    n_dim.__doc__ = f"fft_{short}n(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor"


for _short, _kind in _ONE_DIM.items():
    _register_family(_short, _kind)


# -- short-time transforms ----------------------------------------------------------------------
def _full_window(g, window, n_fft: int, win_length: int | None, dtype: ir.DataType):
    """torch's window (ones when None) of win_length, zero-padded on both sides to n_fft."""
    win_length = win_length or n_fft
    if window is None:
        window = g.const([1.0] * win_length, dtype)
    left = (n_fft - win_length) // 2
    if left or n_fft - win_length - left:
        window = g.op("Pad", window, g.const([left, n_fft - win_length - left]))
    return window


@_spectral("aten::stft")
def stft(g, self, n_fft, hop_length=None, win_length=None, window=None, normalized=False,
         onesided=None, return_complex=None, align_to_window=None):
    """stft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, bool normalized=False, bool? onesided=None, bool? return_complex=None, bool? align_to_window=None) -> Tensor

    torch pads the signal (center=True) before this call; STFT frames it the same way.
    ``align_to_window`` (torch 2.8 on; a TorchScript graph passes it) is only taken unset."""
    if align_to_window:
        raise TranslationError("torch.stft with align_to_window=True has no ONNX form yet: "
                               "frames would start off the window's centre; leave it unset")
    if is_complex(self):
        raise TranslationError("torch.stft of a complex signal: ONNX STFT is exported for "
                               "real signals only")
    batched = len(self.shape) == 2
    signal = unsqueeze(g, self, [-1] if batched else [0, -1])  # [batch, length, 1]
    hop = hop_length or n_fft // 4
    window = _full_window(g, window, n_fft, win_length, self.dtype)
    out = g.op("STFT", signal, g.const(hop), window, g.const(n_fft),
               onesided_i=int(True if onesided is None else onesided))
    out.dtype = self.dtype
    out = g.op("Transpose", out, perm_i=[0, 2, 1, 3])  # torch: [batch, bins, frames]
    if not batched:
        out = squeeze(g, out, [0])
    # return_complex=False gives the same numbers with the parts on a last axis: the layout.
    return _scale(g, out, 1 / math.sqrt(n_fft) if normalized else 1.0)


@_spectral("aten::istft")
def istft(g, self, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """istft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, bool center=True, bool normalized=False, bool? onesided=None, int? length=None, bool return_complex=False) -> Tensor

    No ONNX op: the inverse DFT of each frame, windowed, overlap-added by a ConvTranspose with
    an identity kernel (stride hop), divided by the overlap-added squared window."""
    if return_complex:
        raise TranslationError("torch.istft with return_complex=True has no ONNX form (the "
                               "output would be complex)")
    shape = list(self.shape)
    batched = len(shape) == 4
    x = self if batched else unsqueeze(g, self, [0])
    shape = shape if batched else [1, *shape]
    frames = _length(shape, 2, "torch.istft")
    hop = hop_length or n_fft // 4
    x = g.op("Transpose", x, perm_i=[0, 2, 1, 3])  # [batch, frames, bins, 2]
    shape = [shape[0], shape[2], shape[1], 2]
    if onesided is None or onesided:
        x = _c2r(g, x, shape, 2, n_fft, "torch.istft")
    else:
        x = _real_part(g, _dft(g, x, 2, inverse=True))
    x = _scale(g, x, math.sqrt(n_fft) if normalized else 1.0)
    full_window = _full_window(g, window, n_fft, win_length, self.dtype)
    x = g.op("Mul", x, full_window)
    x = g.op("Transpose", x, perm_i=[0, 2, 1])  # [batch, n_fft, frames]
    kernel = g.const(torch.eye(n_fft).reshape(n_fft, 1, n_fft), self.dtype)
    signal = squeeze(g, g.op("ConvTranspose", x, kernel, strides_i=[hop]), [1])
    squares = g.op("Mul", full_window, full_window)
    spread = g.op("Expand", g.op("Reshape", squares, g.const([1, n_fft, 1])),
                  g.const([1, 1, frames]))
    envelope = squeeze(g, g.op("ConvTranspose", spread, kernel, strides_i=[hop]), [1])
    total = n_fft + hop * (frames - 1)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    if end > total:
        raise TranslationError("torch.istft with a length beyond the frames' span is not "
                               "exported")
    signal = g.op("Slice", signal, g.const([start]), g.const([end]), g.const([1]))
    envelope = g.op("Slice", envelope, g.const([start]), g.const([end]), g.const([1]))
    out = g.op("Div", signal, envelope)
    return out if batched else squeeze(g, out, [0])


# -- reading the layout ------------------------------------------------------------------------
@_spectral("aten::view_as_real")
def view_as_real(g, self):
    """view_as_real(Tensor(a) self) -> Tensor(a)"""
    return g.op("Identity", self)


@_spectral("aten::view_as_complex")
def view_as_complex(g, self):
    """view_as_complex(Tensor(a) self) -> Tensor(a)"""
    return g.op("Identity", self)


@_spectral("aten::real", identity_on_real=True)
def real(g, self):
    """real(Tensor(a) self) -> Tensor(a)"""
    return _real_part(g, self) if is_complex(self) else self


@_spectral("aten::imag")
def imag(g, self):
    """imag(Tensor(a) self) -> Tensor(a)"""
    return _imag_part(g, self)


@_spectral("aten::_conj", "aten::conj_physical", "aten::conj", identity_on_real=True)
def conj(g, self):
    """_conj(Tensor(a) self) -> Tensor(a)"""
    return _conj(g, self) if is_complex(self) else self


def _complex_abs(g, self):
    """abs(Tensor self) -> Tensor  (of a complex tensor: the modulus)"""
    return g.op("ReduceL2", self, g.const([-1]), keepdims_i=0) if g.opset >= 18 else \
        g.op("ReduceL2", self, axes_i=[-1], keepdims_i=0)


def _or_complex(name: str, complex_translation) -> None:
    """Keep the library's translation of ``name`` for real tensors and use
    ``complex_translation`` for complex ones."""
    COMPLEX_LAYOUT_OPS.add(name)

    def either(real_translation):
        def translation(g, self, *args, **kwargs):
            if is_complex(self) or any(is_complex(a) for a in args):
                return complex_translation(g, self, *args, **kwargs)
            return real_translation(g, self, *args, **kwargs)
        translation.__doc__ = real_translation.__doc__
        return translation

    if not wrap_translations(name, either):
        translates(name)(complex_translation)


def _complex_mul(g, self, other):
    """mul.Tensor(Tensor self, Tensor other) -> Tensor  (either complex)"""
    if not is_complex(self):
        self, other = other, self
    if not isinstance(other, ir.Value) and not isinstance(other, complex):
        return g.op("Mul", self, g.const(float(other), self.dtype))
    if isinstance(other, ir.Value) and not is_complex(other):
        return g.op("Mul", self, unsqueeze(g, other, [-1]))  # real: scales both parts
    # (a + bi)(c + di) = (ac - bd) + (ad + bc)i
    a, b = _real_part(g, self), _imag_part(g, self)
    if isinstance(other, complex):
        c, d = g.const(other.real, self.dtype), g.const(other.imag, self.dtype)
    else:
        c, d = _real_part(g, other), _imag_part(g, other)
    real_part = g.op("Sub", g.op("Mul", a, c), g.op("Mul", b, d))
    imag_part = g.op("Add", g.op("Mul", a, d), g.op("Mul", b, c))
    return g.op("Concat", unsqueeze(g, real_part, [-1]), unsqueeze(g, imag_part, [-1]),
                axis_i=-1)


_or_complex("aten::abs", _complex_abs)
_or_complex("aten::mul", _complex_mul)
# torch resolves a lazy conjugation here; ours is always applied, so the layout stays as it is.
_or_complex("aten::resolve_conj", lambda g, self: g.op("Identity", self))
_or_complex("aten::clone", lambda g, self, **kwargs: g.op("Identity", self))


def _or_complex_axis(name: str) -> None:
    """``name`` (an op taking ``dim`` second) on a complex tensor: the real translation with
    the dim of the layout."""
    COMPLEX_LAYOUT_OPS.add(name.split(".")[0])

    def with_layout_dim(real_translation):
        def translation(g, self, dim=0, *args, **kwargs):
            if is_complex(self) and dim < 0:
                dim -= 1  # the layout's extra last axis
            return real_translation(g, self, dim, *args, **kwargs)
        translation.__doc__ = real_translation.__doc__
        return translation

    wrap_translations(name, with_layout_dim)


for _name in ("aten::slice", "aten::select", "aten::narrow", "aten::unsqueeze"):
    _or_complex_axis(_name)
