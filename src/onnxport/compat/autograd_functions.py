"""torch.autograd.Function calls kept whole by capture (capture/quirks/autograd_functions.py):
their translation runs the Function's own ``symbolic``, or a ``prim::PythonOp`` symbolic a user
registered, or keeps the call as one ``prim::PythonOp`` node (operator_export_type)."""

from __future__ import annotations

import inspect
from typing import Any, Callable
import warnings

from onnxport.compat.custom_symbolics import call_symbolic
from onnxport.compat.enums import OperatorExportTypes
from onnxport.compat.symbolic_graph import wrap
from onnxport.errors import TranslationError
from onnxport.translate.builder import GraphBuilder
from onnxport.translate.registry import default_registry, translates

# The node meta key under which capture records the Function's call (class and arguments).
_FUNCTION_CALL_META = "onnxport_autograd_function"


@translates("onnxport::autograd_function")
def autograd_function(g: GraphBuilder, tensors: list, call_name: str) -> Any:
    """autograd_function(Tensor[] tensors, str call) -> Tensor[]"""
    call = g.node_meta[_FUNCTION_CALL_META]
    cls = call.cls
    inputs = call.bind([wrap(t) for t in tensors])
    python_op = default_registry().custom.lookup("prim::PythonOp", g.opset)
    if python_op is not None:
        symbolic_fn = getattr(python_op.function, "symbolic_fn", python_op.function)
        try:
            return call_symbolic(symbolic_fn, g, inputs,
                                 {"name": cls.__name__, "module": cls.__module__,
                                  "inplace": False},
                                 f"the symbolic function registered for prim::PythonOp "
                                 f"(autograd Function {cls.__qualname__})")
        except TranslationError:
            if not has_symbolic(cls):
                raise
    if has_symbolic(cls):
        return call_symbolic(cls.symbolic, g, inputs, {},
                             f"the symbolic of autograd Function {cls.__qualname__}")
    # operator_export_type=ONNX_FALLTHROUGH / ONNX_ATEN_FALLBACK: one node, as torch.onnx's
    # prim::PythonOp.
    count = len(g.expected) if isinstance(g.expected, (list, tuple)) else 1
    result = g.op("prim::PythonOp", *tensors, outputs=count, name=cls.__name__,
                  module=cls.__module__)
    return list(result) if count > 1 else [result]


def has_symbolic(cls: type) -> bool:
    """True when ``cls`` has a static ``symbolic`` that can run on onnxport's ``g``."""
    symbolic = getattr(cls, "symbolic", None)
    if not callable(symbolic):
        return False
    if _calls_torch_onnx(symbolic):
        warnings.warn(
            f"{cls.__qualname__}.symbolic calls torch.onnx's own functions (written for "
            f"torch.onnx's TorchScript graph), which onnxport does not run: the ops of its "
            f"forward are exported instead. To choose the ONNX ops, register a symbolic for "
            f"'prim::PythonOp' with onnxport.register_custom_op_symbolic.",
            UserWarning, stacklevel=4)  # the line that applies the Function
        return False
    return True


def kept_autograd_functions(opset: int, operator_export_type) -> Callable[[type], bool]:
    """Which autograd Functions capture keeps as one call: those with a ``symbolic``, all when
    a ``prim::PythonOp`` symbolic is registered or when they may stay one node; the others are
    inlined into their ops."""
    keep_all = operator_export_type in (OperatorExportTypes.ONNX_FALLTHROUGH,
                                        OperatorExportTypes.ONNX_ATEN_FALLBACK) or \
        default_registry().custom.lookup("prim::PythonOp", opset) is not None
    return lambda cls: keep_all or has_symbolic(cls)


def _calls_torch_onnx(function: Callable) -> bool:
    """Whether ``function`` imports or reads ``torch.onnx`` (its symbolic_opsetN functions
    take torch's own graph objects; transformers' XSoftmax and XDropout call them)."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return False
    codes, names = [code], set()
    while codes:
        current = codes.pop()
        names.update(current.co_names)
        codes.extend(c for c in current.co_consts if hasattr(c, "co_names"))
    return "onnx" in names or any(name.startswith("torch.onnx") for name in names)

