"""``onnxport export transformers:FOLDER``: one small model per family, saved with
save_pretrained from a tiny config (random weights, nothing downloaded), exported with --verify,
its inputs and outputs named as transformers names them, and the written file run again at
another batch and sequence length and compared with eager."""

from __future__ import annotations

import copy
import inspect
import json

import numpy as np
import onnx
import onnxruntime
import pytest
import torch

from onnxport.cli import main

transformers = pytest.importorskip("transformers")
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)


def save(model, folder):
    model.save_pretrained(folder)
    return model.eval()


def export(folder, output, capsys, *options):
    code = main(["export", f"transformers:{folder}", "-o", str(output), "--verify", "--json",
                 *options])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["verification"]["passed"], summary
    return summary, onnx.load(str(output))


def dims(value):
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def feeds_of(inputs):
    feeds = {}
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            feeds[name] = value.numpy()
        elif name in ("past_key_values", "cache"):
            for layer, cached in enumerate(value.layers):
                feeds[f"past_key_values.{layer}.key"] = cached.keys.numpy()
                feeds[f"past_key_values.{layer}.value"] = cached.values.numpy()
    return feeds


def assert_file_matches_eager(output, model, inputs):
    """Run the written file on ``inputs`` (other sizes than exported) and compare every output
    with eager, in order."""
    session = onnxruntime.InferenceSession(str(output), providers=["CPUExecutionProvider"])
    feeds = feeds_of(inputs)
    assert sorted(feeds) == sorted(i.name for i in session.get_inputs())
    actual = session.run(None, feeds)
    eager_inputs = {k: copy.deepcopy(v) for k, v in inputs.items()}  # forward extends a cache
    with torch.no_grad():
        outputs = model(**eager_inputs)
    expected = [t for t in torch.utils._pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)]
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e.numpy(), rtol=1e-3, atol=1e-4)


def ids(batch, sequence, vocab=100, seed=1):
    return torch.randint(0, vocab, (batch, sequence), generator=torch.Generator().manual_seed(seed))


def test_bert_feature_extraction(tmp_path, capsys):
    torch.manual_seed(0)
    model = save(transformers.BertModel(transformers.BertConfig(
        vocab_size=100, max_position_embeddings=64, **SMALL)), tmp_path / "bert")
    summary, proto = export(tmp_path / "bert", tmp_path / "bert.onnx", capsys)
    assert summary["task"] == "feature-extraction"
    assert [i.name for i in proto.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [o.name for o in proto.graph.output] == ["last_hidden_state", "pooler_output"]
    assert dims(proto.graph.input[0]) == ["batch", "sequence"]
    assert dims(proto.graph.output[0]) == ["batch", "sequence", 32]
    mask = torch.ones(3, 4, dtype=torch.long)
    mask[0, 3] = 0
    assert_file_matches_eager(tmp_path / "bert.onnx", model, {
        "input_ids": ids(3, 4), "attention_mask": mask,
        "token_type_ids": torch.zeros(3, 4, dtype=torch.long)})


def test_gpt2_text_generation_with_past(tmp_path, capsys):
    import model_zoo

    torch.manual_seed(0)
    model = save(transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64)), tmp_path / "gpt2")
    summary, proto = export(tmp_path / "gpt2", tmp_path / "gpt2.onnx", capsys,
                            "--task", "text-generation-with-past")
    kv = [f"{layer}.{role}" for layer in range(2) for role in ("key", "value")]
    assert [i.name for i in proto.graph.input] == \
        ["input_ids", "attention_mask"] + [f"past_key_values.{n}" for n in kv]
    assert [o.name for o in proto.graph.output] == ["logits"] + [f"present.{n}" for n in kv]
    assert dims(proto.graph.input[0]) == ["batch", "sequence"]
    assert dims(proto.graph.input[2]) == ["batch", 4, "past_sequence", 8]
    assert dims(proto.graph.output[1]) == ["batch", 4, "past_sequence + sequence", 8]
    # other batch, new-token count (one: plain decoding) and past length; a left-padded row
    for batch, sequence, past in [(3, 1, 7), (1, 4, 2)]:
        inputs = model_zoo.kv_cache_inputs(model, batch, sequence, past, seed=batch + past)
        if "cache" in inspect.signature(model.forward).parameters:  # transformers 5.24's name
            inputs["cache"] = inputs.pop("past_key_values")
        assert_file_matches_eager(tmp_path / "gpt2.onnx", model, inputs)


