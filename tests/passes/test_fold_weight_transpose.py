import torch

import onnxport


def test_transposed_weight_is_stored_transposed():
    model = torch.nn.Linear(4, 3)
    x = torch.randn(4)  # 1-D input: MatMul with the transposed weight (N-D ones become Gemm)
    program = onnxport.export(model, (x,))
    ops = [n.op_type for n in program.model.graph]
    assert ops == ["MatMul", "Add"]
    initializers = program.model.graph.initializers
    assert "weight.T" in initializers and "weight" not in initializers
    assert list(initializers["weight.T"].shape) == [4, 3]
    torch.testing.assert_close(program(x)[0], model(x), rtol=1e-3, atol=1e-4)


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(300, 8)  # over the fold's limit for shared weights

    def forward(self, ids):
        hidden = self.embedding(ids)
        return torch.nn.functional.linear(hidden, self.embedding.weight)


def test_shared_weight_keeps_its_transpose():
    model = Tied().eval()
    ids = torch.tensor(7)  # one id: a 1-D hidden state, MatMul with the transposed weight
    program = onnxport.export(model, (ids,))
    assert "Transpose" in [n.op_type for n in program.model.graph]
    torch.testing.assert_close(program(ids)[0], model(ids), rtol=1e-3, atol=1e-4)


def test_shared_weight_as_gemm_needs_no_transpose():
    model = Tied().eval()
    ids = torch.randint(0, 300, (2, 3))
    program = onnxport.export(model, (ids,))
    # Gemm reads the [out, in] weight with transB: one copy, no Transpose.
    ops = [n.op_type for n in program.model.graph]
    assert "Transpose" not in ops and "Gemm" in ops, ops
    assert sum(t.const_value.size == 300 * 8 for t in program.model.graph.initializers.values()) == 1
    torch.testing.assert_close(program(ids)[0], model(ids), rtol=1e-3, atol=1e-4)
