"""The tiny search every search test shares: a 4-layer GPT-2 (seconds to trace), 16 devices, a 96-architecture space."""

from phaze_env.cluster import Cluster
from phaze_env.design import DesignSpace
from phaze_env.workloads import custom_workload

TINY = custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4, n_inner=512,
                       vocab_size=1000, n_positions=64)
CLUSTER = Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=4e9)
SPACE = DesignSpace(num_tc=(1, 4, 16), num_vc=(1, 16), tc_width=(16, 128), tc_depth=(32, 128), buffer_mb=(2, 32),
                    microbatch=(1, 4), recompute=(False, True), hbm_gb=(32.0,))
