"""torch.fft.* and torch.stft/istft (ops/spectral.py) as ONNX DFT/STFT, run in ONNX Runtime and
compared with eager; complex intermediates travel as a last axis of (real, imaginary)."""

from __future__ import annotations

import pytest
import torch

import onnxport
import onnxport.errors
from op_check import cases, check, check_opinfo, op_types, opinfo_cases

fft = torch.fft


def _real(z):
    return torch.view_as_real(z)


# Each case: (function of real inputs returning real tensors, input shape).
SIGNAL, IMAGE = (3, 16), (2, 6, 8)
FFT_CASES = {
    "rfft": (lambda x: _real(fft.rfft(x)), SIGNAL),
    "rfft_n_ortho": (lambda x: fft.rfft(x, n=10, norm="ortho").abs(), SIGNAL),
    "fft_dim0": (lambda x: _real(fft.fft(x, dim=0)), SIGNAL),
    "ifft_padded_forward": (lambda x: fft.ifft(x, n=20, norm="forward").imag, SIGNAL),
    "irfft_of_rfft": (lambda x: fft.irfft(fft.rfft(x)), SIGNAL),
    "irfft_odd_n": (lambda x: fft.irfft(fft.fft(x)[..., :7], n=11), SIGNAL),
    "hfft": (lambda x: fft.hfft(fft.fft(x)[..., :5]), SIGNAL),
    "ihfft": (lambda x: fft.ihfft(x, norm="ortho").imag, SIGNAL),
    "fft2": (lambda x: fft.fft2(x).abs(), IMAGE),
    "ifft2_ortho": (lambda x: fft.ifft2(x, norm="ortho").real, IMAGE),
    "rfftn": (lambda x: _real(fft.rfftn(x)), IMAGE),
    "irfftn_s": (lambda x: fft.irfftn(fft.rfftn(x), s=(6, 8)), IMAGE),
    "rfft2_cropped_padded": (lambda x: fft.rfft2(x, s=(4, 10)).real, IMAGE),
    "irfft2": (lambda x: fft.irfft2(fft.fft2(x)[..., :5]), IMAGE),
    "hfft2": (lambda x: fft.hfft2(fft.fft2(x)[..., :5], norm="forward"), IMAGE),
    "ihfft2": (lambda x: _real(fft.ihfft2(x)), IMAGE),
    "fftn_dims_0_2": (lambda x: fft.fftn(x, dim=(0, 2)).abs(), IMAGE),
    "ifft_of_view_as_complex": (lambda x: fft.ifft(torch.view_as_complex(x)).real, (4, 6, 2)),
    "slice_select_narrow_unsqueeze_of_complex":
        (lambda x: fft.fft(x).unsqueeze(-1)[:, -3:].select(-1, 0).narrow(-1, 1, 2).abs(),
         SIGNAL),
    "conj": (lambda x: _real(fft.fft(x).conj().resolve_conj() * 1), SIGNAL),
    "complex_times_complex_and_real": (
        lambda x: _real(fft.fft(x) * fft.fft(x.flip(-1)) * x * 0.5 * (2 - 1j)), SIGNAL),
}


@pytest.mark.parametrize("case", cases(FFT_CASES))
def test_fft(case):
    function, shape = case
    torch.manual_seed(0)
    program = check(function, torch.randn(*shape), opset=18)
    assert "DFT" in op_types(program)


@pytest.mark.parametrize("name", ["rfft_n_ortho", "irfft_odd_n", "hfft2", "ihfft2"])
@pytest.mark.parametrize("opset", [17, 20])  # DFT-20 takes the axis as an input
def test_fft_at_dft_opsets(name, opset):
    function, shape = FFT_CASES[name]
    torch.manual_seed(0)
    check(function, torch.randn(*shape), opset=opset)


def test_fft_with_a_dynamic_batch_axis():
    batch = torch.export.Dim("batch", min=1, max=64)
    check(lambda x: fft.irfft(fft.rfft(x, norm="ortho") * 1, n=16, norm="ortho"),
          torch.randn(3, 16), dynamic_shapes=({0: batch},), run_with=[(torch.randn(7, 16),)])


