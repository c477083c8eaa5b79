"""FuseDynamicQuantizedMatMul: the Gemm of a dynamically quantized linear becomes MatMulInteger
on the integers, with the numbers of the float form it replaces."""

import warnings

import torch

import onnxport


def _model():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(torch.nn.Linear(12, 6), torch.nn.Linear(6, 3, bias=False)),
            {torch.nn.Linear}, dtype=torch.qint8).eval()


def test_gemm_on_dequantized_operands_becomes_matmul_integer():
    x = torch.randn(5, 12)
    unfused = onnxport.export(_model(), (x,), optimize=False)
    fused = onnxport.export(_model(), (x,))
    assert [n.op_type for n in unfused.model.graph].count("Gemm") == 2
    types = [n.op_type for n in fused.model.graph]
    assert types.count("MatMulInteger") == 2 and "Gemm" not in types, types
    # The int8 weight is stored once, transposed; the float one is never written.
    initializers = fused.model.graph.initializers.values()
    assert sum(v.const_value.size for v in initializers if v.dtype.name == "FLOAT") < 16
    assert sum(v.const_value.size for v in initializers if v.dtype.name == "INT8") == \
        12 * 6 + 6 * 3 + 1  # (+ the zero point both weights share)
    # Integer accumulation is exact; the float Gemm rounds: equal up to float rounding.
    torch.testing.assert_close(fused(x)[0], unfused(x)[0], rtol=1e-5, atol=1e-5)
