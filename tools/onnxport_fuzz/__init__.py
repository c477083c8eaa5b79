"""Differential fuzzer: random small programs exported with onnxport and compared with eager.
Test tooling, not part of the installed onnxport package (it runs generated source)."""
