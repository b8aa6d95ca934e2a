"""Workload registry, tracing, tensor-parallel variants, fusion and caching."""

import json
import subprocess
import sys
import warnings
from graphlib import TopologicalSorter

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from phaze_env.workloads import BUILTIN, custom_workload, get_workload, model_graph, model_summary
from phaze_env.workloads import build
from phaze_env.workloads.build import _graph_cache

# Tiny instances of each family: real weights on CPU for FlopCounterMode, same code path for the graph.
TINY = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=64, n_layer=3, n_head=4, n_inner=256, vocab_size=101, n_positions=64)),
    "opt": ("OPTConfig", "OPTForCausalLM", dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, ffn_dim=256,
                                                vocab_size=101, max_position_embeddings=64, word_embed_proj_dim=32,
                                                do_layer_norm_before=False)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                                      num_key_value_heads=4, intermediate_size=176, vocab_size=101,
                                                      max_position_embeddings=64, tie_word_embeddings=False)),
    "bert": ("BertConfig", "BertForMaskedLM", dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                                  intermediate_size=256, vocab_size=101, max_position_embeddings=64)),
}
SEQ, MBS = 32, 2


def tiny(family):
    config_cls, model_cls, kwargs = TINY[family]
    return custom_workload(f"tiny-{family}", config_cls, model_cls, SEQ, **kwargs)


def published_tolerance(published: int) -> float:
    """Relative tolerance for a published parameter count: 0.5 %, or the figure's own rounding when coarser.

    Papers print sizes to a few digits (Narayanan et al.'s "1.7" B is 1.652 B exactly): half a unit in
    the last printed digit of ``published`` is within its rounding.
    """
    digits = str(published).rstrip("0")
    half_unit = 5 * 10 ** (len(str(published)) - len(digits) - 1)
    return max(0.005, half_unit / published)


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_parameter_totals_match_published_counts(name):
    workload = get_workload(name)
    graph = model_graph(name)
    assert graph.num_layers == workload.num_layers + 2
    assert abs(graph.params_total / workload.published_params - 1) <= published_tolerance(workload.published_params)


def test_published_tolerance_is_the_rounding_of_the_printed_figure():
    assert published_tolerance(1_700_000_000) == pytest.approx(0.05 / 1.7)  # "1.7 B": ± 0.05 B
    assert published_tolerance(1_557_611_200) == 0.005  # an exact count: the 0.5 % floor


@pytest.mark.parametrize("family", sorted(TINY))
def test_matmul_flops_match_torch_flop_counter(family):
    import transformers

    workload = tiny(family)
    config = getattr(transformers, workload.config_class)(**workload.config_dict)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(transformers, workload.model_class)(config)
    ids = torch.randint(0, 101, (MBS, SEQ))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    graph = model_graph(workload, microbatch=MBS)
    fwd = sum(op.gemm_flops * layer.repeat for layer in graph.layers for op in layer.fwd.ops)
    bwd = sum(op.gemm_flops * layer.repeat for layer in graph.layers for op in layer.bwd.ops)
    assert fwd + bwd == counter.get_total_flops()
    assert bwd == 2 * fwd


