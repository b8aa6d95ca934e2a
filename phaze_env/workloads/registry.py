"""Built-in workloads from published hyper-parameters, and user-defined ones from any HF config class.

A :class:`Workload` is a plain, JSON-round-trippable value: a name, a HuggingFace model/config class
pair, the config's keyword arguments, and its default sequence length. Models are only ever built on
the meta device from the config, so nothing is downloaded and memory stays constant whatever the size.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

# Model class and config class per family (HF transformers 5.x names).
FAMILIES: dict[str, tuple[str, str]] = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config"),
    "opt": ("OPTForCausalLM", "OPTConfig"),
    "llama": ("LlamaForCausalLM", "LlamaConfig"),
    "bert": ("BertForMaskedLM", "BertConfig"),
    "mixtral": ("MixtralForCausalLM", "MixtralConfig"),
    "qwen2_moe": ("Qwen2MoeForCausalLM", "Qwen2MoeConfig"),
    "qwen3_moe": ("Qwen3MoeForCausalLM", "Qwen3MoeConfig"),
    "olmoe": ("OlmoeForCausalLM", "OlmoeConfig"),
    "deepseek_v2": ("DeepseekV2ForCausalLM", "DeepseekV2Config"),
    "deepseek_v3": ("DeepseekV3ForCausalLM", "DeepseekV3Config"),
    "nemotron": ("NemotronForCausalLM", "NemotronConfig"),
}

# Narayanan et al. 2021 §5.1 (and the Megatron-LM README): vocabulary 51,200, sequence length 2048.
MEGATRON_VOCAB = 51200
MEGATRON_SEQ = 2048
NARAYANAN_TABLE1 = "Narayanan et al. 2021 (SC'21, arXiv:2104.04473), Table 1"
KORTHIKANTI_TABLE3 = "Korthikanti et al. 2022 (arXiv:2205.05198), Table 3"
DGXC_GPT3_RECIPE = ("NVIDIA/dgxc-benchmarking nemo_megatron/gpt3_175b_hydra.yaml (commit 35a9aecc8d5b17d99d80f52f38c75ade0dbab7ae): "
                    "num_layers 96, hidden_size 12288, ffn_hidden_size 49152, num_attention_heads 96, encoder_seq_length "
                    "2048, GPT2BPETokenizer, make_vocab_size_divisible_by 128, tensor_model_parallel_size 4, "
                    "bias_activation_fusion true, transformer_engine true")
NEMO_GPT3_VOCAB = 50688
"""The vocabulary NeMo's GPT-3 175B recipe trains with (``DGXC_GPT3_RECIPE``): GPT-2 BPE's 50,257 tokens padded, as
Megatron's ``_vocab_size_with_padding`` does, to a multiple of make_vocab_size_divisible_by × tensor-parallel size =
128 × 4 = 512: 99 × 512."""

# The config key holding the number of transformer layers, per config class.
LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


HEAD_COUNT_KEYS = ("num_attention_heads", "n_head")
MOE_KNOB_DEFAULTS = {"capacity_factor": 1.0, "load_imbalance": 1.0}


@dataclass(frozen=True)
class Workload:
    """A model to train: family, HF config keyword arguments, default sequence length."""

    name: str
    family: str
    config: tuple[tuple[str, Any], ...]  # sorted (key, value) pairs, hashable
    seq_len: int
    published_params: int | None = None  # published parameter count, for validation
    source: str = ""
    model_class: str = ""
    config_class: str = ""
    # Mixture-of-experts load (ignored by dense models; see docs/moe.md). Each expert's token buffer is
    # capacity_factor × the uniform share tokens·top_k/experts, tokens beyond it dropped (Fedus et al. 2021,
    # Switch Transformer §2.2); None: dropless. The busiest expert receives load_imbalance × the uniform share.
    capacity_factor: float | None = MOE_KNOB_DEFAULTS["capacity_factor"]
    load_imbalance: float = MOE_KNOB_DEFAULTS["load_imbalance"]

    def __post_init__(self) -> None:
        if self.seq_len <= 0:
            raise ValueError(f"workload {self.name!r}: sequence length must be positive, got {self.seq_len}")
        if self.capacity_factor is not None and not self.capacity_factor > 0:
            raise ValueError(f"workload {self.name!r}: capacity factor must be positive or None (dropless), "
                             f"got {self.capacity_factor!r}")
        if not self.load_imbalance >= 1:
            raise ValueError(f"workload {self.name!r}: load imbalance is the busiest expert's load over the uniform "
                             f"share, at least 1, got {self.load_imbalance!r}")
        if not self.model_class or not self.config_class:
            if self.family not in FAMILIES:
                raise ValueError(f"workload {self.name!r}: unknown family {self.family!r}; known: {sorted(FAMILIES)}")
            model_class, config_class = FAMILIES[self.family]
            object.__setattr__(self, "model_class", self.model_class or model_class)
            object.__setattr__(self, "config_class", self.config_class or config_class)

    @property
    def config_dict(self) -> dict[str, Any]:
        return dict(self.config)

    @property
    def num_layers(self) -> int:
        cfg = self.config_dict
        for key in LAYER_COUNT_KEYS:
            if key in cfg:
                return int(cfg[key])
        raise ValueError(f"workload {self.name!r}: config has none of {LAYER_COUNT_KEYS}")

    @property
    def num_heads(self) -> int | None:
        """Attention heads from the config (``num_attention_heads`` or GPT-2's ``n_head``); ``None`` if it names none."""
        cfg = self.config_dict
        return next((int(cfg[key]) for key in HEAD_COUNT_KEYS if key in cfg), None)

    @property
    def num_experts(self) -> int:
        """Routed experts per MoE layer from the config (``num_local_experts``, ``num_experts`` or DeepSeek's
        ``n_routed_experts``); 0 for a dense model."""
        cfg = self.config_dict
        keys = ("num_local_experts", "num_experts", "n_routed_experts")
        return int(next((cfg[key] for key in keys if cfg.get(key)), 0))

    def expert_parallel_error(self, expert_parallel: int) -> str:
        """Why ``expert_parallel`` ranks cannot split this model's routed experts ("" when they can: ``e`` divides
        them; a dense model runs only ``e = 1``) — the one rule the layer chain's builder
        (:func:`~phaze_env.workloads.build.model_graph`) and the plan rules (:mod:`phaze_env.placement.rules`) apply."""
        if isinstance(expert_parallel, bool) or not isinstance(expert_parallel, int) or expert_parallel < 1:
            return f"an expert-parallel degree is a positive integer, got {expert_parallel!r}"
        if expert_parallel == 1 or (self.num_experts and self.num_experts % expert_parallel == 0):
            return ""
        return (f"expert-parallel degree e={expert_parallel} does not divide {self.name}'s "
                + (f"{self.num_experts} experts" if self.num_experts else "experts (dense: e=1)"))

    @property
    def leading_dense_layers(self) -> int:
        """Dense layers before the repeated MoE layers (DeepSeek's ``first_k_dense_replace``); 0 for most models."""
        return int(self.config_dict.get("first_k_dense_replace") or 0)

    @property
    def expert_load_factor(self) -> float:
        """Tokens the busiest expert processes, over the uniform share: its load, capped by its capacity.

        Every expert is costed as the busiest one — the expert-parallel rank that sets the step time.
        """
        if self.capacity_factor is None:
            return self.load_imbalance
        return min(self.load_imbalance, self.capacity_factor)

    @property
    def layer_count_key(self) -> str:
        cfg = self.config_dict
        return next(key for key in LAYER_COUNT_KEYS if key in cfg)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "name": self.name, "family": self.family, "config": self.config_dict, "seq_len": self.seq_len,
            "published_params": self.published_params, "source": self.source,
            "model_class": self.model_class, "config_class": self.config_class,
        }
        # The MoE knobs only when set: a dense workload's dict (and every cache key made from it) is unchanged.
        for knob in ("capacity_factor", "load_imbalance"):
            if getattr(self, knob) != MOE_KNOB_DEFAULTS[knob]:
                data[knob] = getattr(self, knob)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        data = dict(data)
        data["config"] = _freeze(data["config"])
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _freeze(config: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((str(k), tuple(v) if isinstance(v, list) else v) for k, v in config.items()))


