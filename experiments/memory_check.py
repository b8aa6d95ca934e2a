"""Per-GPU memory of published plans, term by term, against the figures their authors published.

``python -m experiments.memory_check [--out docs/memory.md]`` prints (and writes) a Markdown report: for each
configuration our figure next to the published one for every term (weights, gradients, optimizer state, activations,
total) and the error, then whether each published frontier plan fits the memory of the GPUs it ran on. Three kinds of published figures:

* **Megatron-LM's memory report** (:func:`megatron_theoretical_bytes`): ``megatron/training/theoretical_memory_usage.py``
  (NVIDIA/Megatron-LM at commit :data:`MEGATRON_COMMIT`), which Megatron prints at start-up beside the allocator's
  measured peak. Its terms are those of the first pipeline stage (the most loaded: the embedding and the most
  microbatches in flight): weights + optimizer state at 18 bytes per parameter (2 bf16 weights, 4 fp32 main gradients,
  4 fp32 main weights, 8 Adam moments), or ``6 + 12/d`` with the distributed optimizer; activations of
  Korthikanti et al. 2022 Table 2 with sequence parallelism and selective recompute, ``s·b·h·(18 + 4·ffn/h)/t`` bytes
  per layer, times ``L`` layer-microbatches (``p`` microbatches of ``L/p`` layers) and the interleaving penalty
  ``1 + (p−1)/(p·v)``, plus the embedding's input and dropout mask for ``p`` microbatches.
* **ZeRO's model-state figure** (Rajbhandari et al. 2020, Figure 1): a 7.5 B-parameter model on 64 GPUs with
  mixed-precision Adam — 120 GB per device unsharded, 31.4 GB with the optimizer state sharded (P_os), 16.6 GB with the
  gradients too (P_os+g), 1.9 GB with the weights too (P_os+g+p).
* **Published frontier plans** that trained on 80 GB H100s (the validation cases of experiments.validation_cases):
  each must fit 80 GiB.

Not counted, here or in Megatron-LM's report: the caching allocator's slack (fragmentation between the reserved and
the allocated peak), the communication libraries' buffers (NCCL's channels, Transformer Engine's userbuffers) and the
CUDA context: a plan within a few GiB of its GPU's memory in this accounting runs close to the edge in practice.

FP8 plans keep their FP8 Linears' inputs in FP8 (Transformer Engine, :func:`phaze_env.hardware.number_format.
fp8_stash_saving_bytes`). Still counted on the side of too much memory for Megatron-Core FP8 recipes: the bf16 weight
copy that ``fp8_param_gather`` drops (2 bytes per FP8 weight: 4.8 GiB on bridge2511-qwen3-30b-a3b-fp8's last stage),
and an MoE layer's expert outputs, which the traced (eager) combine keeps to weight them by the router's
probabilities where Megatron-Core applies the probabilities inside the experts' activation
(``megatron/core/transformer/moe/experts.py``, ``permuted_probs``).

Our gradients are bf16 (2 bytes per parameter, ``GRADIENT_FACTOR``); Megatron keeps fp32 main gradients for bf16
training (``megatron/training/arguments.py``: "bfloat16 requires gradient accumulation and all-reduce to be done in
fp32"). That term is reported, not matched: modelling it would double the data-parallel collectives' payload as well.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass
from pathlib import Path

from experiments.validation_fit import case_accelerator, case_cluster, plan_of
from experiments.validation_cases import ValidationCase, get_case
from phaze_env.cli import OneLineParser
from phaze_env.cluster import OPTIMIZERS
from phaze_env.evaluate import Evaluation, evaluate
from phaze_env.files import write_text_atomic, writable_directory
from phaze_env.hardware.accelerator import GB_BYTES
from phaze_env.placement.inputs import GRADIENT_FACTOR, dualpipe_mirror, in_flight_units, parameter_copies
from phaze_env.workloads import get_workload

MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
MEGATRON_SOURCE = (f"NVIDIA/Megatron-LM megatron/training/theoretical_memory_usage.py at commit {MEGATRON_COMMIT} "
                   "(compute_weight_and_optimizer_memory, compute_activation_memory: sequence parallel + selective)")
ZERO_SOURCE = "Rajbhandari et al. 2020 (ZeRO, arXiv:1910.02054) Figure 1: Ψ = 7.5 B, N_d = 64, K = 12"
TOLERANCE = 0.10
"""How close a term must be to the published one (the issue's ±10 %)."""
LIFTED_HBM_GB = 1024.0
"""HBM at which a plan that does not fit is evaluated to show what it needs (GiB; far above any device)."""
TERMS = ("weights", "gradients", "optimizer", "activations", "total")


@dataclass(frozen=True)
class StageTerms:
    """One device's memory, term by term (bytes), and the microbatches of activations it holds at its peak."""

    weights: float
    gradients: float
    optimizer: float
    zero_buffers: float
    activations: float
    in_flight_microbatches: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.zero_buffers + self.activations

    def term(self, name: str) -> float:
        return self.total if name == "total" else getattr(self, name)


def stage_terms(evaluation: Evaluation) -> list[StageTerms]:
    """Every pipeline device's memory of a feasible evaluation, first stage's device first (the DP's own numbers:
    ``Plan.stage_memory``), with its peak microbatches in flight (:func:`in_flight_units` over ``v``). Under DualPipe
    (``Stack.pipeline_schedule``) device ``k`` holds stage ``k`` and its mirror (:func:`dualpipe_mirror`), so its terms
    are the two stages' sums."""
    plan = evaluation.plan
    stages, v, microbatches = plan.pipeline_stages, plan.interleave, plan.microbatches_per_replica
    own = [StageTerms(memory["weights"], memory["gradients"], memory["optimizer"], memory["zero_buffers"],
                      memory["activations"], in_flight_units(stages - k, stages, microbatches, v) / v)
           for k, memory in enumerate(plan.stage_memory)]
    if parameter_copies(evaluation.cluster.get("pipeline_schedule", "1f1b"), stages) == 1:
        return own
    return [StageTerms(*(a + b for a, b in zip(astuple(stage), astuple(own[dualpipe_mirror(k, stages)]))))
            for k, stage in enumerate(own)]


def _config(case: ValidationCase) -> dict:
    cfg = get_workload(case.workload).config_dict
    hidden = int(cfg.get("hidden_size") or cfg.get("n_embd"))
    heads = int(cfg.get("num_attention_heads") or cfg.get("n_head"))
    return {"layers": int(cfg.get("num_hidden_layers") or cfg.get("n_layer")), "hidden": hidden, "heads": heads,
            "kv_heads": int(cfg.get("num_key_value_heads") or heads),
            "ffn": int(cfg.get("intermediate_size") or cfg.get("n_inner") or 4 * hidden),
            "vocab": int(cfg.get("vocab_size")), "swiglu": "intermediate_size" in cfg,  # Llama's gated MLP
            "untied": not cfg.get("tie_word_embeddings", True)}  # HF's default (GPT-2, Megatron's GPTs): tied


def megatron_theoretical_bytes(case: ValidationCase) -> dict[str, float]:
    """Megatron-LM's report for the case's plan (:data:`MEGATRON_SOURCE`, dense models, sequence parallel + selective
    recompute), split into our terms: the 18 (or ``6 + 12/d``) bytes per parameter as 2 weights + 4 gradients +
    12 (or ``12/d``) optimizer state. The vocabulary is padded to a multiple of ``128·t`` (``--make-vocab-size-divisible-by
    128``)."""
    c = _config(case)
    h, layers, t, p, d = c["hidden"], c["layers"], case.tensor, case.pipeline, case.data
    vocab = math.ceil(c["vocab"] / (128 * t)) * 128 * t
    gated = 3 / 2 if c["swiglu"] else 1
    attention = 2 * h * h * (1 + c["kv_heads"] / c["heads"])
    layer_params = attention + 2 * h * c["ffn"] * gated + 2 * h * 2  # + the two norms (weight and bias)
    embedding = h * vocab
    first_stage = (layer_params * layers / p + embedding) / t
    if c["untied"] and p == 1:
        first_stage += embedding / t
    optimizer_per_param = 12 / d if case.zero >= 1 else 12
    s, b = case.seq_len, case.microbatch
    activations = s * b * h * (18 + 4 * c["ffn"] / h) * layers
    activations += 8 * s * b * p + s * b * h * p  # the embedding's input ids and dropout mask, p microbatches
    if case.interleave > 1:
        activations *= 1 + (p - 1) / (p * case.interleave)
    elif p > 1:
        activations *= min(1, case.microbatches_per_replica / p)
    if p == 1:
        activations += s * b * h * 4 * (1 + vocab / h)  # the output layer's input and the loss
    terms = {"weights": 2 * first_stage, "gradients": 4 * first_stage, "optimizer": optimizer_per_param * first_stage,
             "activations": activations / t}
    terms["total"] = sum(terms.values())
    return terms


MEGATRON_CASES = ("korthikanti22-22b-selective-sp", "korthikanti22-175b-selective-sp", "korthikanti22-530b-selective-sp",
                  "korthikanti22-1t-selective-sp", "dgxc-gpt3-175b-bf16-128", "dgxc-gpt3-175b-bf16-2048")
"""Plans that Megatron-LM's report describes (sequence parallelism and selective recompute or a fused attention kernel,
dense, bf16 weights, ``L/p`` layers per stage): the Korthikanti et al. 2022 runs (A100 80 GB) and NVIDIA's GPT-3 175B
H100 recipe at its smallest and largest data-parallel degree. Not the Llama 3 405B plans: their first stage holds the
embedding in place of a layer (the embedding/loss split) and ``m_r = p`` microbatches cap the interleaved warm-up, neither
of which the report's formula models (it puts 1.12 × 7.9 layer-stacks of activations where the schedule holds 16
microbatches of 7 layers)."""

ZERO_FIGURE_GB = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
"""Rajbhandari et al. 2020 Figure 1 (:data:`ZERO_SOURCE`): model-state memory per device (GB, 10⁹ bytes) by ZeRO stage
(0: the baseline, 1: P_os, 2: P_os+g, 3: P_os+g+p)."""

FRONTIER_CASES = ("llama3-405b-paper-8192", "llama3-405b-paper-16384", "llama3-405b-paper-16384-cp16",
                  "bridge2509-llama3-405b-fp8-1024", "bridge2602-llama3-405b-fp8-1024", "dgxc-gpt3-175b-fp8-128",
                  "mlperf31-gpt3-175b-fp8-10752",
                  "bridge2511-qwen3-30b-a3b-fp8", "bridge260201-qwen3-30b-a3b-fp8", "bridge2604-qwen3-30b-a3b-fp8",
                  "mcore-qwen3-235b-tp2-ep32-pp8-deepep", "mcore-qwen3-235b-tp2-ep32-pp8-deepep-a2a-overlap",
                  "mcore-qwen3-235b-tp2-ep8-fsdp-deepep", "mcore-qwen3-235b-tp4-ep8-pp8-deepep",
                  "mcore-qwen3-235b-16k-cp1", "mcore-qwen3-235b-32k-cp2", "mcore-qwen3-235b-64k-cp4",
                  "mcore-qwen3-235b-128k-cp8", "bridge260401-qwen3-235b-a22b-fp8", "mcore-qwen3-235b-tp2-ep8-pp32-a2a")
"""Published frontier plans on 80 GB H100s (validation cases) that must fit the 80 GiB they ran on: dense 405B and
175B (MLPerf's on 10,752 GPUs: 8 microbatches per replica), the Qwen3-30B-A3B MoE runs (expert parallel 8–16, whose expert-data-parallel group of 1–2 ranks leaves the
experts' optimizer state nearly unsharded) and the Qwen3-235B-A22B runs on folded expert grids (4K to 128K tokens;
the 32-stage plan fits once the routing weights multiply the experts' activation, ``Stack.moe_probs_in_activation``)."""


def zero_model_states_bytes(zero: int, parameters: float = 7.5e9, data_parallel: int = 64) -> float:
    """Model-state bytes per device of ZeRO stage ``zero`` in our accounting (:meth:`Settings.state_parts` with Adam's
    state and bf16 gradients: ``2 + 2 + 12`` bytes per parameter, the first ``zero`` of optimizer state, gradients and
    weights divided by ``N_d``), for Figure 1's model."""
    shards = [data_parallel if zero >= stage else 1 for stage in (3, 2, 1)]
    optimizer = OPTIMIZERS["adam"].state_factor
    return parameters * 2 * (1 / shards[0] + GRADIENT_FACTOR / shards[1] + optimizer / shards[2])


def evaluate_case(case: ValidationCase, hbm_gb: float | None = None) -> Evaluation:
    """The case's pinned plan on its system (at ``hbm_gb`` when given: the published plan's need when it does not fit)."""
    return evaluate(case.workload, case_accelerator(case), case_cluster(case), plan=plan_of(case), seq_len=case.seq_len,
                    hbm_gb=hbm_gb)


def plan_need(case: ValidationCase) -> tuple[Evaluation, bool]:
    """(the evaluation whose memory is reported, whether the plan fits the case's GPUs): at the GPUs' memory, or,
    when it does not fit there, with the memory lifted (:data:`LIFTED_HBM_GB`)."""
    evaluation = evaluate_case(case)
    if evaluation.feasible:
        return evaluation, True
    return evaluate_case(case, LIFTED_HBM_GB), False


def _gib(value: float) -> str:
    return f"{value / GB_BYTES:.2f}"


def megatron_rows(name: str) -> list[str]:
    """Markdown rows of one plan against Megatron-LM's report (its first stage)."""
    case = get_case(name)
    evaluation, fits = plan_need(case)
    first = stage_terms(evaluation)[0]
    published = megatron_theoretical_bytes(case)
    label = f"{name} `{evaluation.plan.notation}`, {first.in_flight_microbatches:g} microbatches in flight"
    label += "" if fits else " (does NOT fit the GPUs it ran on)"
    return [f"| {label if term == 'weights' else ''} | {term} | {_gib(first.term(term))} | {_gib(published[term])} | "
            f"{first.term(term) / published[term] - 1:+.1%} |" for term in TERMS]


def total_errors() -> dict[str, float]:
    """Each configuration's total against its published figure (ours / published − 1): the Megatron-LM report's
    plans (their first stage) and ZeRO's Figure 1 stages."""
    errors = {}
    for name in MEGATRON_CASES:
        case = get_case(name)
        first = stage_terms(plan_need(case)[0])[0]
        errors[name] = first.total / megatron_theoretical_bytes(case)["total"] - 1
    for zero, published in ZERO_FIGURE_GB.items():
        errors[f"ZeRO stage {zero}"] = zero_model_states_bytes(zero) / 1e9 / published - 1
    return errors


def summary_line(errors: dict[str, float]) -> str:
    within = [name for name, error in errors.items() if abs(error) <= TOLERANCE]
    missed = ", ".join(f"{name} {errors[name]:+.1%}" for name in errors if name not in within)
    return (f"{len(within)} of {len(errors)} configurations match their published total within ±{TOLERANCE:.0%}"
            + (f"; outside: {missed}" if missed else "") + ".")


def _frontier_row(name: str, evaluation: Evaluation, fits: bool) -> str:
    fullest = max(stage_terms(evaluation), key=lambda terms: terms.total)
    return (f"| {name} | `{evaluation.plan.notation}` | {_gib(fullest.total)} | {'yes' if fits else '**no**'} | "
            f"{_gib(fullest.weights)} | {_gib(fullest.gradients)} | {_gib(fullest.optimizer + fullest.zero_buffers)} | "
            f"{_gib(fullest.activations)} | {fullest.in_flight_microbatches:g} |")


def report() -> str:
    """The whole comparison as Markdown."""
    lines = ["# Memory per GPU against published figures", "",
             "Generated by `python -m experiments.memory_check` (module docstring: what each figure is). GiB = 2³⁰ "
             "bytes.", "", summary_line(total_errors()), "", f"## Megatron-LM's memory report ({MEGATRON_SOURCE})", "",
             "First pipeline stage. Gradients: ours bf16 (2 bytes per parameter), Megatron's fp32 main gradients "
             "(4 bytes): a known gap, reported, not matched.", "",
             "| plan | term | ours (GiB) | Megatron (GiB) | error |", "|---|---|---|---|---|"]
    for name in MEGATRON_CASES:
        lines += megatron_rows(name)
    lines += ["", f"## ZeRO model states per device ({ZERO_SOURCE})", "", "| ZeRO stage | ours (GB) | published (GB) | error |",
              "|---|---|---|---|"]
    for zero, published in ZERO_FIGURE_GB.items():
        ours = zero_model_states_bytes(zero) / 1e9
        lines.append(f"| {zero} | {ours:.2f} | {published:g} | {ours / published - 1:+.1%} |")
    lines += ["", "## Published frontier plans on 80 GB H100 (the fullest device)", "",
              "| case | plan | total (GiB) | fits 80 GiB | weights | gradients | optimizer + ZeRO buffers | activations | "
              "microbatches in flight |", "|---|---|---|---|---|---|---|---|---|"]
    for name in FRONTIER_CASES:
        lines.append(_frontier_row(name, *plan_need(get_case(name))))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.memory_check", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="", help="also write the report to this Markdown file (e.g. docs/memory.md)")
    args = parser.parse_args(argv)
    if args.out:
        try:
            if Path(args.out).is_dir():
                raise ValueError(f"--out {args.out} is a directory; give the report's file path (….md)")
            writable_directory(Path(args.out).parent)
        except ValueError as exc:
            parser.error(str(exc))
    text = report()
    print(text, end="")
    if args.out:
        write_text_atomic(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
