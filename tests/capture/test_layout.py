"""The shape of capture/ (STYLE.md, issue 18): no module past 800 lines, and the TorchScript
front end takes from the torch.export one only its public names."""

import ast
import pathlib

import onnxport.capture

CAPTURE = pathlib.Path(onnxport.capture.__file__).parent


def test_no_capture_module_passes_800_lines():
    long = {str(path.relative_to(CAPTURE)): count for path in CAPTURE.rglob("*.py")
            if (count := len(path.read_text().splitlines())) > 800}
    assert not long, long


def test_the_torchscript_package_imports_no_private_name_of_another_capture_module():
    private = []
    for path in (CAPTURE / "torchscript").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.startswith("onnxport.capture.") and \
                    not node.module.startswith("onnxport.capture.torchscript"):
                private += [f"{path.name}: {node.module}.{alias.name}" for alias in node.names
                            if alias.name.startswith("_")]
    assert not private, private
