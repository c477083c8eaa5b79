"""find_mismatch bisects an export to the calls whose translation is wrong; the TorchScript
document's example, with only the import changed, finds both wrong relus."""

import logging

import pytest
import torch

import onnxport
import onnxport.verification
from onnxport.verification import GraphInfo, VerificationOptions, first_divergence


def test_the_documents_example(capsys):
    try:
        # The example of torch.onnx.verification.find_mismatch, "torch.onnx" -> "onnxport".
        import torch
        import onnxport.verification
        torch.manual_seed(0)
        opset_version = 15
        # Define a custom symbolic function for aten::relu.
        # The custom symbolic function is incorrect, which will result in mismatches.
        def incorrect_relu_symbolic_function(g, self):
            return self
        onnxport.register_custom_op_symbolic(
            "aten::relu",
            incorrect_relu_symbolic_function,
            opset_version=opset_version,
        )
        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layers = torch.nn.Sequential(
                    torch.nn.Linear(3, 4),
                    torch.nn.ReLU(),
                    torch.nn.Linear(4, 5),
                    torch.nn.ReLU(),
                    torch.nn.Linear(5, 6),
                )
            def forward(self, x):
                return self.layers(x)
        graph_info = onnxport.verification.find_mismatch(
            Model(),
            (torch.randn(2, 3),),
            opset_version=opset_version,
        )
    finally:
        onnxport.unregister_custom_op_symbolic("aten::relu", 15)
    printed = capsys.readouterr().out
    # The document's output, line for line (same seed, same numbers).
    expected_tree = """\
5 X   __2 X    __1 \u2713
id:  |  id: 0 |  id: 00
     |        |
     |        |__1 X (aten::relu)
     |           id: 01
     |
     |__3 X    __1 \u2713
        id: 1 |  id: 10
              |
              |__2 X     __1 X (aten::relu)
                 id: 11 |  id: 110
                        |
                        |__1 \u2713
                           id: 111"""
    assert expected_tree in printed
    assert "Mismatched elements: 12 / 12 (100.0%)" in printed
    assert "Greatest absolute difference: 0.2328854" in printed
    assert "['01', '110']" in printed and "{'aten::relu': 2}" in printed
    assert isinstance(graph_info, GraphInfo) and graph_info.has_mismatch()
    assert [leaf.id for leaf in graph_info.all_mismatch_leaf_graph_info()] == ["01", "110"]
    assert graph_info.find_partition("110").essential_node_kinds() == {"aten::relu"}
    assert not graph_info.find_partition("10").has_mismatch()


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.linear = torch.nn.Linear(64, 8)

    def forward(self, x):
        y = torch.sigmoid(self.conv(x))  # the line the wrong translation is found at
        y = torch.tanh(y * 2.0) + 1.0
        return self.linear(y.flatten(2)).mean(-1)


def test_a_wrong_translation_in_the_middle_is_found_with_its_line(registrations, capsys):
    def wrong_sigmoid(g, self):
        return g.op("HardSigmoid", self)

    registrations("aten::sigmoid", wrong_sigmoid, 13)
    torch.manual_seed(0)
    info = onnxport.verification.find_mismatch(_Block(), (torch.randn(1, 3, 8, 8),),
                                               opset_version=17)
    leaves = info.all_mismatch_leaf_graph_info()
    assert [leaf.essential_node_kinds() for leaf in leaves] == [{"aten::sigmoid"}]
    assert info.mismatch_node_kinds() == {"aten::sigmoid": 1}
    source = leaves[0].nodes[0].source
    assert source.startswith("test_find_mismatch.py:") or "/test_find_mismatch.py:" in source
    line = int(source.split(":")[1].split()[0])
    with open(__file__) as stream:
        assert "the line the wrong translation is found at" in stream.readlines()[line - 1]
    # Parts after the wrong one run on PyTorch's values, so they agree.
    assert sum(leaf.essential_node_count() for leaf in leaves) == 1
    capsys.readouterr()


def test_a_correct_export_has_no_mismatch(capsys):
    torch.manual_seed(0)
    info = onnxport.verification.find_mismatch(_Block(), (torch.randn(1, 3, 8, 8),))
    printed = capsys.readouterr().out
    assert not info.has_mismatch() and info.all_mismatch_leaf_graph_info() == []
    assert info.essential_node_count() >= 6
    assert "No mismatch found." in printed and "Tree:" in printed