def test_t5_text2text_generation(tmp_path, capsys):
    torch.manual_seed(0)
    model = save(transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0)), tmp_path / "t5")
    summary, proto = export(tmp_path / "t5", tmp_path / "t5.onnx", capsys)
    assert summary["task"] == "text2text-generation"
    assert [i.name for i in proto.graph.input] == ["input_ids", "attention_mask",
                                                   "decoder_input_ids"]
    assert [o.name for o in proto.graph.output] == ["logits", "encoder_last_hidden_state"]
    assert dims(proto.graph.input[2]) == ["batch", "decoder_sequence"]
    assert_file_matches_eager(tmp_path / "t5.onnx", model, {
        "input_ids": ids(3, 4), "attention_mask": torch.ones(3, 4, dtype=torch.long),
        "decoder_input_ids": ids(3, 2, seed=2), "use_cache": False})


def test_vit_image_classification(tmp_path, capsys):
    torch.manual_seed(0)
    model = save(transformers.ViTForImageClassification(transformers.ViTConfig(
        image_size=32, patch_size=8, num_labels=5, **SMALL)), tmp_path / "vit")
    summary, proto = export(tmp_path / "vit", tmp_path / "vit.onnx", capsys)
    assert summary["task"] == "image-classification"
    assert [i.name for i in proto.graph.input] == ["pixel_values"]
    assert [o.name for o in proto.graph.output] == ["logits"]
    # ViT checks the image size against its config's: only the batch is dynamic
    assert dims(proto.graph.input[0]) == ["batch", 3, 32, 32]
    assert dims(proto.graph.output[0]) == ["batch", 5]
    assert_file_matches_eager(tmp_path / "vit.onnx", model,
                              {"pixel_values": torch.randn(3, 3, 32, 32)})


def test_whisper_automatic_speech_recognition(tmp_path, capsys):
    torch.manual_seed(0)
    model = save(transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=32, max_target_positions=32,
        decoder_start_token_id=0, pad_token_id=0)), tmp_path / "whisper")
    summary, proto = export(tmp_path / "whisper", tmp_path / "whisper.onnx", capsys)
    assert summary["task"] == "automatic-speech-recognition"
    assert [i.name for i in proto.graph.input] == ["input_features", "decoder_input_ids"]
    assert [o.name for o in proto.graph.output] == ["logits", "encoder_last_hidden_state"]
    # Whisper takes exactly 2 * max_source_positions frames of audio
    assert dims(proto.graph.input[0]) == ["batch", 16, 64]
    assert dims(proto.graph.input[1]) == ["batch", "decoder_sequence"]
    assert_file_matches_eager(tmp_path / "whisper.onnx", model, {
        "input_features": torch.randn(3, 16, 64), "decoder_input_ids": ids(3, 3),
        "use_cache": False})