def _gpt2(name: str, hidden: int, layers: int, heads: int, seq: int, params: int, source: str) -> Workload:
    config = dict(n_embd=hidden, n_layer=layers, n_head=heads, n_inner=4 * hidden, vocab_size=50257, n_positions=seq)
    return Workload(name, "gpt2", _freeze(config), seq, params, source)


def _megatron_gpt(name: str, hidden: int, layers: int, heads: int, params: int, source: str,
                  vocab: int = MEGATRON_VOCAB) -> Workload:
    """A Megatron-LM GPT: GPT-2 architecture, vocabulary 51,200 (``vocab``: another stack's padded vocabulary),
    sequence 2048, FFN 4·hidden, tied head.

    Narayanan et al. 2021 (SC'21, arXiv:2104.04473) §5.1: "All models use a vocabulary size of 51,200
    (multiple of 1024) and a sequence length of 2048"; Korthikanti et al. 2022 use the same shapes.
    The GeLU is PyTorch's one-kernel tanh approximation (``gelu_pytorch_tanh``, the same function as GPT-2's
    ``gelu_new``): like Megatron-LM's fused bias-GeLU kernel it keeps only its input for backward, the
    "8sbh" Korthikanti et al. 2022 §4.1 count, where HF's ``gelu_new`` written as eight operators keeps
    their intermediates (measured: 1T at t = 8, 1,174 → 912 MB of stash per layer).
    """
    config = dict(n_embd=hidden, n_layer=layers, n_head=heads, n_inner=4 * hidden, vocab_size=vocab,
                  n_positions=MEGATRON_SEQ, activation_function="gelu_pytorch_tanh")
    return Workload(name, "gpt2", _freeze(config), MEGATRON_SEQ, params, source)


