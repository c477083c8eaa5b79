"""The versions of the libraries onnxport works with: the supported (tested) range, one warning
at import when an installed version lies outside it, and the one place where a stage asks which
version it runs with (``torch_at_least("2.12")``), instead of probing attributes here and there.

The range is what CI tests: its first leg installs the newest versions pip resolves, its second
the oldest ones (``.ci/oldest.txt``, the lower bounds of ``pyproject.toml``)."""

from __future__ import annotations

import functools
import importlib.metadata
import re
import warnings

# package: (oldest supported, newest tested), as major.minor.
SUPPORTED = {
    "torch": ("2.11", "2.14"),
    "transformers": ("5.17", "5.24"),
    "onnxruntime": ("1.30", "1.32"),
}


class UnsupportedVersionWarning(UserWarning):
    """An installed torch, transformers or onnxruntime lies outside the range onnxport is
    tested with; the message names each and the range."""


@functools.cache
def installed(package: str) -> tuple[int, ...] | None:
    """The installed version of ``package`` as numbers (``(2, 14, 1)``), None when it is not
    installed. Read from its metadata, without importing it."""
    try:
        text = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
    return _numbers(text)


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def at_least(package: str, version: str) -> bool:
    """Whether ``package`` is installed at ``version`` or later."""
    have = installed(package)
    return have is not None and have >= _numbers(version)


def torch_at_least(version: str) -> bool:
    return at_least("torch", version)


def transformers_at_least(version: str) -> bool:
    return at_least("transformers", version)


def onnxruntime_at_least(version: str) -> bool:
    return at_least("onnxruntime", version)


def unsupported() -> list[str]:
    """One line per installed package outside its supported range."""
    lines = []
    for package, (oldest, newest) in SUPPORTED.items():
        have = installed(package)
        if have is None:
            continue
        shown = ".".join(map(str, have))
        if have[:2] < _numbers(oldest):
            lines.append(f"{package} {shown} is older than the oldest supported, {oldest} "
                         f"(pip install -U '{package}>={oldest}')")
        elif have[:2] > _numbers(newest):
            lines.append(f"{package} {shown} is newer than the newest tested, {newest}")
    return lines


def warn_if_unsupported() -> None:
    """One warning naming every installed package outside the supported range."""
    lines = unsupported()
    if lines:
        ranges = ", ".join(f"{p} {lo} to {hi}" for p, (lo, hi) in SUPPORTED.items())
        warnings.warn("onnxport is tested with " + ranges + "; here " + "; ".join(lines) +
                      ". Exports may fail or differ; report what breaks.",
                      UnsupportedVersionWarning, stacklevel=3)
