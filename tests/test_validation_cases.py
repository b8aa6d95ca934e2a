"""The published validation cases and the workloads they need: self-consistent, and true to their sources."""

import pytest

from experiments.validation_cases import CASES, H100_CASES, ValidationCase, case_names, get_case
from phaze_env.workloads import get_workload, model_graph
from phaze_env.workloads.registry import MEGATRON_SEQ, MEGATRON_VOCAB

A100_PEAK_FLOPS = 312e12  # bf16/fp16 dense tensor-core peak (NVIDIA A100 datasheet), the papers' 100 %

# Narayanan et al. 2021 Table 1, the columns the cases do not carry: achieved aggregate petaFLOP/s and
# percentage of theoretical peak, per model size. They must agree with the per-GPU figure × GPU count.
NARAYANAN_AGGREGATE_PFLOPS = {"1.7b": (4.4, 44), "3.6b": (8.8, 44), "7.5b": (18.2, 46), "18b": (34.6, 43),
                              "39b": (70.8, 44), "76b": (143.8, 45), "145b": (227.1, 47), "310b": (297.4, 50),
                              "530b": (410.2, 52), "1t": (502.0, 52)}


def narayanan_params(layers: int, hidden: int, vocab: int = MEGATRON_VOCAB, seq: int = MEGATRON_SEQ) -> int:
    """Narayanan et al. 2021 §5.1: P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h)) = 12lh² + 13lh + (V+s)h."""
    return 12 * layers * hidden**2 + 13 * layers * hidden + (vocab + seq) * hidden


def korthikanti_model_flops(case: ValidationCase) -> float:
    """Korthikanti et al. 2022 §6: model FLOPs of one batch, 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))."""
    cfg = get_workload(case.workload).config_dict
    b, s, l, h, v = case.global_batch, case.seq_len, cfg["n_layer"], cfg["n_embd"], cfg["vocab_size"]
    return 72 * b * s * l * h**2 * (1 + s / (6 * h) + v / (12 * l * h))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_is_self_consistent(case):
    workload = get_workload(case.workload)  # exists in the registry
    assert case.seq_len == workload.seq_len
    assert case.tensor * case.pipeline * case.data == case.n_devices
    assert case.global_batch % (case.data * case.microbatch) == 0, "whole microbatches per replica"
    heads = workload.num_heads
    assert heads % case.tensor == 0, f"{heads} heads do not split over {case.tensor} tensor-parallel devices"
    # Every virtual stage holds whole layers (Megatron-LM; DeepSpeed's PipelineModule partitions the layers and
    # embeddings by its own rule: BLOOM's 70 layers on 12 stages); Megatron's interleaved schedule also needs the
    # microbatch count to be a multiple of the pipeline depth.
    if case.stack in ("megatron-lm", "megatron-lm-2021"):
        assert workload.num_layers % (case.pipeline * case.interleave) == 0
    if case.interleave > 1:
        assert case.pipeline > 1 and case.microbatches_per_replica % case.pipeline == 0
    if case.sequence_parallel:
        assert case.tensor > 1, "sequence parallelism splits along the tensor-parallel group"
    assert 0 < case.published < 1 if case.metric == "mfu" else case.published > 1
    assert case.source


def test_case_names_are_unique_and_looked_up():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    assert get_case(names[0]) is CASES[0]
    with pytest.raises(ValueError, match="unknown validation case 'nope'; known: narayanan21-1.7b") as error:
        get_case("nope")
    assert f"({len(case_names())} cases: python -m experiments.validate --list)" in str(error.value)
    with pytest.raises(ValueError, match="known: dgxc2502-llama31-70b-fp8-2048"):  # the closest names first
        get_case("dgxc2502-llama31-70b-fp8-2049")


def test_the_validate_cli_lists_every_case(capsys):
    from experiments.validate import main

    assert main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(case_names()) and lines[0].split("\t")[0] == CASES[0].name


def test_bad_case_values_are_refused():
    with pytest.raises(ValueError, match="recompute must be one of"):
        ValidationCase("x", "megatron-22b", 2048, "a100", "dgx-a100", 8, 8, 8, 1, 1, 1, recompute="some", published=1.0)
    with pytest.raises(ValueError, match="metric must be one of"):
        ValidationCase("x", "megatron-22b", 2048, "a100", "dgx-a100", 8, 8, 8, 1, 1, 1, metric="mfu%", published=1.0)


@pytest.mark.parametrize("size", sorted(NARAYANAN_AGGREGATE_PFLOPS))
def test_narayanan_rows_agree_with_their_aggregate_and_peak_columns(size):
    """A transcription check: per-GPU TFLOP/s × GPUs is the table's aggregate; / 312 its % of peak."""
    case = get_case(f"narayanan21-{size}")
    aggregate_pflops, percent_of_peak = NARAYANAN_AGGREGATE_PFLOPS[size]
    # The per-GPU figure is printed to 1 TFLOP/s: allow its rounding (± 0.5) times the GPU count.
    assert abs(case.published * case.n_devices / 1000 - aggregate_pflops) <= 0.5 * case.n_devices / 1000 + 0.05
    assert round(100 * case.published / (A100_PEAK_FLOPS / 1e12)) == pytest.approx(percent_of_peak, abs=1)


