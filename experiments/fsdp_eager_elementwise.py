"""Eager against compiled PyTorch FSDP, predicted and published: ``python -m experiments.fsdp_eager_elementwise``.

The pytorch-fsdp profile runs its elementwise operators unfused (``Stack.unfused_elementwise``: fms-fsdp's
``use_torch_compile`` is False at both benchmark commits, and its ``main_training.py`` refuses compile with activation
checkpointing), each a kernel of its own with the traffic PyTorch's dispatcher counts
(:mod:`phaze_env.workloads.eager`). IBM then measured the same runs with ``torch.compile``, which fuses those
operators (the PyTorch blog "Maximizing Training Throughput Using PyTorch FSDP and Torch.compile", 2024, Tables 1
and 2: MFU without and with compile, batch 2, the earlier blog's checkpointing; :data:`COMPILE_GAINS`). The model's
counterpart of that gain is the step time with the elementwise operators unfused over fused, the rest of the model
(plan, efficiency, network) unchanged. Neither column was used to fit anything: the profile's efficiency is fitted to
the eager 7B row, and the eager traffic is counted, not fitted. Differences: compile does not fuse elementwise
operators into cuBLAS matmuls as the traced graph's fusion does (it emits its own pointwise kernels), and Table 2's
H100 cluster is 464 GPUs with 3.2 Tb/s per node, not the 96-GPU cluster of the eager rows (the gain is a ratio of two
runs on one cluster; the model takes it on ``ibm-h100``). The 13B row is left out: its checkpointing (every n-th
block) is not published.
"""

from __future__ import annotations

from experiments.validation_fit import predicted_compile_gain
from experiments.validation_cases import COMPILE_BLOG, COMPILE_GAINS
from phaze_env.cli import OneLineParser


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.fsdp_eager_elementwise", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    print(f"{'case':34s} {'predicted':>9s} {'published':>9s}")
    for name, published in COMPILE_GAINS.items():
        print(f"{name:34s} {predicted_compile_gain(name):+9.1%} {published:+9.0%}")
    print(f"published: {COMPILE_BLOG}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
