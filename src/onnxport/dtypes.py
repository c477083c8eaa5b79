"""torch dtypes in the forms a captured graph carries them, read by every stage: c10's
ScalarType codes (what the TorchScript path passes for a dtype argument) and the integers that
hold a quantized dtype's values. ``compat.jit_scalar_type.JitScalarType`` is built on them."""

from __future__ import annotations

import torch

# c10's ScalarType numbering (torch.onnx's JitScalarType numbers the same); 20, UNDEFINED, has
# no dtype.
SCALAR_TYPE_DTYPES = {
    0: torch.uint8, 1: torch.int8, 2: torch.short, 3: torch.int, 4: torch.int64, 5: torch.half,
    6: torch.float, 7: torch.double, 8: torch.complex32, 9: torch.complex64,
    10: torch.complex128, 11: torch.bool, 12: torch.qint8, 13: torch.quint8, 14: torch.qint32,
    15: torch.bfloat16, 16: torch.float8_e5m2, 17: torch.float8_e4m3fn,
    18: torch.float8_e5m2fnuz, 19: torch.float8_e4m3fnuz,
}

# torch's quantized dtypes as the integers that hold their values: what a quantized tensor is
# in an ONNX graph (QuantizeLinear's output), and the dtype a fake run stands in for.
QUANTIZED_AS_INTEGER = {torch.quint8: torch.uint8, torch.qint8: torch.int8,
                        torch.qint32: torch.int32}
