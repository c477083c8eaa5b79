"""Differential fuzzer: random small programs exported with onnxport and compared with eager."""