def _opt(name: str, hidden: int, layers: int, heads: int, params: int, source: str, **extra: Any) -> Workload:
    config = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, ffn_dim=4 * hidden,
                  vocab_size=50272, max_position_embeddings=2048, word_embed_proj_dim=hidden)
    config.update(extra)
    return Workload(name, "opt", _freeze(config), 2048, params, source)


def _llama(name: str, hidden: int, layers: int, heads: int, ffn: int, params: int, source: str,
           kv_heads: int | None = None) -> Workload:
    """Llama 2: vocabulary 32,000, untied head, 4,096 positions; ``kv_heads`` key/value heads (grouped-query
    attention; default one per query head)."""
    config = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=kv_heads or heads,
                  intermediate_size=ffn, vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=False)
    return Workload(name, "llama", _freeze(config), 4096, params, source)


LLAMA3_VOCAB = 128256
LLAMA3_KV_HEADS = 8
LLAMA3_POSITIONS = 131072  # Llama 3.1's context after long-context training
LLAMA3_SEQ = 8192  # Dubey et al. 2024 §3.4.1: pre-training sequence length 8K (then extended to 128K)
LLAMA3_SOURCE = "Dubey et al. 2024 (The Llama 3 Herd of Models, arXiv:2407.21783), Table 3"


def _llama3(name: str, hidden: int, layers: int, heads: int, ffn: int, params: int, source: str) -> Workload:
    """Llama 3.1: grouped-query attention with 8 key/value heads, vocabulary 128,256, untied head, 128k positions.

    Its ``rope_scaling`` (frequencies rescaled for 128k) changes no shape or FLOP and is left out.
    """
    config = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  num_key_value_heads=LLAMA3_KV_HEADS, intermediate_size=ffn, vocab_size=LLAMA3_VOCAB,
                  max_position_embeddings=LLAMA3_POSITIONS, tie_word_embeddings=False)
    return Workload(name, "llama", _freeze(config), LLAMA3_SEQ, params, source)


