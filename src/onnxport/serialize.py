"""Writes an ``onnx_ir`` model as one ONNX file (or a model file and a side file of weights)
without a second copy of its weights in memory, and checks where external weights are read from.

``ir.save`` builds the whole ``ModelProto`` (a copy of every weight) and then serializes it
(another copy). Here the model is serialized without its initializers, and each initializer
follows as a message of its own, its bytes written straight from the tensor's memory. Protobuf
merges repeated occurrences of an embedded message, so the file reads back as one model
with every initializer in ``graph.initializer``, in the graph's order.

With external data the weights go to a side file first (``write_external_data``, which also
hashes its bytes so the file can be named after its content) and the model then records where
each one is (``write_model(..., external=...)``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from typing import BinaryIO, Iterator, Mapping, NamedTuple

import onnx
import onnx_ir as ir

from onnxport.errors import ExternalDataError

# Field numbers in onnx.proto (ModelProto.graph, GraphProto.initializer, TensorProto.raw_data).
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_RAW_DATA = 9
_LENGTH_DELIMITED = 2


# Weights below this stay in the model file (shapes, scalars): readable there, not worth a seek
# (ir.save's threshold).
EXTERNAL_THRESHOLD = 256
# Large weights start on a 64 KiB boundary so ONNX Runtime can map them from the file directly
# (Windows' allocation granularity; a multiple of every page size).
_ALIGN_LARGE, _ALIGN_SMALL, _LARGE = 1 << 16, 64, 1 << 20


class ExternalSlice(NamedTuple):
    """Where one weight lies in the side file."""
    location: str
    offset: int
    length: int


def write_model(model: ir.Model, stream: BinaryIO, *, include_initializers: bool = True,
                external: Mapping[str, ExternalSlice] | None = None) -> None:
    """Serialize ``model`` into ``stream``; weights are written from their own memory, or, for
    the names in ``external``, recorded as lying in the side file at that place."""
    if not include_initializers:
        with _initializers_detached(model.graph, list(model.graph.initializers.values())):
            stream.write(ir.to_proto(model).SerializeToString())
        return
    streamed = [value for value in model.graph.initializers.values() if _streamable(value)]
    known = getattr(_known, "header", None)
    if known is not None and known[0] is model:
        stream.write(known[1])
    else:
        stream.write(model_header(model).SerializeToString())
    counter = _CountingWriter(stream)
    external = external or {}
    for value in streamed:
        tensor = value.const_value
        if value.name in external:
            proto = _tensor_header_proto(value.name, tensor)
            where = external[value.name]
            proto.data_location = onnx.TensorProto.EXTERNAL
            for key, text in (("location", where.location), ("offset", str(where.offset)),
                              ("length", str(where.length))):
                proto.external_data.add(key=key, value=text)
            body = _tag(_GRAPH_INITIALIZER) + _length_delimited(proto.SerializeToString())
            stream.write(_tag(_MODEL_GRAPH) + _length_delimited(body))
            continue
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


def model_header(model: ir.Model) -> onnx.ModelProto:
    """``model`` as :func:`write_model` writes it before its weights: without the initializers
    it streams (all but string tensors)."""
    streamed = [value for value in model.graph.initializers.values() if _streamable(value)]
    with _initializers_detached(model.graph, streamed):
        return ir.to_proto(model)


_known = threading.local()


@contextlib.contextmanager
def header_known(model: ir.Model, header: bytes) -> Iterator[None]:
    """Within this block :func:`write_model` writes ``header``, the bytes of
    ``model_header(model)`` that the export's check made already, instead of serializing the
    model a second time (a graph of many nodes takes longer to serialize than its weights to
    write). Whoever enters it must not change the model inside it; ``forget_header`` is for a
    change made there all the same."""
    _known.header = (model, header)
    try:
        yield
    finally:
        _known.header = None


def forget_header() -> None:
    _known.header = None


def write_external_data(model: ir.Model,
                        stream: BinaryIO) -> tuple[dict[str, tuple[int, int]], str]:
    """Write the weights worth a side file into ``stream`` (aligned, in the graph's order).

    Returns each one's (offset, length) and the SHA-256 of every byte written, so that the
    same weights always give the same side file name, hence the same model bytes."""
    writer = _HashingWriter(stream)
    places = {}
    for value in model.graph.initializers.values():
        if not _streamable(value) or value.const_value.nbytes < EXTERNAL_THRESHOLD:
            continue
        tensor = value.const_value
        align = _ALIGN_LARGE if tensor.nbytes >= _LARGE else _ALIGN_SMALL
        writer.write(bytes(-writer.written % align))
        start = writer.written
        tensor.tofile(writer)
        if writer.written - start != tensor.nbytes:
            raise RuntimeError(
                f"initializer {value.name!r}: wrote {writer.written - start} bytes, its shape "
                f"and dtype say {tensor.nbytes}")
        places[value.name] = (start, tensor.nbytes)
    return places, writer.hexdigest()


def external_tensors(model: ir.Model) -> Iterator[ir.ExternalTensor]:
    """Every tensor of the model (initializers and attributes, subgraphs too) read from a file."""
    graphs = [model.graph]
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for attribute in node.attributes.values():
            if attribute.type == ir.AttributeType.GRAPH:
                graphs.append(attribute.value)
            elif attribute.type == ir.AttributeType.GRAPHS:
                graphs.extend(attribute.value)
            elif attribute.type == ir.AttributeType.TENSOR:
                if isinstance(attribute.value, ir.ExternalTensor):
                    yield attribute.value
            elif attribute.type == ir.AttributeType.TENSORS:
                yield from (t for t in attribute.value if isinstance(t, ir.ExternalTensor))
    for graph in graphs:
        for value in graph.initializers.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                yield value.const_value


def check_external_location(tensor: ir.ExternalTensor) -> str:
    """The real path of ``tensor``'s data file, if it is a relative location of an existing file
    inside the model's folder (symlinks resolved); else an error: a model file must not make us
    read (or copy into a new model) a file elsewhere on the machine."""
    location = os.fspath(tensor.location)
    folder = os.fspath(tensor.base_dir) or os.getcwd()
    way_out = ("external data must be a file in the model's own folder (or below it), named "
               "relative to it; move the data file there and fix its location in the model")
    if os.path.isabs(location) or os.path.splitdrive(location)[0] or location.startswith("\\"):
        raise ExternalDataError(
            f"initializer {tensor.name!r}: its external data location {location!r} is an "
            f"absolute path; {way_out}")
    normal = os.path.normpath(location)
    if normal == os.pardir or normal.startswith(os.pardir + os.sep):
        raise ExternalDataError(
            f"initializer {tensor.name!r}: its external data location {location!r} leaves the "
            f"model's folder {folder!r}; {way_out}")
    real_folder = os.path.realpath(folder)
    real = os.path.realpath(os.path.join(folder, location))
    if os.path.commonpath([real_folder, real]) != real_folder:
        raise ExternalDataError(
            f"initializer {tensor.name!r}: its external data location {location!r} is a link to "
            f"{real!r}, outside the model's folder {folder!r}; {way_out}")
    if not os.path.isfile(real):
        raise ExternalDataError(
            f"initializer {tensor.name!r}: its external data file {location!r} is missing from "
            f"the model's folder {folder!r}; copy it there beside the model")
    return real


def _streamable(value: ir.Value) -> bool:
    # String tensors keep ir's own serialization; tensors read from a file (checked by the
    # caller) are copied like the others, never referenced where they were.
    tensor = value.const_value
    return tensor is not None and tensor.dtype != ir.DataType.STRING


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
    return _tensor_header_proto(name, tensor).SerializeToString()


def _tensor_header_proto(name: str, tensor: ir.TensorProtocol) -> onnx.TensorProto:
    proto = onnx.TensorProto(name=name, data_type=tensor.dtype.value,
                             dims=[int(d) for d in tensor.shape])
    if tensor.doc_string:
        proto.doc_string = tensor.doc_string
    for key, text in tensor.metadata_props.items():
        proto.metadata_props.add(key=key, value=text)
    return proto


def _length_delimited(payload: bytes) -> bytes:
    return _varint(len(payload)) + payload


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


class _HashingWriter(_CountingWriter):
    """Counts and hashes the bytes passed through (the side file is named after its content)."""

    def __init__(self, stream: BinaryIO):
        super().__init__(stream)
        self._hash = hashlib.sha256()

    def write(self, data) -> int:
        self._hash.update(memoryview(data).cast("B"))
        return super().write(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()
