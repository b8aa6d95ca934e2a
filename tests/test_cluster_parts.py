"""A cluster's three parts (``Network``, ``Setup``, ``Stack``): built from flat fields or from parts, changed one
field at a time, each part validating its own fields, and the flat dict that cache keys and ``results.json`` hold."""

from __future__ import annotations

import dataclasses
import math

import pytest

from phaze_env.cluster import Cluster, Network, Setup, Stack, get_cluster
from phaze_env.stacks import STACKS


def test_flat_fields_go_to_their_part():
    cluster = Cluster(n_devices=64, link_bandwidth_Bps=8e9, global_batch=512, optimizer="adam",
                      framework_efficiency=0.8, moe_dispatch="hierarchical", moe_node_limit=4)
    assert cluster.network == Network(n_devices=64, link_bandwidth_Bps=8e9)
    assert cluster.setup == Setup(global_batch=512, optimizer="adam")
    assert cluster.stack == Stack(framework_efficiency=0.8, moe_dispatch="hierarchical", moe_node_limit=4)
    assert cluster == Cluster(network=cluster.network, setup=cluster.setup, stack=cluster.stack)
    assert Cluster() == Cluster(network=Network(), setup=Setup(), stack=Stack())


def test_replace_changes_one_field_of_one_part():
    cluster = get_cluster("dgx-a100", 64, global_batch=128)
    for changed in (cluster.replace(optimizer="adam"), dataclasses.replace(cluster, optimizer="adam")):
        assert changed.setup == Setup(global_batch=128, optimizer="adam")
        assert changed.network is cluster.network and changed.stack is cluster.stack
    swapped = cluster.replace(stack=Stack())
    assert swapped.stack == Stack() and swapped.network is cluster.network and swapped.setup is cluster.setup


def test_an_unknown_field_is_refused_by_name():
    with pytest.raises(TypeError, match="'link_bandwith_Bps'"):
        Cluster(link_bandwith_Bps=1e9)
    with pytest.raises(TypeError, match="'no_such'"):
        Cluster().replace(no_such=1)
    with pytest.raises(ValueError, match="cluster stack must be a Stack, got Setup"):
        Cluster(stack=Setup())


@pytest.mark.parametrize("part, fields, message", [
    (Network, {"n_devices": 0}, "n_devices must be a positive integer"),
    (Network, {"link_efficiency": 1.5}, r"link_efficiency must be in \(0, 1\]"),
    (Network, {"slices": 2, "n_devices": 64}, "needs the network between them"),
    (Setup, {"global_batch": 0}, "global_batch must be a positive integer"),
    (Setup, {"optimizer": "lion"}, "optimizer must be one of"),
    (Stack, {"framework_efficiency": 0.0}, r"framework_efficiency must be in \(0, 1\]"),
    (Stack, {"moe_node_limit": 4}, "set moe_dispatch='hierarchical'"),
    (Stack, {"tp_comm_overlap": 1}, "tp_comm_overlap must be True or False"),
])
def test_each_part_validates_its_own_fields_as_the_flat_cluster_does(part, fields, message):
    with pytest.raises(ValueError, match=message):
        part(**fields)
    with pytest.raises(ValueError, match=message):
        Cluster(**fields)


def test_the_flat_dict_is_the_one_cache_keys_were_built_from():
    """The dict of before the split, literally: a default stack says only its first four fields; the DCN fields only
    with slices (a changed key would silently orphan every cached evaluation and compare results.json unequal)."""
    assert get_cluster("dgx-a100", 64, global_batch=128).to_dict() == {
        "n_devices": 64, "link_bandwidth_Bps": 25e9, "link_latency_s": 5e-6, "global_batch": 128, "optimizer": "sgd",
        "devices_per_node": 8, "node_bandwidth_Bps": 300e9, "node_latency_s": 2e-6, "link_efficiency": 0.8,
        "node_efficiency": 0.8, "torus_dims": [], "name": "dgx-a100", "framework_efficiency": 0.878,
        "interleaved_schedule": True, "pipeline_scatter_gather": True, "attention_efficiency": 0.0,
        "attention_dropout_kernel": True, "gemm_wave_sms": 108}
    deepseek = STACKS["deepseek-hai-llm"].apply(get_cluster("dgx-h800", 64))
    data = deepseek.to_dict()
    assert (data["moe_dispatch"], data["moe_node_limit"], data["moe_alltoall_overlap"]) == ("hierarchical", 4, True)
    assert data["plan_rules"] == deepseek.stack.plan_rules.to_dict()
    assert "unfused_elementwise" not in data and "slices" not in data  # at their defaults: not said
    assert Cluster.from_dict(data) == deepseek
    sliced = get_cluster("tpuv4-pod", 128, slices=2).to_dict()
    assert sliced["slices"] == 2 and math.isfinite(sliced["dcn_bandwidth_Bps"])


def test_deepseeks_adamw_keeps_bf16_moments_and_fp32_master_weights_and_gradients():
    """arXiv:2412.19437 §3.3.3: per parameter 4 B fp32 master + 2 × 2 B bf16 moments of state and 4 B fp32 gradients,
    against mixed-precision Adam's 12 B and 2 B; ZeRO-1 shards the state, not the gradients."""
    from phaze_env.placement import Settings
    from phaze_env.plan_spec import PlanSpec

    def parts(optimizer: str, zero: int) -> tuple[float, float, float]:
        cluster = Cluster(n_devices=8, global_batch=8, optimizer=optimizer)
        return Settings(cluster, 1, 1, 1e12, PlanSpec()).state_parts(8, zero)

    assert parts("adamw-bf16-moments", 0) == (1.0, 2.0, 4.0) and parts("adam", 0) == (1.0, 1.0, 6.0)
    assert parts("adamw-bf16-moments", 1) == (1.0, 2.0, 0.5) and parts("adam", 1) == (1.0, 1.0, 0.75)
