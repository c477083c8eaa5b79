"""The op conformance suite: PyTorch's OpInfo samples exported one by one and compared with
eager, shared by tests/conformance and benchmarks/op_conformance.py. Test tooling, not part of
the installed onnxport package (it evaluates generated source)."""
