"""Time and peak memory of exporting a ~1B-parameter Llama-architecture model under
enable_fake_mode (no weights are ever made), optionally saving it with real random weights.

    PYTHONPATH=src python benchmarks/large_model.py [--save DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import torch


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def llama_config():
    from transformers import LlamaConfig

    # Llama-3.2-1B's shape (~1.2B parameters), built in code: no download.
    return LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                       num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                       max_position_embeddings=2048, tie_word_embeddings=False, use_cache=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--save", help="folder to save into, with random real weights "
                                       "(needs ~5 GB of memory and disk)")
    parser.add_argument("--sequence", type=int, default=16)
    options = parser.parse_args()

    import onnxport
    from transformers import LlamaForCausalLM

    config = llama_config()
    start = time.perf_counter()
    with onnxport.enable_fake_mode() as context:
        model = LlamaForCausalLM(config)
    parameters = sum(p.numel() for p in model.parameters())
    created = time.perf_counter() - start
    print(f"created {parameters / 1e9:.2f}B parameters (fake) in {created:.1f} s, "
          f"peak RSS {peak_rss_gb():.2f} GB")

    input_ids = torch.randint(0, config.vocab_size, (1, options.sequence))
    start = time.perf_counter()
    program = onnxport.dynamo_export(
        model, input_ids, export_options=onnxport.ExportOptions(fake_context=context))
    exported = time.perf_counter() - start
    print(f"exported in {exported:.1f} s ({program.stage_seconds}), {len(program.model.graph)} "
          f"nodes, {len(program.missing_weights())} weights to attach, "
          f"peak RSS {peak_rss_gb():.2f} GB")

    if options.save:
        real = LlamaForCausalLM(config)  # random weights, ~4.9 GB in fp32
        start = time.perf_counter()
        path = os.path.join(options.save, "llama.onnx")
        # Non-persistent buffers (inv_freq) are not in state_dict(): pass them too.
        program.save(path, model_state={**real.state_dict(), **dict(real.named_buffers())})
        print(f"saved with real weights in {time.perf_counter() - start:.1f} s, "
              f"peak RSS {peak_rss_gb():.2f} GB: {sorted(os.listdir(options.save))}")


if __name__ == "__main__":
    main()
