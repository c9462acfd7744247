"""Write tiny model directories that the real SGLang serves on the CPU with ``--load-format dummy``.

Run with the real-SGLang env's python (it needs ``tokenizers``, which SGLang pins)::

    python scripts/real-sglang/make_tiny_models.py OUT_DIR

Nothing is downloaded: every directory holds a ``config.json``, a byte-level BPE tokenizer trained
here on a small built-in text (``tokenizer.json`` + ``tokenizer_config.json`` with a ChatML chat
template), a ``generation_config.json`` and ``sglbench_model.json`` (what the directory is for).
There are no weights; SGLang fills them with random values (``--load-format dummy``), so texts
are gibberish but every token id is a real token of the tokenizer (``vocab_size`` == tokenizer size,
otherwise decoded texts come back empty).

Models (all share one tokenizer, so any of them can draft for any other):
  tiny-qwen2        dense Qwen2ForCausalLM, 2 layers, hidden 128, 4 heads / 2 KV heads
  tiny-qwen3        dense Qwen3ForCausalLM (q/k-norm), same size: the project's main family
  tiny-qwen2-draft  1-layer Qwen2ForCausalLM: a STANDALONE draft for tiny-qwen2
  tiny-eagle-qwen2  1-layer LlamaForCausalLMEagle: an EAGLE draft for tiny-qwen2
  tiny-eagle3-qwen3 1-layer LlamaForCausalLMEagle3: an EAGLE3 draft for tiny-qwen3
  tiny-dflash-qwen3 1-layer DFlashDraftModel (block 4): a DFLASH draft for tiny-qwen3
  tiny-qwen3-next   hybrid Qwen3NextForCausalLM (Gated DeltaNet linear attention + full attention, MoE)
  tiny-gpt-oss      hybrid sliding-window GptOssForCausalLM (sliding + full layers, MoE, bf16, no mxfp4)
Which of them the CPU engine actually serves is recorded in
tests/fixtures/real_sglang/<version>/spec_algorithms.json and docs/real-sglang.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CONTEXT_LENGTH = 2048  # small, so "longer than the context" inputs stay cheap
VOCAB_TARGET = 1024  # BPE merges stop here (or earlier when the text runs out)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]  # mask: DFLASH

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

TEXT = """\
The benchmark starts a server, waits until it answers, then sends prompts at a fixed concurrency.
Each request streams tokens back; the client records the time to the first token and the time
between tokens, and the server reports how many tokens it accepted from the draft model.
Speculative decoding proposes several tokens with a small draft model and verifies them with the
target model in one forward pass. When the draft is right, several tokens are accepted at once.
A hybrid model mixes linear attention layers, which keep a fixed-size state per request, with full
attention layers, which keep a key and value cache that grows with the sequence.
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
Solve for x: 3x + 5 = 20. The answer is x = 5. What is 12 times 12? It is 144.
def add(a, b):
    return a + b
for i in range(10):
    print(i, i * i)
{"model": "tiny", "prompt": "hello", "max_tokens": 16, "stream": true}
Once upon a time, a small model ran on a machine without a graphics card, and it was slow but it
answered every question with great confidence and very little sense.
"""


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [line for line in TEXT.splitlines() if line.strip()]
    tok.train_from_iterator(corpus * 4, trainer)
    return tok


def tokenizer_config() -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": CONTEXT_LENGTH,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "special": True,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "single_word": False,
            }
            for i, t in enumerate(SPECIAL_TOKENS)
        },
    }


def base_config(vocab: int, ids: dict[str, int]) -> dict:
    return {
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_act": "silu",
        "max_position_embeddings": CONTEXT_LENGTH,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": "bfloat16",
        "vocab_size": vocab,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }


def model_configs(vocab: int, ids: dict[str, int]) -> dict[str, tuple[dict, dict]]:
    """name -> (config.json, sglbench_model.json)."""
    out: dict[str, tuple[dict, dict]] = {}

    qwen2 = base_config(vocab, ids) | {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "attention_bias": True,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": 2,
    }
    out["tiny-qwen2"] = (qwen2, {"kind": "dense", "family": "qwen2"})

    qwen3 = base_config(vocab, ids) | {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": 2,
    }
    out["tiny-qwen3"] = (qwen3, {"kind": "dense", "family": "qwen3"})

    draft = qwen2 | {"num_hidden_layers": 1, "max_window_layers": 1}
    out["tiny-qwen2-draft"] = (draft, {"kind": "draft", "algorithm": "STANDALONE", "target": "tiny-qwen2"})

    eagle = base_config(vocab, ids) | {
        "architectures": ["LlamaForCausalLMEagle"],
        "model_type": "llama",
        "num_hidden_layers": 1,
        "mlp_bias": False,
        "pretraining_tp": 1,
    }
    out["tiny-eagle-qwen2"] = (eagle, {"kind": "draft", "algorithm": "EAGLE", "target": "tiny-qwen2"})

    eagle3 = base_config(vocab, ids) | {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "num_hidden_layers": 1,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "draft_vocab_size": vocab,
        "target_hidden_size": 128,
    }
    out["tiny-eagle3-qwen3"] = (eagle3, {"kind": "draft", "algorithm": "EAGLE3", "target": "tiny-qwen3"})

    dflash = base_config(vocab, ids) | {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "num_hidden_layers": 1,
        "layer_types": ["full_attention"],
        "block_size": 4,
        "num_target_layers": qwen3["num_hidden_layers"],
        "dflash_config": {"mask_token_id": ids["<|mask|>"], "target_layer_ids": [0, 1]},
    }
    out["tiny-dflash-qwen3"] = (dflash, {"kind": "draft", "algorithm": "DFLASH", "target": "tiny-qwen3"})

    nxt = base_config(vocab, ids) | {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "num_hidden_layers": 4,
        "full_attention_interval": 4,  # layers 0-2 linear attention, layer 3 full attention
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "head_dim": 64,
        "partial_rotary_factor": 0.25,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "decoder_sparse_step": 1,
        "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "norm_topk_prob": True,
        "mlp_only_layers": [],
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
    }
    out["tiny-qwen3-next"] = (nxt, {"kind": "hybrid", "family": "qwen3_next"})

    gpt_oss = base_config(vocab, ids) | {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "attention_bias": True,
        "head_dim": 32,
        "intermediate_size": 128,
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 128,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "experts_per_token": 2,
        "initial_context_length": CONTEXT_LENGTH,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.9,
        "swiglu_limit": 7.0,
    }
    out["tiny-gpt-oss"] = (gpt_oss, {"kind": "hybrid", "family": "gpt_oss", "attention": "hybrid_swa"})
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    vocab = tok.get_vocab_size(with_added_tokens=True)
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    gen_config = {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "do_sample": False,
    }
    for name, (config, meta) in model_configs(vocab, ids).items():
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        tok.save(str(d / "tokenizer.json"))
        (d / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
        (d / "special_tokens_map.json").write_text(
            json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, indent=2) + "\n"
        )
        (d / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (d / "generation_config.json").write_text(json.dumps(gen_config, indent=2) + "\n")
        meta = {
            "architecture": config["architectures"][0],
            "vocab_size": vocab,
            "context_length": CONTEXT_LENGTH,
            "layers": config["num_hidden_layers"],
        } | meta
        (d / "sglbench_model.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"  {name}: {meta['architecture']}, vocab {vocab}, {config['num_hidden_layers']} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
