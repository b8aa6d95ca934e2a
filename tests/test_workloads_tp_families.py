"""Megatron tensor parallelism read from the graph's structure, on twelve Hugging Face families.

Each family is a small config (hidden 256, 4–8 heads, 3 layers, vocabulary 512 so that every tested width
divides it) traced on the meta device. The expected roles below are written by module name: they cross-check
the structural rule in ``phaze_env.workloads.trace.assign_tensor_parallel_roles``, which never reads names.
"""

import os
import subprocess
import sys
import warnings

import pytest
import torch

from phaze_env.workloads import custom_workload, get_trace, model_graph
from phaze_env.workloads.model import CE_ALLREDUCE_BYTES_PER_TOKEN
from phaze_env.workloads.trace import TensorParallelError, TraceError

HIDDEN, HEADS, FFN, VOCAB, LAYERS = 256, 4, 1024, 512, 3
SEQ, MBS, BPE = 32, 1, 2
LLAMA_LIKE = dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FFN,
                  vocab_size=VOCAB, max_position_embeddings=64)
GQA = dict(LLAMA_LIKE, num_attention_heads=2 * HEADS, num_key_value_heads=HEADS)  # 8 query, 4 key/value heads
QKV = ("q_proj", "k_proj", "v_proj")
LLAMA_COLUMNS = tuple(f"self_attn.{p}" for p in QKV) + ("mlp.gate_proj", "mlp.up_proj")
LLAMA_ROWS = ("self_attn.o_proj", "mlp.down_proj")
FUSED_QKV_COLUMNS = ("self_attention.query_key_value", "mlp.dense_h_to_4h")
FUSED_QKV_ROWS = ("self_attention.dense", "mlp.dense_4h_to_h")

# family → (config class, model class, config, column-parallel linears, row-parallel linears) of layer 0,
# named relative to the layer.
FAMILIES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN, vocab_size=VOCAB, n_positions=64),
             ("attn.c_attn", "mlp.c_fc"), ("attn.c_proj", "mlp.c_proj")),
    "gptj": ("GPTJConfig", "GPTJForCausalLM",
             dict(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN, vocab_size=VOCAB, n_positions=64,
                  rotary_dim=32),
             tuple(f"attn.{p}" for p in QKV) + ("mlp.fc_in",), ("attn.out_proj", "mlp.fc_out")),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", LLAMA_LIKE,
                 ("attention.query_key_value", "mlp.dense_h_to_4h"), ("attention.dense", "mlp.dense_4h_to_h")),
    "bloom": ("BloomConfig", "BloomForCausalLM",
              dict(hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS, vocab_size=VOCAB),
              FUSED_QKV_COLUMNS, FUSED_QKV_ROWS),
    "falcon": ("FalconConfig", "FalconForCausalLM",
               dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, vocab_size=VOCAB,
                    multi_query=False),
               FUSED_QKV_COLUMNS, FUSED_QKV_ROWS),
    "opt": ("OPTConfig", "OPTForCausalLM",
            dict(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS, ffn_dim=FFN,
                 vocab_size=VOCAB, max_position_embeddings=64, word_embed_proj_dim=HIDDEN),
            tuple(f"self_attn.{p}" for p in QKV) + ("fc1",), ("self_attn.out_proj", "fc2")),
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(LLAMA_LIKE, tie_word_embeddings=False),
              LLAMA_COLUMNS, LLAMA_ROWS),
    "mistral": ("MistralConfig", "MistralForCausalLM", GQA, LLAMA_COLUMNS, LLAMA_ROWS),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", GQA, LLAMA_COLUMNS, LLAMA_ROWS),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(LLAMA_LIKE, num_key_value_heads=HEADS, head_dim=HIDDEN // HEADS),
              LLAMA_COLUMNS, LLAMA_ROWS),
    "phi": ("PhiConfig", "PhiForCausalLM", LLAMA_LIKE,
            tuple(f"self_attn.{p}" for p in QKV) + ("mlp.fc1",), ("self_attn.dense", "mlp.fc2")),
    "bert": ("BertConfig", "BertForMaskedLM", LLAMA_LIKE,
             tuple(f"attention.self.{p}" for p in ("query", "key", "value")) + ("intermediate.dense",),
             ("attention.output.dense", "output.dense")),
}
# Blocks whose attention and MLP read the same normalised input (one ``f`` all-reduce of its gradient backward).
SHARED_INPUT_PARALLEL_BLOCKS = {"gptj", "falcon", "phi"}


def workload(family):
    config_class, model_class, config, _, _ = FAMILIES[family]
    return custom_workload(f"tp-{family}", config_class, model_class, SEQ, **config)