def test_clip_zero_shot_image_classification(tmp_path, capsys):
    torch.manual_seed(0)
    model = save(transformers.CLIPModel(transformers.CLIPConfig(
        text_config=dict(vocab_size=100, max_position_embeddings=32, bos_token_id=0,
                         eos_token_id=2, **SMALL),
        vision_config=dict(image_size=32, patch_size=8, **SMALL), projection_dim=16)),
        tmp_path / "clip")
    summary, proto = export(tmp_path / "clip", tmp_path / "clip.onnx", capsys)
    assert summary["task"] == "zero-shot-image-classification"
    assert [i.name for i in proto.graph.input] == ["input_ids", "attention_mask", "pixel_values"]
    outputs = [o.name for o in proto.graph.output]
    assert outputs[:4] == ["logits_per_image", "logits_per_text", "text_embeds", "image_embeds"]
    assert "text_model_output.last_hidden_state" in outputs
    assert dims(proto.graph.input[0]) == ["batch", "sequence"]
    assert_file_matches_eager(tmp_path / "clip.onnx", model, {
        "input_ids": ids(3, 4), "attention_mask": torch.ones(3, 4, dtype=torch.long),
        "pixel_values": torch.randn(3, 3, 32, 32)})


def test_task_options_static_and_shape(tmp_path, capsys):
    torch.manual_seed(0)
    model = save(transformers.BertForSequenceClassification(transformers.BertConfig(
        vocab_size=100, max_position_embeddings=64, num_labels=3, **SMALL)), tmp_path / "cls")
    summary, proto = export(tmp_path / "cls", tmp_path / "cls.onnx", capsys, "--static",
                            "--shape", "input_ids=1x9", "--output-names", "scores")
    assert summary["task"] == "text-classification"
    assert dims(proto.graph.input[0]) == [1, 9] and dims(proto.graph.input[1]) == [1, 9]
    assert [o.name for o in proto.graph.output] == ["scores"]
    assert_file_matches_eager(tmp_path / "cls.onnx", model, {
        "input_ids": ids(1, 9), "attention_mask": torch.ones(1, 9, dtype=torch.long),
        "token_type_ids": torch.zeros(1, 9, dtype=torch.long)})


@pytest.mark.parametrize("spec, options, expected", [
    ("transformers:{dir}/none", [], "no such folder"),
    ("transformers:{dir}", [], "has no config.json"),
    ("transformers:{dir}", ["--subfolder", "sub"], "/sub' has no config.json"),
    ("transformers:{dir}", ["--task", "seq2seq-lmm"], "did you mean seq2seq-lm"),
])
def test_transformers_usage_errors(tmp_path, capsys, spec, options, expected):
    code = main(["export", spec.format(dir=tmp_path), "-o", str(tmp_path / "m.onnx"), *options])
    assert code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and expected in err[0]


def test_optimum_style_sizes_tolerances_and_no_dynamic_axes(tmp_path, capsys):
    """optimum-cli's --batch_size/--sequence_length (either spelling), --no-dynamic-axes,
    --atol and --subfolder: the example is made at those sizes and exported static."""
    torch.manual_seed(0)
    model = save(transformers.BertModel(transformers.BertConfig(
        vocab_size=100, max_position_embeddings=64, **SMALL)), tmp_path / "repo" / "bert")
    summary, proto = export(tmp_path / "repo", tmp_path / "bert.onnx", capsys,
                            "--subfolder", "bert", "--no-dynamic-axes", "--batch_size", "3",
                            "--sequence-length", "5", "--atol", "1e-3", "--trust-remote-code")
    assert all(dims(value) == [3, 5] for value in proto.graph.input)
    assert dims(proto.graph.output[0]) == [3, 5, 32]
    assert "verify" in summary["stages"] and summary["verification"]["max_abs_diff"] < 1e-3
    assert_file_matches_eager(tmp_path / "bert.onnx", model, {
        "input_ids": ids(3, 5), "attention_mask": torch.ones(3, 5, dtype=torch.long),
        "token_type_ids": torch.zeros(3, 5, dtype=torch.long)})
    code = main(["export", f"transformers:{tmp_path / 'repo' / 'bert'}", "-o",
                 str(tmp_path / "h.onnx"), "--height", "32"])
    assert code == 2
    assert "--height: no input of this model has a height dim (its inputs: input_ids batch x " \
        "sequence" in capsys.readouterr().err
    assert not (tmp_path / "h.onnx").exists()