MAXTEXT_V4_COMMIT = "d3f68fe2c"
"""AI-Hypercomputer/maxtext (then google/maxtext) commit of 2023-05-01 whose README published the TPU v4 results
(22B on 1–8 × v4-128, 52B on 1–2 × v4-384) with the run scripts MaxText/configs/{1,2,4,8}xv4-128.sh and
{1,2}xv4-384.sh."""


def _maxtext(name: str, hidden: int, layers: int, heads: int, ffn: int, params: int, config: str) -> Workload:
    """MaxText's 2023 decoder (``MaxText/layers.py`` and ``configs/base.yml`` at :data:`MAXTEXT_V4_COMMIT`): pre-norm
    blocks of T5-style RMS norm, multi-head attention with head_dim 256 (so ``heads·256`` need not equal ``hidden``),
    a plain (ungated) ReLU MLP, no biases, input and output embeddings shared (``logits_via_embedding``), vocabulary
    32,768, sequence 1024 (``max_target_length``). Written as HF's Nemotron, the one HF decoder with a free head_dim and
    an ungated MLP: the same matmul shapes; its norms (LayerNorm with a bias) and rotary positions stand in for the
    RMS norm and T5's relative position biases (elementwise work, < 0.001 % of the parameters)."""
    config_kwargs = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         head_dim=256, intermediate_size=ffn, hidden_act="relu", vocab_size=32768, tie_word_embeddings=True,
                         max_position_embeddings=1024)
    return Workload(name, "nemotron", _freeze(config_kwargs), 1024, params,
                    f"AI-Hypercomputer/maxtext README at {MAXTEXT_V4_COMMIT} ('{name.split('-')[1].upper()} model'); {config} "
                    "(base.yml at the same commit: base_emb_dim 2048, base_num_heads 8, base_mlp_dim 8192, "
                    "base_num_decoder_layers 16, head_dim 256, each multiplied by scale)")


