"""Writes an ``onnx_ir`` model as one ONNX file without a second copy of its weights in memory.

``ir.save`` builds the whole ``ModelProto`` (a copy of every weight) and then serializes it
(another copy). Here the model is serialized without its initializers, and each initializer
follows as a message of its own, its bytes written straight from the tensor's memory. Protobuf
merges repeated occurrences of an embedded message, so the file reads back as one model
with every initializer in ``graph.initializer``, in the graph's order.
"""

from __future__ import annotations

import contextlib
from typing import BinaryIO, Iterator

import onnx
import onnx_ir as ir

# Field numbers in onnx.proto (ModelProto.graph, GraphProto.initializer, TensorProto.raw_data).
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_RAW_DATA = 9
_LENGTH_DELIMITED = 2


def write_model(model: ir.Model, stream: BinaryIO, *, include_initializers: bool = True) -> None:
    """Serialize ``model`` into ``stream``; weights are written from their own memory."""
    if not include_initializers:
        with _initializers_detached(model.graph, list(model.graph.initializers.values())):
            stream.write(ir.to_proto(model).SerializeToString())
        return
    streamed = [value for value in model.graph.initializers.values() if _streamable(value)]
    with _initializers_detached(model.graph, streamed):
        stream.write(ir.to_proto(model).SerializeToString())
    counter = _CountingWriter(stream)
    for value in streamed:
        tensor = value.const_value
        header = _tensor_header(value.name, tensor)
        raw_field = _tag(_TENSOR_RAW_DATA) + _varint(tensor.nbytes)
        tensor_length = len(header) + len(raw_field) + tensor.nbytes
        initializer = _tag(_GRAPH_INITIALIZER) + _varint(tensor_length)
        stream.write(_tag(_MODEL_GRAPH) + _varint(len(initializer) + tensor_length))
        stream.write(initializer + header + raw_field)
        counter.written = 0
        tensor.tofile(counter)
        if counter.written != tensor.nbytes:
            raise RuntimeError(
                f"initializer {value.name!r}: wrote {counter.written} bytes, its shape and dtype "
                f"say {tensor.nbytes}")


def _streamable(value: ir.Value) -> bool:
    # String tensors and tensors already on disk keep ir's own serialization.
    tensor = value.const_value
    return tensor is not None and not isinstance(tensor, ir.ExternalTensor) \
        and tensor.dtype != ir.DataType.STRING


@contextlib.contextmanager
def _initializers_detached(graph: ir.Graph, values: list[ir.Value]) -> Iterator[None]:
    """The graph without ``values`` among its initializers, restored in the same order."""
    if not values:
        yield
        return
    order = list(graph.initializers.values())
    detached = {value.name for value in values}
    for name in detached:
        del graph.initializers[name]
    try:
        yield
    finally:
        graph.initializers.clear()
        for value in order:
            graph.initializers[value.name] = value


def _tensor_header(name: str, tensor: ir.TensorProtocol) -> bytes:
    """The TensorProto fields of ``tensor`` but its data."""
    proto = onnx.TensorProto(name=name, data_type=tensor.dtype.value,
                             dims=[int(d) for d in tensor.shape])
    if tensor.doc_string:
        proto.doc_string = tensor.doc_string
    for key, text in tensor.metadata_props.items():
        proto.metadata_props.add(key=key, value=text)
    return proto.SerializeToString()


def _tag(field: int) -> bytes:
    return _varint(field << 3 | _LENGTH_DELIMITED)


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class _CountingWriter:
    """Passes writes through to ``stream`` and counts the bytes (tensors write themselves)."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self.written = 0

    def write(self, data) -> int:
        self.written += memoryview(data).nbytes
        return self._stream.write(data)