def hf_model(family):
    """The Hugging Face model itself (all layers, on meta), to count its parameters independently of the trace."""
    import transformers

    config_class, model_class, config, _, _ = FAMILIES[family]
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        return getattr(transformers, model_class)(getattr(transformers, config_class)(**config))


def layer_relative(module: str) -> str:
    return module.split(".0.", 1)[1]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_roles_come_from_structure_and_match_the_names(family):
    _, _, _, columns, rows = FAMILIES[family]
    trace = get_trace(workload(family), MBS, SEQ)
    block = [op for op in trace.ops if op.region == "block0" and op.kind == "matmul"]
    assert {layer_relative(op.module): op.role for op in block} == {**dict.fromkeys(columns, "column"),
                                                                    **dict.fromkeys(rows, "row")}
    assert trace.unsplittable == {}
    model = hf_model(family)
    modules = {id(m): name for name, m in model.named_modules()}
    embeddings = {op.module for op in trace.ops if op.role == "vocab_embedding"}
    heads = {op.module for op in trace.ops if op.role == "vocab_head"}
    assert embeddings == {modules[id(model.get_input_embeddings())]}
    assert heads == {modules[id(model.get_output_embeddings())]}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_parameters_are_exact_and_split_as_megatron_splits_them(family):
    model = hf_model(family)
    per_device = {t: model_graph(workload(family), microbatch=MBS, tensor_width=t).params_total for t in (1, 2, 4)}
    assert per_device[1] == model.num_parameters()
    split = 2 * (per_device[1] - per_device[2])  # per device at width t: replicated + split / t
    assert per_device[4] == per_device[1] - split + split // 4
    # Megatron splits every weight matrix of the blocks, the word embedding and the head, and the biases of the
    # column-parallel linears (row-parallel biases and norms are replicated).
    params = dict(model.named_parameters())  # tied parameters once
    in_block = lambda name: any(part.isdigit() for part in name.split("."))  # noqa: E731 - e.g. model.layers.2.mlp
    matrices = sum(p.numel() for name, p in params.items() if p.dim() == 2 and in_block(name))
    matrices += sum(p.numel() for p in {model.get_input_embeddings().weight, model.get_output_embeddings().weight})
    biases = sum(p.numel() for name, p in params.items() if name.endswith("bias"))
    assert matrices <= split <= matrices + biases
    if not biases:
        assert split == matrices


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("width", [2, 4])
def test_megatron_split_divides_matmuls_and_adds_its_collectives(family, width):
    full = model_graph(workload(family), microbatch=MBS, tensor_width=1)
    split = model_graph(workload(family), microbatch=MBS, tensor_width=width)
    pre, block, post = split.layers
    # Every matmul of the block (linears and attention) is split, forward and backward.
    for direction in ("fwd", "bwd"):
        per_device = sum(op.gemm_flops for op in getattr(block, direction).ops)
        assert per_device * width == sum(op.gemm_flops for op in getattr(full.layers[1], direction).ops)
    # The vocabulary-parallel head computes VOCAB / width logits per device.
    heads = {op.name for op in get_trace(workload(family), MBS, SEQ).ops if op.role == "vocab_head"}
    head_gemms = lambda graph: [g for op in graph.layers[2].fwd.ops if heads & set(op.fused)  # noqa: E731
                                for g in op.gemms]
    assert [g.n for g in head_gemms(full)] == [VOCAB] and [g.n for g in head_gemms(split)] == [VOCAB // width]
    assert head_gemms(split)[0].flops * width == head_gemms(full)[0].flops
    # Megatron's collectives: g after each row-parallel linear (forward), f before the column-parallel
    # linears of each input (backward), g after the embedding, f before the head, the cross-entropy's.
    hidden = block.output_bytes
    comms = lambda ops: [(op.comm_kind, op.comm_bytes, op.comm_group) for op in ops if op.unit == "comm"]  # noqa: E731
    assert comms(block.fwd.ops) == [("allreduce", hidden, width)] * 2
    assert comms(block.bwd.ops) == [("allreduce", hidden, width)] * (1 if family in SHARED_INPUT_PARALLEL_BLOCKS else 2)
    assert comms(pre.fwd.ops) == [("allreduce", MBS * SEQ * HIDDEN * BPE, width)] and comms(pre.bwd.ops) == []
    assert comms(post.fwd.ops) == [("allreduce", MBS * SEQ * CE_ALLREDUCE_BYTES_PER_TOKEN, width)]
    assert comms(post.bwd.ops) == [("allreduce", hidden, width)]
    assert not any(op.unit == "comm" for layer in full.layers for op in layer.fwd.ops + layer.bwd.ops)


class _MlpWithAdapter(torch.nn.Module):
    """A Llama MLP plus a linear adapter added straight to its output: no Megatron role fits the adapter."""

    def __init__(self, mlp, hidden):
        super().__init__()
        self.mlp = mlp
        self.adapter = torch.nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        return self.mlp(x) + self.adapter(x)


@pytest.fixture
def adapter_model_class(monkeypatch):
    import transformers

    class AdapterLlamaForCausalLM(transformers.LlamaForCausalLM):
        def __init__(self, config):
            super().__init__(config)
            for layer in self.model.layers:
                layer.mlp = _MlpWithAdapter(layer.mlp, config.hidden_size)

    monkeypatch.setattr(transformers, "AdapterLlamaForCausalLM", AdapterLlamaForCausalLM, raising=False)
    return "AdapterLlamaForCausalLM"


def test_a_block_matmul_without_a_megatron_role_is_refused_at_width_above_one(adapter_model_class):
    adapter = custom_workload("tp-adapter", "LlamaConfig", adapter_model_class, SEQ, **FAMILIES["llama"][2])
    assert model_graph(adapter, microbatch=MBS, tensor_width=1).params_total > 0
    with pytest.raises(TensorParallelError) as refused:
        model_graph(adapter, microbatch=MBS, tensor_width=2)
    message = str(refused.value)
    assert "model.layers.0.mlp.adapter" in message and "leaves the block without a row-parallel linear" in message
    assert "\n" not in message
    assert isinstance(refused.value, TraceError) and isinstance(refused.value, ValueError)


def test_a_norm_over_split_features_is_refused():
    """OLMo-2 normalises queries and keys over all heads at once: a column split would need another all-reduce."""
    olmo2 = custom_workload("tp-olmo2", "Olmo2Config", "Olmo2ForCausalLM", SEQ, **LLAMA_LIKE)
    with pytest.raises(TensorParallelError, match=r"model\.layers\.0\.self_attn\.q_proj \(model\.layers\.0\.self_attn"
                                                  r"\.q_norm normalises over all of its split output features\)"):
        model_graph(olmo2, microbatch=MBS, tensor_width=4)


@pytest.mark.slow
def test_graphs_do_not_depend_on_the_string_hash_seed():
    """Fusion picks among tied hosts in graph order (it used a set's order: SwiGLU's product joined either linear)."""
    script = (f"import hashlib, sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
              "from test_workloads_tp_families import workload; from phaze_env.workloads import model_graph; "
              "graph = model_graph(workload('llama'), tensor_width=2, cache=False); "
              "print(hashlib.sha256(repr(graph).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(4)}
    assert len(digests) == 1


def family_table() -> str:
    """The table of docs/tensor_parallel.md: ``PYTHONPATH=. python tests/test_workloads_tp_families.py``."""
    rows = ["| family | column-parallel | row-parallel | block matmul FLOPs per device ÷ t = 1 (t = 2 / 4) | "
            "head FLOPs ÷ t = 1 (t = 2 / 4) | all-reduces per block, fwd / bwd | parameters t = 1 (= HF) | "
            "per device t = 2 / 4 |", "|" + "---|" * 8]
    for family in sorted(FAMILIES):
        _, _, _, columns, rows_ = FAMILIES[family]
        graphs = {t: model_graph(workload(family), microbatch=MBS, tensor_width=t) for t in (1, 2, 4)}
        heads = {op.name for op in get_trace(workload(family), MBS, SEQ).ops if op.role == "vocab_head"}
        block = {t: sum(op.gemm_flops for op in g.layers[1].fwd.ops + g.layers[1].bwd.ops) for t, g in graphs.items()}
        head = {t: sum(op.gemm_flops for op in g.layers[2].fwd.ops if heads & set(op.fused)) for t, g in graphs.items()}
        comms = [sum(op.unit == "comm" for op in getattr(graphs[4].layers[1], d).ops) for d in ("fwd", "bwd")]
        exact = "yes" if graphs[1].params_total == hf_model(family).num_parameters() else "NO"
        rows.append(f"| {family} | {', '.join(columns)} | {', '.join(rows_)} | {block[2] / block[1]:.4f} / "
                    f"{block[4] / block[1]:.4f} | {head[2] / head[1]:.4f} / {head[4] / head[1]:.4f} | {comms[0]} / "
                    f"{comms[1]} | {graphs[1].params_total:,} ({exact}) | {graphs[2].params_total:,} / "
                    f"{graphs[4].params_total:,} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(family_table())