BUILTIN: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("bert-large", "bert", _freeze(dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                                     intermediate_size=4096, vocab_size=30522, max_position_embeddings=512)),
                 512, 335_000_000, "HF bert-large-uncased config; ≈ 335 M with the MLM head (Devlin et al. 2019 report 340 M)"),
        _gpt2("gpt2-xl", 1600, 48, 25, 1024, 1_557_611_200, "HF gpt2-xl config; Radford et al. 2019 (1.5 B); HF num_parameters()=1,557,611,200"),
        _opt("opt-350m", 1024, 24, 16, 331_196_416, "HF facebook/opt-350m config (post-LN, word_embed_proj_dim 512); Zhang et al. 2022",
             word_embed_proj_dim=512, do_layer_norm_before=False),
        _opt("opt-1.3b", 2048, 24, 32, 1_315_758_080, "HF facebook/opt-1.3b config; Zhang et al. 2022 (1.3 B)"),
        _opt("opt-6.7b", 4096, 32, 32, 6_658_473_984, "HF facebook/opt-6.7b config; Zhang et al. 2022 (6.7 B)"),
        _llama("llama2-7b", 4096, 32, 32, 11008, 6_738_415_616, "HF meta-llama/Llama-2-7b-hf config; Touvron et al. 2023 (7 B)"),
        _llama("llama2-13b", 5120, 40, 40, 13824, 13_015_864_320, "HF meta-llama/Llama-2-13b-hf config; Touvron et al. 2023 (13 B)"),
        # Grouped-query attention with 8 key/value heads (Touvron et al. 2023 §2.2 for 34B and 70B). Llama 2 34B was
        # not released: its shape is foundation-model-stack/fms-fsdp fms_fsdp/utils/config_utils.py "llama2_34b"
        # (Code Llama 34B's layers with fms's default 32,000 vocabulary), the model of the fms-fsdp benchmarks.
        _llama("llama2-34b", 8192, 48, 64, 22016, 33_743_970_304,
               "foundation-model-stack/fms-fsdp fms_fsdp/utils/config_utils.py 'llama2_34b' (emb_dim 8192, 64 heads, "
               "8 kv heads, 48 layers, FFN 22016, vocabulary 32000)", kv_heads=8),
        _llama("llama2-70b", 8192, 80, 64, 28672, 68_976_648_192,
               "HF meta-llama/Llama-2-70b-hf config (80 layers, hidden 8192, 64 heads, 8 kv heads, FFN 28672); "
               "Touvron et al. 2023 (70 B); num_parameters()=68,976,648,192", kv_heads=8),
        _llama3("llama3-8b", 4096, 32, 32, 14336, 8_030_261_248,
                f"{LLAMA3_SOURCE} (8B: 32 layers, d_model 4096, FFN 14336, 32 heads, 8 KV heads); "
                "HF meta-llama/Llama-3.1-8B config.json; num_parameters()=8,030,261,248"),
        _llama3("llama3-70b", 8192, 80, 64, 28672, 70_553_706_496,
                f"{LLAMA3_SOURCE} (70B: 80 layers, d_model 8192, FFN 28672, 64 heads, 8 KV heads); "
                "HF meta-llama/Llama-3.1-70B config.json; num_parameters()=70,553,706,496"),
        _llama3("llama3-405b", 16384, 126, 128, 53248, 405_853_388_800,
                f"{LLAMA3_SOURCE} (405B: 126 layers, d_model 16384, FFN 53248, 128 heads, 8 KV heads); "
                "HF meta-llama/Llama-3.1-405B config.json; num_parameters()=405,853,388,800"),
        _gpt2("megatron-gpt2-8.3b", 3072, 72, 24, 1024, 8_300_000_000, "Shoeybi et al. 2019 (Megatron-LM), Table 1: 8.3 B"),
        _gpt2("gpt3-175b", 12288, 96, 96, 2048, 175_000_000_000, "Brown et al. 2020, Table 2.1: 175.0 B"),
        # Megatron-LM weak-scaling models (hidden, layers, heads; published size in billions, as printed).
        _megatron_gpt("megatron-1.7b", 2304, 24, 24, 1_700_000_000, f"{NARAYANAN_TABLE1}, row 1 (1.7 B)"),
        _megatron_gpt("megatron-3.6b", 3072, 30, 32, 3_600_000_000, f"{NARAYANAN_TABLE1}, row 2 (3.6 B)"),
        _megatron_gpt("megatron-7.5b", 4096, 36, 32, 7_500_000_000, f"{NARAYANAN_TABLE1}, row 3 (7.5 B)"),
        _megatron_gpt("megatron-18b", 6144, 40, 48, 18_400_000_000, f"{NARAYANAN_TABLE1}, row 4 (18.4 B)"),
        _megatron_gpt("megatron-39b", 8192, 48, 64, 39_100_000_000, f"{NARAYANAN_TABLE1}, row 5 (39.1 B)"),
        _megatron_gpt("megatron-76b", 10240, 60, 80, 76_100_000_000, f"{NARAYANAN_TABLE1}, row 6 (76.1 B)"),
        _megatron_gpt("megatron-145b", 12288, 80, 96, 145_600_000_000, f"{NARAYANAN_TABLE1}, row 7 (145.6 B)"),
        _megatron_gpt("megatron-310b", 16384, 96, 128, 310_100_000_000, f"{NARAYANAN_TABLE1}, row 8 (310.1 B)"),
        _megatron_gpt("megatron-530b", 20480, 105, 128, 529_600_000_000,
                      f"{NARAYANAN_TABLE1}, row 9 (529.6 B); {KORTHIKANTI_TABLE3} (530B)"),
        _megatron_gpt("megatron-1t", 25600, 128, 160, 1_008_000_000_000,
                      f"{NARAYANAN_TABLE1}, row 10 (1008.0 B); {KORTHIKANTI_TABLE3} (1T)"),
        _megatron_gpt("megatron-22b", 6144, 48, 64, 22_000_000_000, f"{KORTHIKANTI_TABLE3} (22B)"),
        _megatron_gpt("megatron-175b", 12288, 96, 96, 175_000_000_000,
                      f"{KORTHIKANTI_TABLE3} (175B, GPT-3 shapes with Megatron's 51,200 vocabulary)"),
        # GPT-3 175B as NeMo's recipe trains it (Megatron-Core with Transformer Engine): the fused bias-GeLU keeps only
        # its input, as the Megatron-LM models' one-kernel GeLU does; the vocabulary is padded for TP 4.
        _megatron_gpt("nemo-gpt3-175b", 12288, 96, 96, 175_000_000_000,
                      f"{DGXC_GPT3_RECIPE}; Brown et al. 2020, Table 2.1: 175.0 B", vocab=NEMO_GPT3_VOCAB),
        # BLOOM: ALiBi positions and an embedding LayerNorm, written as GPT-2's learned positions (2048 × 14336
        # parameters, < 0.02 %) with Megatron's one-kernel GeLU: the same matmul shapes.
        Workload("bloom-176b", "gpt2", _freeze(dict(
            n_embd=14336, n_layer=70, n_head=112, n_inner=4 * 14336, vocab_size=250880, n_positions=2048,
            activation_function="gelu_pytorch_tanh")), 2048, 176_247_000_000,
            "Le Scao et al. 2022 (BLOOM, arXiv:2211.05100): 176,247 M parameters, 70 layers, hidden 14336, 112 heads, "
            "vocabulary 250,880, sequence 2048; bigscience-workshop/bigscience train/tr11-176B-ml/tr11-176B-ml.slurm"),
        # PaLM: multi-query attention (one key/value head of 256), head size 256, SwiGLU FFN of 4·hidden,
        # no biases, shared input/output embedding, vocabulary 256k. Its parallel attention+FFN block
        # and LayerNorm are written here as Llama's sequential block and RMSNorm: same matmul shapes.
        Workload("palm-540b", "llama", _freeze(dict(
            hidden_size=18432, num_hidden_layers=118, num_attention_heads=48, num_key_value_heads=1, head_dim=256,
            intermediate_size=73728, vocab_size=256000, max_position_embeddings=2048, tie_word_embeddings=True)),
            2048, 540_350_000_000, "Chowdhery et al. 2022 (PaLM, arXiv:2204.02311), Table 1: 540.35 B, "
            "118 layers, 48 heads, d_model 18432, head size 256; §2 (multi-query, SwiGLU, shared embeddings, 256k vocabulary)"),
        # MaxText's TPU v4 models (experiments.validation_cases, the jax-xla cases).
        _maxtext("maxtext-22b", 6144, 48, 24, 24576, 22_000_000_000, "MaxText/configs/1xv4-128.sh: scale=3"),
        _maxtext("maxtext-52b", 12288, 32, 32, 49152, 52_000_000_000,
                 "MaxText/configs/1xv4-384.sh: scale=4, base_num_decoder_layers=8, base_emb_dim=3072, base_mlp_dim=12288"),
        # Mixtures of experts (docs/moe.md), with the values of the models' published config.json files. Sequence
        # 4096 for all (OLMoE's training context; the others accept longer ones).
        Workload("mixtral-8x7b", "mixtral", _freeze(dict(
            hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
            intermediate_size=14336, num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
            max_position_embeddings=32768, sliding_window=None, tie_word_embeddings=False)),
            4096, 46_700_000_000, "Jiang et al. 2024 (Mixtral of Experts, arXiv:2401.04088): 46.7 B parameters, "
            "12.9 B active per token, 8 experts top-2; HF mistralai/Mixtral-8x7B-v0.1 config.json"),
        Workload("qwen1.5-moe-a2.7b", "qwen2_moe", _freeze(dict(
            hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
            intermediate_size=5632, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
            num_experts=60, num_experts_per_tok=4, norm_topk_prob=False, vocab_size=151936,
            max_position_embeddings=8192, tie_word_embeddings=False)),
            4096, 14_300_000_000, "Qwen team 2024, Qwen1.5-MoE-A2.7B model card: 14.3 B parameters, 2.7 B activated "
            "(60 experts top-4 and a gated shared expert of 4×1408); HF Qwen/Qwen1.5-MoE-A2.7B config.json"),
        Workload("olmoe-1b-7b", "olmoe", _freeze(dict(
            hidden_size=2048, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16,
            intermediate_size=1024, num_experts=64, num_experts_per_tok=8, norm_topk_prob=False, vocab_size=50304,
            max_position_embeddings=4096, tie_word_embeddings=False)),
            4096, 6_900_000_000, "Muennighoff et al. 2024 (OLMoE, arXiv:2409.02060): 6.9 B parameters, 1.3 B active, "
            "64 experts top-8; HF allenai/OLMoE-1B-7B-0924 config.json"),
        Workload("qwen3-30b-a3b", "qwen3_moe", _freeze(dict(
            hidden_size=2048, num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
            intermediate_size=6144, moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
            norm_topk_prob=True, vocab_size=151936, max_position_embeddings=40960, tie_word_embeddings=False)),
            4096, 30_500_000_000, "Qwen team 2025, Qwen3-30B-A3B model card: 30.5 B parameters, 3.3 B activated, "
            "128 experts top-8, 48 layers, 32 query / 4 key-value heads; HF Qwen/Qwen3-30B-A3B config.json"),
        # Qwen3-30B-A3B's family at 7.7x the size: every one of the 94 layers a mixture of 128 experts (8 activated),
        # 64 query / 4 key-value heads of 128 (head_dim given: 64 x 128 != hidden 4096); intermediate_size (12288) is
        # in the published config but unused, as no layer is dense (mlp_only_layers empty).
        Workload("qwen3-235b-a22b", "qwen3_moe", _freeze(dict(
            hidden_size=4096, num_hidden_layers=94, num_attention_heads=64, num_key_value_heads=4, head_dim=128,
            intermediate_size=12288, moe_intermediate_size=1536, num_experts=128, num_experts_per_tok=8,
            norm_topk_prob=True, vocab_size=151936, max_position_embeddings=40960, tie_word_embeddings=False)),
            4096, 235_000_000_000, "Qwen team 2025 (Qwen3 Technical Report, arXiv:2505.09388, Table 2) and the "
            "Qwen3-235B-A22B model card: 235 B parameters, 22 B activated, 94 layers, 64 query / 4 key-value heads, "
            "128 experts top-8; HF Qwen/Qwen3-235B-A22B config.json (hidden 4096, moe_intermediate_size 1536, "
            "vocabulary 151,936)"),
        # Multi-head latent attention (no query compression: q_lora_rank None) and a dense first layer
        # (first_k_dense_replace 1) before 26 DeepSeekMoE layers; its yarn rope_scaling changes no shape or FLOP.
        Workload("deepseek-v2-lite", "deepseek_v2", _freeze(dict(
            hidden_size=2048, num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16,
            intermediate_size=10944, moe_intermediate_size=1408, n_routed_experts=64, n_shared_experts=2,
            num_experts_per_tok=6, first_k_dense_replace=1, topk_method="greedy", routed_scaling_factor=1.0,
            kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
            vocab_size=102400, max_position_embeddings=163840, tie_word_embeddings=False)),
            4096, 15_700_000_000, "DeepSeek-AI 2024 (DeepSeek-V2, arXiv:2405.04434) and the DeepSeek-V2-Lite model "
            "card: 15.7 B parameters, 2.4 B activated, 27 layers, hidden 2048, 16 heads of 128, KV compression 512, "
            "first layer dense, then 2 shared + 64 routed experts of 1408, 6 activated; pre-training sequence 4K; "
            "HF deepseek-ai/DeepSeek-V2-Lite config.json (intermediate_size 10944, vocabulary 102,400)"),
        # MLA with query compression (q_lora_rank 1536), three dense layers, then 58 DeepSeekMoE layers of 1 shared +
        # 256 routed experts (8 activated) behind the sigmoid, group-limited router (8 groups, 4 kept: node-limited
        # routing at EP 64 over 8 nodes). The multi-token-prediction module (one more layer and the shared head, 14 B
        # of the published 685 B) is not part of the HF model, nor of this workload.
        Workload("deepseek-v3", "deepseek_v3", _freeze(dict(
            hidden_size=7168, num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128,
            intermediate_size=18432, moe_intermediate_size=2048, n_routed_experts=256, n_shared_experts=1,
            num_experts_per_tok=8, n_group=8, topk_group=4, routed_scaling_factor=2.5, norm_topk_prob=True,
            first_k_dense_replace=3, kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128, qk_rope_head_dim=64,
            v_head_dim=128, vocab_size=129280, max_position_embeddings=163840, rope_interleave=True,
            tie_word_embeddings=False)),
            4096, 671_000_000_000, "DeepSeek-AI 2024 (DeepSeek-V3 Technical Report, arXiv:2412.19437) §2.1, §4.2: 61 "
            "layers, hidden 7168, 128 heads of 128, KV compression 512, query compression 1536, decoupled rotary 64; "
            "first three layers dense, then 1 shared + 256 routed experts of 2048, 8 activated, each token on at most "
            "4 nodes; 671 B parameters, 37 B activated; pre-training sequence 4K; HF deepseek-ai/DeepSeek-V3 "
            "config.json (intermediate_size 18432, n_group 8, topk_group 4, routed_scaling_factor 2.5, vocabulary "
            "129,280)"),
    )
}


