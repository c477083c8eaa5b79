"""Weights read from a checkpoint file only while they are written: ``save(model_state=path)``
streams them in chunks, so that saving a model holds a chunk in memory, not the checkpoint.

A ``.safetensors`` file is read by its header (the tensors' places in the file); a
``torch.save`` file is mapped (``torch.load(mmap=True)``) and each written chunk's pages are
released from the mapping once written (mapped pages count in the process's resident memory
until the mapping is dropped).
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import struct
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
from onnx_ir import _core

from onnxport.errors import InvalidExportOptionsError

_CHUNK = 16 * 2**20

_SAFETENSORS_DTYPES = {
    "F64": ir.DataType.DOUBLE, "F32": ir.DataType.FLOAT, "F16": ir.DataType.FLOAT16,
    "BF16": ir.DataType.BFLOAT16, "I64": ir.DataType.INT64, "I32": ir.DataType.INT32,
    "I16": ir.DataType.INT16, "I8": ir.DataType.INT8, "U8": ir.DataType.UINT8,
    "BOOL": ir.DataType.BOOL,
}


class DescribedTensor(_core.TensorBase):
    """A tensor known by its dtype and shape only; subclasses say what reading it does."""

    __slots__ = ("_dtype", "_shape")

    def __init__(self, name: str, dtype: ir.DataType, shape: ir.Shape | tuple[int, ...]):
        super().__init__(name=name)
        self._dtype, self._shape = dtype, ir.Shape(shape)

    @property
    def dtype(self) -> ir.DataType:
        return self._dtype

    @property
    def shape(self) -> ir.Shape:
        return self._shape

    @property
    def raw(self) -> None:
        return None


class CheckpointTensor(DescribedTensor):
    """A weight of a checkpoint: its dtype and shape, its bytes read when asked for."""

    __slots__ = ()

    def numpy(self) -> np.ndarray:
        return np.frombuffer(self.tobytes(), dtype=self._dtype.numpy()).reshape(
            tuple(self._shape))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def __dlpack__(self, *, stream: Any = None):
        return self.numpy().__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.numpy().__dlpack_device__()

    def tobytes(self) -> bytes:
        chunks: list[bytes] = []

        class _Collect:
            def write(self, data) -> int:
                chunks.append(bytes(data))
                return len(chunks[-1])

        self.tofile(_Collect())
        return b"".join(chunks)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self._dtype}, {list(self._shape)})"


class FileRangeTensor(CheckpointTensor):
    """A weight stored as raw bytes at ``offset`` in ``path`` (a .safetensors file)."""

    __slots__ = ("_path", "_offset")

    def __init__(self, name: str, dtype: ir.DataType, shape: tuple[int, ...], path: str,
                 offset: int):
        super().__init__(name, dtype, shape)
        self._path, self._offset = path, offset

    def tofile(self, file) -> None:
        # Plain reads go through the page cache: nothing stays in this process's memory.
        remaining = self.nbytes
        buffer = bytearray(min(_CHUNK, remaining))
        with open(self._path, "rb", buffering=0) as stream:
            stream.seek(self._offset)
            while remaining:
                count = stream.readinto(memoryview(buffer)[:min(len(buffer), remaining)])
                if not count:
                    raise InvalidExportOptionsError(
                        f"checkpoint {self._path!r} ends inside weight {self.name!r}: the file "
                        "is truncated")
                file.write(memoryview(buffer)[:count])
                remaining -= count


class MappedTensor(CheckpointTensor):
    """A weight of a ``torch.load(mmap=True)`` checkpoint, written chunk by chunk; each
    chunk's pages are given back to the file once written."""

    __slots__ = ("_tensor",)

    def __init__(self, name: str, tensor: torch.Tensor):
        from onnx_ir.tensor_adapters import from_torch_dtype

        super().__init__(name, from_torch_dtype(tensor.dtype), tuple(tensor.shape))
        self._tensor = tensor

    def tofile(self, file) -> None:
        # Only pages of the file's mapping may be released: released pages of a copy (a
        # non-contiguous weight made contiguous) would read back as zeros.
        mapped = self._tensor.is_contiguous()
        tensor = self._tensor.contiguous()
        data = tensor.reshape(-1).view(torch.uint8) if tensor.numel() else torch.empty(
            0, dtype=torch.uint8)
        for start in range(0, data.numel(), _CHUNK):
            chunk = data[start:start + _CHUNK]
            file.write(memoryview(chunk.numpy()))
            if mapped:
                _release_pages(chunk.data_ptr(), chunk.numel())


def read_checkpoint(path: str) -> dict[str, CheckpointTensor]:
    """The weights of a ``.safetensors`` or ``torch.save`` file, none of them read yet."""
    if path.endswith(".safetensors"):
        return _read_safetensors(path)
    mapped = True
    try:
        state = torch.load(path, weights_only=True, map_location="cpu", mmap=True)
    except RuntimeError as error:
        if "mmap" not in str(error):
            raise
        # The legacy (pre-1.6, not zip) format cannot be mapped: read it whole.
        state, mapped = torch.load(path, weights_only=True, map_location="cpu"), False
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise InvalidExportOptionsError(
            f"model_state {path!r} holds a {type(state).__name__}, not a state dict")
    if not mapped:
        return state
    return {name: MappedTensor(name, value) if isinstance(value, torch.Tensor)
            and value.layout == torch.strided else value for name, value in state.items()}


def _read_safetensors(path: str) -> dict[str, CheckpointTensor]:
    size = os.path.getsize(path)
    with open(path, "rb") as stream:
        head = stream.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else size
        if length > size - 8:
            raise InvalidExportOptionsError(
                f"model_state {path!r} is not a .safetensors file (its header length "
                f"{length} exceeds the file)")
        try:
            header = json.loads(stream.read(length))
        except ValueError as error:
            raise InvalidExportOptionsError(
                f"model_state {path!r}: its .safetensors header is not JSON ({error})") from None
    weights: dict[str, CheckpointTensor] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise InvalidExportOptionsError(
                f"model_state {path!r}: weight {name!r} has dtype {entry.get('dtype')!r}, "
                f"which onnxport does not read; it reads {', '.join(_SAFETENSORS_DTYPES)}")
        begin, end = entry["data_offsets"]
        tensor = FileRangeTensor(name, dtype, tuple(entry["shape"]), path, 8 + length + begin)
        if end - begin != tensor.nbytes or 8 + length + end > size:
            raise InvalidExportOptionsError(
                f"model_state {path!r}: weight {name!r} takes bytes {begin}..{end}, its shape "
                f"{entry['shape']} and dtype {entry['dtype']} need {tensor.nbytes}, or the "
                "file ends before it")
        weights[name] = tensor
    return weights


_PAGE = mmap.PAGESIZE
_MADV_DONTNEED = 4


def _release_pages(address: int, length: int) -> None:
    """Drop the mapping's pages over ``[address, address + length)`` from this process's
    memory (they are clean file pages: read again from the file if touched)."""
    if length <= 0 or not hasattr(os, "sysconf"):
        return
    start = address - address % _PAGE
    end = address + length
    try:
        libc = _libc()
        libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start),
                     ctypes.c_int(_MADV_DONTNEED))
    except (OSError, AttributeError):  # not Linux: the pages stay until the file is closed
        pass


_LIBC: Any = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC
