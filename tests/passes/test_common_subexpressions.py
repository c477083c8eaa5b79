"""Two random draws of the same input stay two draws; equal deterministic nodes still merge."""

import torch

import onnxport


class TwoDropouts(torch.nn.Module):
    def forward(self, x):
        a = torch.nn.functional.dropout(x, 0.5, True)
        b = torch.nn.functional.dropout(x, 0.5, True)
        return a, b, x.exp() + x.exp()


def test_two_training_dropouts_of_one_input_draw_two_masks():
    x = torch.ones(64, 64)
    program = onnxport.export(TwoDropouts(), (x,), training=onnxport.TrainingMode.TRAINING)
    kinds = [n.op_type for n in program.model.graph]
    assert kinds.count("Dropout") == 2, kinds
    assert kinds.count("Exp") == 1, kinds  # the deterministic duplicate is still merged
    assert all(not n.attributes.get("_onnxport_draw") for n in program.model.graph)
    a, b, c = program(x)
    # Each is a dropout of ones: zeros and 2s, about half each.
    for mask in (a, b):
        assert set(mask.unique().tolist()) <= {0.0, 2.0}
        assert 0.4 < (mask == 0).float().mean().item() < 0.6
    # Two independent masks of 4096 elements agree on about half of them, never on all.
    assert (a == b).float().mean().item() < 0.75
    torch.testing.assert_close(c, 2 * x.exp())


def test_an_output_merged_into_an_inner_value_keeps_its_type():
    # remainder computes fmod's Mod inside: the returned fmod becomes that unshaped inner value.
    x, y = torch.tensor([2.5, -2.5, 7.0]), torch.tensor([0.7, 0.7, -3.0])
    program = onnxport.export(lambda x, y: (torch.remainder(x, y), torch.fmod(x, y)), (x, y))
    assert [n.op_type for n in program.model.graph].count("Mod") == 1
    assert [list(v.shape) for v in program.model.graph.outputs] == [[3], [3]]
    torch.testing.assert_close(program(x, y)[1], torch.fmod(x, y), rtol=1e-3, atol=1e-4)