def workload_names() -> list[str]:
    return sorted(BUILTIN)


def get_workload(name: str | Workload) -> Workload:
    """The built-in workload called ``name`` (a :class:`Workload` is passed through)."""
    if isinstance(name, Workload):
        return name
    if not isinstance(name, str):
        raise TypeError(f"a workload is named by a string, got {type(name).__name__}")
    try:
        return BUILTIN[name]
    except KeyError:
        close = difflib.get_close_matches(name, BUILTIN, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown workload {name!r}.{hint} Known workloads: {', '.join(workload_names())}") from None


def custom_workload(name: str, config_class: str, model_class: str, seq_len: int, **config: Any) -> Workload:
    """A user-defined workload from any HF config/model class pair and keyword arguments.

    Example: ``custom_workload("tiny-llama", "LlamaConfig", "LlamaForCausalLM", 256, hidden_size=256,
    num_hidden_layers=4, num_attention_heads=4, intermediate_size=688, vocab_size=1000)``.
    """
    import transformers

    for cls in (config_class, model_class):
        if not hasattr(transformers, cls):
            raise ValueError(f"transformers has no class {cls!r}")
    family = next((f for f, (m, c) in FAMILIES.items() if c == config_class), "custom")
    workload = Workload(name, family, _freeze(config), seq_len, None, "user-defined", model_class, config_class)
    workload.num_layers  # noqa: B018 - validates that the layer count is present
    return workload