def _hann(n):
    return torch.hann_window(n)


STFT_CASES = {
    "stft": lambda x: _real(torch.stft(x, 16, hop_length=4, window=_hann(16),
                                       return_complex=True)),
    "stft_1d_no_window": lambda x: torch.stft(x[0], 16, return_complex=True).abs(),
    "stft_short_window_normalized": lambda x: _real(torch.stft(
        x, 16, hop_length=5, win_length=10, window=_hann(10), normalized=True,
        return_complex=True)),
    "stft_not_centered_two_sided": lambda x: torch.stft(
        x, 16, hop_length=4, center=False, onesided=False, return_complex=True).abs(),
    "stft_return_complex_false": lambda x: torch.stft(x, 16, hop_length=4, window=_hann(16),
                                                      return_complex=False),
    "spectrogram": lambda x: torch.stft(x, 16, hop_length=4, window=_hann(16),
                                        return_complex=True).abs().pow(2),
    "istft_round_trip": lambda x: torch.istft(
        torch.stft(x, 16, hop_length=4, window=_hann(16), return_complex=True), 16,
        hop_length=4, window=_hann(16)),
    "istft_1d_length": lambda x: torch.istft(
        torch.stft(x[0], 16, hop_length=4, return_complex=True), 16, hop_length=4, length=50),
    "istft_short_window_normalized": lambda x: torch.istft(
        torch.stft(x, 16, hop_length=4, win_length=12, window=_hann(12), normalized=True,
                   return_complex=True),
        16, hop_length=4, win_length=12, window=_hann(12), normalized=True),
}


@pytest.mark.parametrize("case", cases(STFT_CASES))
def test_stft_istft(case):
    torch.manual_seed(0)
    program = check(case, torch.randn(3, 64), opset=17)
    assert "STFT" in op_types(program) or "DFT" in op_types(program)


@pytest.mark.parametrize("name", ["stft", "stft_1d_no_window", "stft_return_complex_false"])
def test_stft_on_the_torchscript_path(name):
    # A traced aten::stft passes every argument of its newest schema (align_to_window too).
    torch.manual_seed(0)
    check(STFT_CASES[name], torch.randn(3, 64), opset=17, dynamo=False)


def test_stft_with_a_dynamic_batch_axis():
    batch = torch.export.Dim("batch", min=1, max=64)
    check(STFT_CASES["stft"], torch.randn(2, 64), dynamic_shapes=({0: batch},),
          run_with=[(torch.randn(5, 64),)])


class _Spectrogram(torch.nn.Module):
    def forward(self, x):
        return torch.stft(x, 8, return_complex=True).abs() + fft.rfft(x, n=8).abs()[..., None]


def test_below_opset_17_is_a_clear_error_naming_the_line():
    # The error names the op, the user's line, and the way out.
    with pytest.raises(onnxport.errors.TranslationError,
                       match=r"aten::\w+ \(at .*test_spectral.py:\d+ in forward\) needs "
                             r"opset_version >= 17"):
        onnxport.export(_Spectrogram(), (torch.randn(2, 32),), opset_version=16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_real_and_conj_of_real_tensors_below_opset_17(dtype):
    # Of a real tensor they are the tensor itself: no DFT is needed at any opset.
    x = (torch.randn(2, 5) * 3).to(dtype)
    check(lambda x: (torch.real(x) + 1, torch.conj_physical(x) * 2, x.conj() + 1), x, opset=13)


def test_a_complex_output_is_still_refused():
    with pytest.raises(onnxport.errors.TranslationError, match="complex"):
        onnxport.export(lambda x: fft.rfft(x), (torch.randn(2, 8),), opset_version=18)


# torch's OpInfo samples of the transforms with real outputs (the others return complex
# tensors, which a graph output cannot be): real inputs, n/s crops and pads, every norm.
@pytest.mark.parametrize("name, variant, dtype, subset", opinfo_cases(
    ["fft.irfft", "fft.hfft", "fft.irfft2", "fft.hfft2", "fft.irfftn", "fft.hfftn"]))
def test_opinfo(name, variant, dtype, subset):
    check_opinfo(name, variant, dtype, subset)
