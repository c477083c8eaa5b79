"""Expected failures of the OpInfo conformance suite at opset 18: one line per (op, dtype) with
its reason. tests/conformance fails when a listed pair passes, so the table only shrinks.
Regenerate the lines with benchmarks/op_conformance.py --write-expected (reasons kept)."""

EXPECTED_FAILURES: dict[tuple[str, str], str] = {
    ('linalg.eigh', 'float32'): "clear-error: eigenvectors are unique only up to sign (LAPACK's signs follow no rule a graph can reproduce), so they are refused; eigvalsh passes",
    ('matrix_exp', 'float32'): "mismatch on 1 of 125 entries (3.5e-4 at a value of 0.149, in a matrix with entries near 1e5): eager's own float32 error there is 3.6e-4 against float64, ours 1e-6",
    ('pca_lowrank', 'float32'): "clear-error: needs linalg_svd's singular vectors, refused as for linalg.eigh",
    ('svd_lowrank', 'float32'): "clear-error: needs linalg_svd's singular vectors, refused as for linalg.eigh",
    ('tensor_split', 'float32'): 'clear-error: a 0-d tensor of sections makes the number of outputs depend on its value; an ONNX graph has a fixed number of outputs',
    ('tensor_split', 'int64'): 'clear-error: a 0-d tensor of sections makes the number of outputs depend on its value; an ONNX graph has a fixed number of outputs',
    ('tensor_split', 'bool'): 'clear-error: a 0-d tensor of sections makes the number of outputs depend on its value; an ONNX graph has a fixed number of outputs',
}
