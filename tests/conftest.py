import os
import sys

import pytest
import torch

# Imported here, before any worker starts: pytest-xdist's controller re-creates the workers'
# warnings by importing their classes' modules (onnxport.errors)
# from one thread per worker, and two threads importing onnxport at once can each meet the
# other's half-initialized package ("cannot import name 'parameter_names' from partially
# initialized module 'onnxport.capture'"), which ended a CI run.
import onnxport  # noqa: F401

for _name in onnxport.__all__:  # the package imports its parts on first use: all of them now
    getattr(onnxport, _name)

# model_zoo.py lives beside the tests and is shared with the benchmark.
sys.path.insert(0, os.path.dirname(__file__))
# Under pytest-xdist each worker gets one thread, so workers do not fight over the cores.
torch.set_num_threads(1 if "PYTEST_XDIST_WORKER" in os.environ else min(2, os.cpu_count() or 1))


@pytest.fixture
def registrations():
    """register_custom_op_symbolic for one test: what it registers is unregistered after it."""
    import onnxport

    made = []

    def register(name, fn, opset=9):
        onnxport.register_custom_op_symbolic(name, fn, opset)
        made.append((name, opset))

    yield register
    for name, opset in reversed(made):
        onnxport.unregister_custom_op_symbolic(name, opset)


@pytest.fixture(autouse=True)
def no_registration_leaks():
    """A test that leaves a symbolic registered would change every later export."""
    yield
    from onnxport.translate import default_registry

    custom = default_registry().custom
    assert not any(custom.lookup(name, 23) for name in custom.names()), \
        "a test leaked a registration"


@pytest.fixture
def untranslated(monkeypatch):
    """Takes ops out of the op library for one test. Tests of the unsupported-op paths need
    ops with no translation, and every op they picked so far got one later; as_strided_scatter
    and geqrf stay their examples here whatever the library learns."""
    from onnxport.translate import default_registry

    table = default_registry()._translations

    def remove(*names):
        for name in names:
            monkeypatch.delitem(table, name, raising=False)

    remove("aten::geqrf", "aten::as_strided_scatter", "prims::as_strided_scatter")
    return remove