def test_options_set_the_tolerance(registrations, capsys):
    def slightly_wrong_tanh(g, self):
        return g.op("Mul", g.op("Tanh", self), g.op("Constant", value_t=torch.tensor(1.01)))

    registrations("aten::tanh", slightly_wrong_tanh, 13)
    torch.manual_seed(0)
    args = (torch.randn(1, 3, 8, 8),)
    strict = onnxport.verification.find_mismatch(_Block(), args)
    assert strict.mismatch_node_kinds() == {"aten::tanh": 1}
    loose = onnxport.verification.find_mismatch(_Block(), args,
                                                options=VerificationOptions(rtol=0.05, atol=0.05))
    assert not loose.has_mismatch()
    with pytest.raises(onnxport.InvalidExportOptionsError, match="VerificationOptions"):
        onnxport.verification.find_mismatch(_Block(), args, options={"rtol": 1})
    capsys.readouterr()


def test_default_tolerance_is_the_fp32_one(registrations, capsys):
    # 5e-5 off: float rounding's order of size in a deep graph, within the project's fp32
    # tolerance (atol 1e-4); torch.onnx's atol 1e-7 flagged it near tanh's zeros.
    def tanh_off_by_5e_5(g, self):
        return g.op("Add", g.op("Tanh", self), g.op("Constant", value_t=torch.tensor(5e-5)))

    class Tanh(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(x) * 2.0

    registrations("aten::tanh", tanh_off_by_5e_5, 13)
    torch.manual_seed(0)
    args = (torch.randn(256),)  # about 10 values within 0.05 of tanh's zero
    assert not onnxport.verification.find_mismatch(Tanh(), args).has_mismatch()
    strict = VerificationOptions(atol=1e-7)
    assert onnxport.verification.find_mismatch(Tanh(), args, options=strict).has_mismatch()
    capsys.readouterr()


def test_first_divergence_names_the_first_wrong_call(registrations):
    def wrong_sigmoid(g, self):
        return g.op("HardSigmoid", self)

    registrations("aten::sigmoid", wrong_sigmoid, 13)
    x = torch.randn(1, 3, 8, 8)
    program = onnxport.export(_Block(), (x,))
    divergence = first_divergence(program, (x,), {})
    assert divergence is not None and divergence.kind == "aten::sigmoid"
    assert "test_find_mismatch.py" in divergence.describe()


def test_verify_failure_names_the_first_diverging_call(registrations):
    def wrong_sigmoid(g, self):
        return g.op("HardSigmoid", self)

    registrations("aten::sigmoid", wrong_sigmoid, 13)
    with pytest.raises(onnxport.VerificationError,
                       match=r"(?s)first differ at aten::sigmoid \(node 'sigmoid'.*"
                             r"test_find_mismatch\.py:\d+"):
        onnxport.export(_Block(), (torch.randn(1, 3, 8, 8),), verify=True)


def test_enable_and_disable_log(caplog, capsys):
    torch.manual_seed(0)
    try:
        onnxport.enable_log()
        with caplog.at_level(logging.DEBUG, logger="onnxport"):
            onnxport.verification.find_mismatch(torch.nn.Linear(3, 2), (torch.randn(2, 3),))
        assert any("part ''" in r.getMessage() for r in caplog.records)
        assert any(r.getMessage().startswith("capture took") for r in caplog.records)
        caplog.clear()
        onnxport.disable_log()
        with caplog.at_level(logging.DEBUG, logger="onnxport"):
            onnxport.verification.find_mismatch(torch.nn.Linear(3, 2), (torch.randn(2, 3),))
        assert not [r for r in caplog.records if r.name == "onnxport"]
    finally:
        onnxport.disable_log()
        logging.getLogger("onnxport").disabled = False
    capsys.readouterr()


class _InPlace(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = torch.sigmoid(self.linear(x))
        y.add_(1.0)  # writes into sigmoid's result: its value before must still be compared
        return torch.relu_(y * 3.0 - 4.0)


def test_in_place_ops_are_compared_with_the_value_before_the_write(registrations, capsys):
    torch.manual_seed(0)
    args = (torch.randn(3, 4),)
    assert not onnxport.verification.find_mismatch(_InPlace(), args).has_mismatch()

    def wrong_sigmoid(g, self):
        return g.op("HardSigmoid", self)

    registrations("aten::sigmoid", wrong_sigmoid, 13)
    info = onnxport.verification.find_mismatch(_InPlace(), args)
    assert info.mismatch_node_kinds() == {"aten::sigmoid": 1}
    capsys.readouterr()


def test_a_wrong_in_place_op_is_blamed_not_the_op_it_writes_into(registrations, capsys):
    def wrong_add_(g, self, other, alpha=None):
        return g.op("Sub", self, other)

    registrations("aten::add_", wrong_add_, 13)
    torch.manual_seed(0)
    info = onnxport.verification.find_mismatch(_InPlace(), (torch.randn(3, 4),))
    assert info.mismatch_node_kinds() == {"aten::add_.Tensor": 1}
    capsys.readouterr()
