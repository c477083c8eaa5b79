"""The supported range: one clear warning at import for a torch, transformers or onnxruntime
outside it, naming the version and the range; none for the versions CI installs."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import warnings

import pytest

from onnxport import _versions


@pytest.fixture
def pretend(monkeypatch):
    """Make importlib.metadata report other versions for some packages."""
    real = importlib.metadata.version

    def install(**versions):
        _versions.installed.cache_clear()
        monkeypatch.setattr(importlib.metadata, "version",
                            lambda name: versions.get(name) or real(name))

    yield install
    _versions.installed.cache_clear()


def test_versions_installed_here_are_supported():
    assert _versions.unsupported() == []


def test_an_old_torch_and_a_new_onnxruntime_give_one_warning_naming_both(pretend):
    pretend(torch="2.9.1+cu128", onnxruntime="1.99.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _versions.warn_if_unsupported()
    assert len(caught) == 1
    message = str(caught[0].message)
    assert issubclass(caught[0].category, _versions.UnsupportedVersionWarning)
    assert "torch 2.9.1 is older than the oldest supported, 2.11" in message
    assert "onnxruntime 1.99.0 is newer than the newest tested" in message
    assert "transformers" in message  # the whole range is stated


def test_the_oldest_and_newest_supported_give_no_warning(pretend):
    oldest = {p: lo + ".0" for p, (lo, _) in _versions.SUPPORTED.items()}
    pretend(**oldest)
    assert _versions.unsupported() == []
    newest = {p: hi + ".7" for p, (_, hi) in _versions.SUPPORTED.items()}
    pretend(**newest)
    assert _versions.unsupported() == []


def test_version_questions_compare_numbers_not_text(pretend):
    pretend(torch="2.11.0")
    assert _versions.torch_at_least("2.9") and _versions.torch_at_least("2.11")
    assert not _versions.torch_at_least("2.12")


def test_the_warning_comes_at_import():
    code = ("import importlib.metadata as m, warnings\n"
            "real = m.version\n"
            "m.version = lambda n: '2.8.0' if n == 'torch' else real(n)\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    import onnxport\n"
            "print([str(w.message) for w in caught if 'tested with' in str(w.message)])\n")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
    assert "torch 2.8.0 is older than the oldest supported" in output