@pytest.mark.parametrize("family", sorted(TINY))
@pytest.mark.parametrize("width", [2, 4])
def test_tensor_parallel_conserves_matmul_work(family, width):
    workload = tiny(family)
    full = model_graph(workload, tensor_width=1)
    split = model_graph(workload, tensor_width=width)
    block_full, block_split = full.layers[1], split.layers[1]
    for direction in ("fwd", "bwd"):
        per_device = sum(op.gemm_flops for op in getattr(block_split, direction).ops)
        assert per_device * width == sum(op.gemm_flops for op in getattr(block_full, direction).ops)
    # Megatron: per layer two all-reduces of the hidden state forward (g) and two backward (f).
    hidden_bytes = block_full.output_bytes
    for direction in ("fwd", "bwd"):
        comms = [op for op in getattr(block_split, direction).ops if op.unit == "comm"]
        assert [(op.comm_kind, op.comm_bytes, op.comm_group) for op in comms] == [("allreduce", hidden_bytes, width)] * 2
    assert not any(op.unit == "comm" for op in block_full.fwd.ops + block_full.bwd.ops)
    # The vocabulary-parallel head computes 1/t of the logits (vocab 101 padded up as Megatron pads it).
    head_widths = lambda g: {gemm.n for op in g.layers[2].fwd.ops for gemm in op.gemms}  # noqa: E731
    assert 101 in head_widths(full) and -(-101 // width) in head_widths(split) and 101 not in head_widths(split)


def test_widths_that_do_not_divide_heads_are_rejected():
    with pytest.raises(ValueError, match="does not divide the 25 attention heads"):
        model_graph("gpt2-xl", tensor_width=2)
    with pytest.raises(ValueError, match="power of two"):
        model_graph(tiny("llama"), tensor_width=3)


def test_unknown_workload_suggests_a_close_match():
    with pytest.raises(ValueError, match="Did you mean 'gpt2-xl'.*Known workloads"):
        get_workload("gpt2-xll")


@pytest.mark.parametrize("bad", [dict(seq_len=0), dict(microbatch=-1), dict(tensor_width=0)])
def test_non_positive_sizes_are_rejected(bad):
    with pytest.raises(ValueError, match="positive"):
        model_graph(tiny("gpt2"), **bad)


def test_layer_structure_and_dags():
    graph = model_graph(tiny("llama"), microbatch=MBS)
    assert [layer.name for layer in graph.layers] == ["pre", "block", "post"]
    pre, block, post = graph.layers
    assert block.repeat == 3
    assert post.flops_fwd > 0 and any(op.vector_kind == "loss" for op in post.fwd.ops)  # head and loss kept
    assert block.output_bytes == block.input_bytes == MBS * SEQ * 64 * 2
    for layer in graph.layers:
        for dag in (layer.fwd, layer.bwd):
            predecessors = {i: {a for a, b in dag.edges if b == i} for i in range(len(dag.ops))}
            assert len(list(TopologicalSorter(predecessors).static_order())) == len(dag.ops)  # CycleError if not a DAG
    # fusion: every matmul with an elementwise epilogue became one tc+vc op; units are consistent
    for op in block.fwd.ops:
        assert op.unit in ("tc", "vc", "tc+vc", "comm")
        assert (op.unit in ("tc", "tc+vc")) == bool(op.gemms)
        assert (op.unit in ("vc", "tc+vc")) == (op.vector_elements > 0)
        assert sum(e for _, e in op.vector_parts) == op.vector_elements
    assert any(op.unit == "tc+vc" and len(op.fused) > 1 for op in block.fwd.ops)
    assert block.activation_stash_bytes > block.output_bytes


def test_stash_and_params_shrink_with_tensor_width():
    one, four = model_graph(tiny("gpt2"), tensor_width=1), model_graph(tiny("gpt2"), tensor_width=4)
    assert four.layers[1].activation_stash_bytes < one.layers[1].activation_stash_bytes
    assert four.layers[1].param_bytes < one.layers[1].param_bytes / 2


def test_graph_cache_hit_and_corruption_rebuild(fresh_cache, monkeypatch):
    workload = tiny("opt")
    _graph_cache.clear_memory()
    first = model_graph(workload)
    _graph_cache.clear_memory()
    files = list(fresh_cache.glob("graphs/*/*.pkl"))
    assert len(files) == 1
    files[0].write_bytes(files[0].read_bytes()[:-10])  # truncate: corrupted entry
    with pytest.warns(UserWarning, match="corrupted"):
        again = model_graph(workload)
    assert again == first
    _graph_cache.clear_memory()

    def no_build(*_args):
        raise AssertionError("the graph was rebuilt")

    monkeypatch.setattr(build, "_build", no_build)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "corrupted" warning: the rebuilt entry was stored whole
        assert model_graph(workload) == first  # and it is read from disk


def test_summary_keys_and_cli_json():
    summary = model_summary(model_graph(tiny("bert")))
    for key in ("model", "num_layers", "params_total", "layers", "flops_total_per_sample"):
        assert key in summary
    for key in ("name", "repeat", "params", "flops_fwd", "flops_bwd", "activation_stash_bytes", "output_bytes", "num_ops"):
        assert key in summary["layers"][0]
    out = subprocess.run([sys.executable, "-m", "phaze_env.workloads", "opt-350m", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["model"] == "opt-350m" and data["num_layers"] == 24
    bad = subprocess.run([sys.executable, "-m", "phaze_env.workloads", "gpt5"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown workload" in bad.stderr and "Traceback" not in bad.stderr


def test_workload_json_round_trip():
    for workload in BUILTIN.values():
        assert type(workload).from_dict(json.loads(workload.to_json())) == workload


@pytest.mark.parametrize("name,tensor_width", [("opt-1.3b", 8), ("llama2-7b", 4), ("llama2-7b", 8), ("gpt2-xl", 1)])
def test_stash_shares_are_parts_of_the_stash(name, tensor_width):
    """The attention-core and replicated shares never overlap: an unsplit (s, s) mask is counted once (it made the
    placement inputs reject OPT at t=8 and Llama at t=4, 8, ending the exact search for them)."""
    graph = model_graph(get_workload(name), microbatch=1, tensor_width=tensor_width)
    for layer in graph.layers:
        assert layer.stash_attention_bytes + layer.stash_replicated_bytes <= layer.activation_stash_bytes
