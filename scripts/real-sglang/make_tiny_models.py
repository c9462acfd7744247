"""Write tiny model directories that the real SGLang serves on the CPU.

Run with the real-SGLang env's python (it needs ``tokenizers``, which SGLang pins)::

    python scripts/real-sglang/make_tiny_models.py OUT_DIR

Nothing is downloaded: every directory holds a ``config.json``, a byte-level BPE tokenizer trained
here on a small built-in text (``tokenizer.json`` + ``tokenizer_config.json`` with a ChatML chat
template), a ``generation_config.json`` and ``sglbench_model.json`` (what the directory is for).
Every token id is a real token of the tokenizer (``vocab_size`` == tokenizer size, otherwise decoded
texts come back empty).

Weights (``model.safetensors``) are written for the dense models and the speculative drafts: each
tensor drawn from its own generator, seeded by the model's seed and the tensor's name, so the files are
the same on every run. Matrices and embeddings ~ N(0, 1/fan_in) (LeCun, a usual initialisation scale;
at N(0, 0.02) the 2-layer models' greedy output falls into a loop of a few tokens), attention output
projections 100x smaller (ATTN_OUT_SCALE, why there), norms 1, biases 0;
the lm_head rows of the special tokens are 0, so a greedy decode never ends early (a logit of 0 stays
below the largest of 630 others). Untrained, the texts are gibberish, but a temperature-0 continuation
of 64 tokens is not periodic (47 of 64 tokens distinct for "The quick brown fox jumps over the lazy
dog."), so comparing a speculative decode with a
plain one token for token means something. The drafts are chosen for their agreement with the target:
the STANDALONE draft *is* the target (same weights: accepts every draft), the perturbed one is the
target plus noise (accepts part), the EAGLE/EAGLE3 heads are untrained (accept little). The hybrid
models and the DFLASH draft get no weights: SGLang fills them (``--load-format dummy``; serve.sh picks it
for a directory without ``model.safetensors``).

Models (all share one tokenizer, so any of them can draft for any other):
  tiny-qwen2        dense Qwen2ForCausalLM, 2 layers, hidden 128, 4 heads / 2 KV heads
  tiny-qwen3        dense Qwen3ForCausalLM (q/k-norm), same size: the project's main family
  tiny-qwen2-draft  Qwen2ForCausalLM, tiny-qwen2's own weights: a STANDALONE draft that accepts all
  tiny-qwen2-draft-perturbed  tiny-qwen2 plus noise: a STANDALONE draft that accepts part
  tiny-eagle-qwen2  1-layer LlamaForCausalLMEagle: an EAGLE draft for tiny-qwen2
  tiny-eagle3-qwen3 1-layer LlamaForCausalLMEagle3: an EAGLE3 draft for tiny-qwen3
  tiny-dflash-qwen3 1-layer DFlashDraftModel (block 4): a DFLASH draft for tiny-qwen3
  tiny-qwen3-next   hybrid Qwen3NextForCausalLM (Gated DeltaNet linear attention + full attention, MoE)
  tiny-gpt-oss      hybrid sliding-window GptOssForCausalLM (sliding + full layers, MoE, bf16, no mxfp4)
Which of them the CPU engine actually serves is recorded in
tests/fixtures/real_sglang/<version>/spec_algorithms.json and docs/real-sglang.md.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

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

    standalone = {"kind": "draft", "algorithm": "STANDALONE", "target": "tiny-qwen2"}
    out["tiny-qwen2-draft"] = (qwen2, standalone | {"weights": "the target's"})
    noise = f"the target's + {PERTURB} x N(0, 1/fan_in) per matrix"
    out["tiny-qwen2-draft-perturbed"] = (qwen2, standalone | {"weights": noise})

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


# --- weights ------------------------------------------------------------------------------------------

# Attention output projections start 100x smaller (GPT-2 style residual-projection scaling, taken far):
# SGLang's EAGLE-style draft input (STANDALONE included) is shifted by one token, so a draft never sees
# the first prompt token. At full scale these random models are so sensitive to it that a draft that
# *is* the target agreed on only ~52% of next tokens without it (HF transformers, fp32); at 0.01 ~98%,
# with greedy outputs still varied (47 of 64 tokens distinct for the serve prompt).
ATTN_OUT_SCALE = 0.01
PERTURB = 0.1  # the perturbed draft's noise, relative to each matrix's own scale (tuned: accepts part)
# model -> (seed, the model whose weights it starts from, or None)
WEIGHTS: dict[str, tuple[int, str | None]] = {
    "tiny-qwen2": (1, None),
    "tiny-qwen3": (2, None),
    "tiny-qwen2-draft": (0, "tiny-qwen2"),
    "tiny-qwen2-draft-perturbed": (3, "tiny-qwen2"),
    "tiny-eagle-qwen2": (4, None),
    "tiny-eagle3-qwen3": (5, None),
}


def decoder_layer(prefix: str, c: dict, in_dim: int, first_norm: bool) -> dict[str, tuple[int, ...]]:
    """Checkpoint names and shapes of one decoder layer (HF Llama/Qwen naming)."""
    h, d = c["hidden_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    shapes: dict[str, tuple[int, ...]] = {
        f"{prefix}.self_attn.q_proj.weight": (q, in_dim),
        f"{prefix}.self_attn.k_proj.weight": (kv, in_dim),
        f"{prefix}.self_attn.v_proj.weight": (kv, in_dim),
        f"{prefix}.self_attn.o_proj.weight": (h, q),
        f"{prefix}.post_attention_layernorm.weight": (h,),
        f"{prefix}.mlp.gate_proj.weight": (c["intermediate_size"], h),
        f"{prefix}.mlp.up_proj.weight": (c["intermediate_size"], h),
        f"{prefix}.mlp.down_proj.weight": (h, c["intermediate_size"]),
    }
    if first_norm:
        shapes[f"{prefix}.input_layernorm.weight"] = (h,)
    if c.get("attention_bias"):
        shapes |= {f"{prefix}.self_attn.{x}_proj.bias": (n,) for x, n in (("q", q), ("k", kv), ("v", kv))}
    if c["model_type"] == "qwen3":
        shapes |= {f"{prefix}.self_attn.q_norm.weight": (d,), f"{prefix}.self_attn.k_norm.weight": (d,)}
    return shapes


def checkpoint_shapes(c: dict) -> dict[str, tuple[int, ...]]:
    """What SGLang 0.5.23 loads for each architecture (srt/models/qwen2.py, qwen3.py, llama_eagle.py,
    llama_eagle3.py)."""
    h, vocab = c["hidden_size"], c["vocab_size"]
    arch = c["architectures"][0]
    if arch in ("Qwen2ForCausalLM", "Qwen3ForCausalLM"):
        shapes = {
            "model.embed_tokens.weight": (vocab, h),
            "model.norm.weight": (h,),
            "lm_head.weight": (vocab, h),
        }
        for i in range(c["num_hidden_layers"]):
            shapes |= decoder_layer(f"model.layers.{i}", c, h, first_norm=True)
        return shapes
    if arch == "LlamaForCausalLMEagle":  # fc(embedding ++ target hidden); layer 0 has no input norm
        shapes = {"embed_tokens.weight": (vocab, h), "fc.weight": (h, 2 * h), "fc.bias": (h,)}
        return shapes | decoder_layer("layers.0", c, h, first_norm=False)
    if (
        arch == "LlamaForCausalLMEagle3"
    ):  # fc(3 target hidden states); layer 0 attends over embedding ++ hidden
        shapes = {
            "embed_tokens.weight": (vocab, h),
            "fc.weight": (h, 3 * c["target_hidden_size"]),
            "norm.weight": (h,),
            "lm_head.weight": (c["draft_vocab_size"], h),
            "layers.0.hidden_norm.weight": (h,),
        }
        return shapes | decoder_layer("layers.0", c, 2 * h, first_norm=True)
    raise ValueError(f"no weights for {arch}")


def tensor_seed(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") & (2**63 - 1)


def init_tensor(seed: int, name: str, shape: tuple[int, ...]) -> Any:  # a torch.Tensor (torch imported late)
    import torch

    if name.endswith("norm.weight"):
        return torch.ones(shape)
    if name.endswith(".bias"):
        return torch.zeros(shape)
    std = shape[-1] ** -0.5  # LeCun: N(0, 1 / fan_in)
    if name.endswith("o_proj.weight"):
        std *= ATTN_OUT_SCALE
    return torch.randn(shape, generator=torch.Generator().manual_seed(tensor_seed(seed, name))) * std


def model_weights(name: str, config: dict, special_ids: list[int], done: dict[str, dict]) -> dict:
    """The state dict of one model (float32; written in its config's dtype)."""
    seed, base = WEIGHTS[name]
    if base is not None:
        weights = {k: v.clone() for k, v in done[base].items()}
        if seed:  # a perturbed copy: noise on every matrix, norms and biases kept
            for k, v in weights.items():
                if v.dim() == 2:
                    v += init_tensor(seed, k, tuple(v.shape)) * PERTURB
        return weights
    weights = {k: init_tensor(seed, k, shape) for k, shape in checkpoint_shapes(config).items()}
    if "lm_head.weight" in weights:
        head = weights["lm_head.weight"]
        head[[i for i in special_ids if i < head.shape[0]]] = 0
    return weights


def write_weights(d: Path, weights: dict, dtype: str) -> None:
    import torch
    from safetensors.torch import save_file

    tensors = {k: v.to(getattr(torch, dtype)).contiguous() for k, v in sorted(weights.items())}
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    (d / "model.safetensors").chmod(0o644)


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
    done: dict[str, dict] = {}  # weights written so far (a draft may copy its target's)
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
        if name in WEIGHTS:
            done[name] = model_weights(name, config, list(ids.values()), done)
            write_weights(d, done[name], config["torch_dtype"])
            meta["weights"] = meta.get("weights", f"seed {WEIGHTS[name][0]}, N(0, 1/fan_in)")
        else:
            meta["weights"] = "none (served with --load-format dummy)"
        (d / "sglbench_model.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"  {name}: {meta['architecture']}, vocab {vocab}, {config['num_hidden_layers']} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
