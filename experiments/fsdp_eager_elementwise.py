"""Back-of-envelope for the pytorch-fsdp width gap: ``python -m experiments.fsdp_eager_elementwise``.

The traced layer graphs fuse every elementwise operator into a matmul's epilogue or into one chain of vector ops
(:func:`phaze_env.workloads.model.fuse`), as a compiler would; IBM's fms-fsdp runs (``experiments.validation_cases``
``FSDP_CASES``) ran eager PyTorch, where each of them (RMSNorm's steps, the rotary embeddings, SwiGLU's activation and
product, the residual adds) is a kernel of its own that reads its inputs from HBM and writes its output back. This
prints, per Llama 2 model at the runs' sequence and microbatch, the HBM time those kernels would add to one block
(forward + backward) at the a100 preset's achieved HBM bandwidth, against the block's GEMM time at 80 % of the bf16
peak. Each vector part is counted as one read and one write of its elements in bf16, less the traffic the model
already prices for a vector-only fused chain; the attention core is left out (FlashAttention fuses it). An estimate
of a candidate cause, not part of the model: it is neither fitted nor used by any prediction.
"""

from __future__ import annotations

from phaze_env.cli import OneLineParser
from phaze_env.context_parallel import is_attention_core
from phaze_env.hardware import get_preset
from phaze_env.workloads import model_graph

GEMM_FRACTION_OF_PEAK = 0.8  # a round figure for the block's large GEMMs on A100 (the preset's MAMF rate is 0.859)
CASES = (("llama2-7b", 2), ("llama2-13b", 1), ("llama2-34b", 2), ("llama2-70b", 2))  # (model, microbatch) as published


def eager_extra_s(workload: str, microbatch: int, seq_len: int = 4096, chip: str = "a100") -> tuple[float, float]:
    """(eager elementwise HBM seconds, GEMM seconds) of one block, forward + backward."""
    accelerator = get_preset(chip)
    bandwidth = accelerator.hbm_bandwidth_Bps * accelerator.hbm_efficiency
    block = next(layer for layer in model_graph(workload, microbatch=microbatch, seq_len=seq_len).layers
                 if layer.name == "block")
    extra_bytes, gemm_flops = 0.0, 0
    for op in block.fwd.ops + block.bwd.ops:
        gemm_flops += op.gemm_flops
        if is_attention_core(op) or not op.vector_elements:
            continue
        elements = sum(count for _, count in op.vector_parts) if op.vector_parts else op.vector_elements
        eager = 2 * elements * accelerator.bytes_per_element
        extra_bytes += max(0.0, eager - (0 if op.gemms else op.bytes_read + op.bytes_written))
    return extra_bytes / bandwidth, gemm_flops / (accelerator.peak_flops * GEMM_FRACTION_OF_PEAK)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.fsdp_eager_elementwise", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    for workload, microbatch in CASES:
        extra_s, gemm_s = eager_extra_s(workload, microbatch)
        print(f"{workload:11s} microbatch {microbatch}: eager elementwise HBM {extra_s * 1e3:6.1f} ms per block, GEMMs "
              f"{gemm_s * 1e3:6.1f} ms: {extra_s / gemm_s:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