def test_korthikanti_mfu_agrees_with_the_published_iteration_times():
    """The MFU rows and the iteration-time rows of Korthikanti et al. are the same runs: check via §6's formula."""
    iteration_s = {"22b": 1.10, "175b": 13.75, "530b": 37.83, "1t": 71.49}  # Table 5, selective + SP
    for size, seconds in iteration_s.items():
        case = get_case(f"korthikanti22-{size}-selective-sp")
        mfu = korthikanti_model_flops(case) / (seconds * case.n_devices * A100_PEAK_FLOPS)
        assert mfu == pytest.approx(case.published, rel=0.01), size
        full = get_case(f"korthikanti22-{size}-full")  # same run, full recompute: slower
        assert (full.workload, full.global_batch, full.n_devices) == (case.workload, case.global_batch, case.n_devices)
        assert full.published < case.global_batch / seconds


MEGATRON_WORKLOADS = sorted({case.workload for case in CASES if case.workload.startswith("megatron-")})


@pytest.mark.parametrize("name", MEGATRON_WORKLOADS)
def test_megatron_workloads_match_narayanan_parameter_formula(name):
    """Exact count: the traced graph is the formula plus the final LayerNorm (2h) it leaves out."""
    workload = get_workload(name)
    cfg = workload.config_dict
    assert (cfg["vocab_size"], workload.seq_len) == (MEGATRON_VOCAB, MEGATRON_SEQ)
    expected = narayanan_params(cfg["n_layer"], cfg["n_embd"]) + 2 * cfg["n_embd"]
    assert model_graph(name).params_total == expected


def test_palm_parameter_count_is_the_published_540_35_billion():
    assert model_graph("palm-540b").params_total == pytest.approx(540.35e9, rel=1e-4)


def test_megatron_blocks_keep_only_the_gelu_input():
    """Megatron workloads trace the one-kernel tanh-GeLU (Megatron's fused bias-GeLU keeps only its input):
    the same GPT-3 block as HF's eight-operator ``gelu_new`` (gpt3-175b) with the same parameters, but it
    stashes less, by about the GeLU intermediates."""
    def block(name):
        return next(layer for layer in model_graph(name, tensor_width=8).layers if layer.repeat > 1)

    megatron, hf = block("megatron-175b"), block("gpt3-175b")
    assert megatron.param_bytes == hf.param_bytes
    assert 0.7 * hf.activation_stash_bytes < megatron.activation_stash_bytes < 0.85 * hf.activation_stash_bytes


def test_nemo_gpt3_is_the_recipes_model():
    """The DGXC cases' GPT-3 175B: GPT-2 BPE's 50,257 tokens padded to a multiple of 128 × TP 4 (Megatron's
    _vocab_size_with_padding) and the one-kernel GeLU of the recipe's fused bias-GeLU: the megatron-175b block."""
    from phaze_env.workloads.registry import NEMO_GPT3_VOCAB

    assert NEMO_GPT3_VOCAB == -(-50257 // (128 * 4)) * 128 * 4
    cfg = get_workload("nemo-gpt3-175b").config_dict
    assert cfg["vocab_size"] == NEMO_GPT3_VOCAB and cfg["activation_function"] == "gelu_pytorch_tanh"
    assert {case.workload for case in H100_CASES if case.name.startswith("dgxc-")} == {"nemo-gpt3-175b"}

    def block(name):
        return next(layer for layer in model_graph(name, tensor_width=4).layers if layer.repeat > 1)

    nemo, megatron = block("nemo-gpt3-175b"), block("megatron-175b")
    assert (nemo.param_bytes, nemo.activation_stash_bytes) == (megatron.param_bytes, megatron.activation_stash_bytes)


def test_h100_cases_run_the_profile_of_the_model_they_trained():
    """Issue 28 item 6's rule (:data:`~experiments.validation_cases.MEGATRON_CORE_MODEL_RUNS`): the MLPerf GPT-3
    submissions (NeMo's own GPT model, :data:`~experiments.validation_cases.MLPERF_NEMO_MODEL`) run ``megatron-lm``,
    every other Megatron-family H100 run (Megatron-Core's model) ``megatron-core`` or one of its variants."""
    from experiments.validation_cases import H100_CASES, MLPERF_NEMO_MODEL, MOE_CASES

    for case in H100_CASES + MOE_CASES:
        mlperf = case.campaign.startswith("mlperf-")
        if mlperf:
            assert case.stack == "megatron-lm", case.name
            assert case.campaign.split("-")[1] in MLPERF_NEMO_MODEL, case.name
        elif case.stack.startswith("megatron"):
            assert case.stack.startswith("megatron-core"), case.name
    assert {get_case(name).stack for name in ("dgxc-gpt3-175b-bf16-512", "nemo2407-llama2-7b-fp8",
                                              "mcore-mixtral-8x7b")} == {"megatron-core"}
