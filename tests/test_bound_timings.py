"""The bound-only layer timings a variant's ILP-free bound prices are cached by what they are made of
(``phaze_env.evaluate._BOUND_TIMINGS``): shared between clusters that differ only where the layers do not look (the
network of layers that do not communicate), never between clusters whose layers would be priced differently."""

import pytest

from phaze_env.cache import DiskCache
from phaze_env.evaluate import Cluster, throughput_upper_bound
from phaze_env.hardware import TPUV4
from tiny import TINY

SLOW = Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=4e9, devices_per_node=16, node_bandwidth_Bps=1e9)
FAST = SLOW.replace(node_bandwidth_Bps=300e9)  # the tensor-parallel collectives run inside a node


@pytest.fixture
def gets(monkeypatch):
    """The ``bound-timings`` lookups, as "hit" / "miss"."""
    seen: list[str] = []
    get = DiskCache.get

    def spy(self, key):
        value = get(self, key)
        if self.namespace == "bound-timings":
            seen.append("miss" if value is None else "hit")
        return value

    monkeypatch.setattr(DiskCache, "get", spy)
    return seen


def _bound(cluster: Cluster, widths: tuple[int, ...], **keywords) -> float:
    return throughput_upper_bound(TINY, TPUV4, cluster, microbatch=(1,), tensor_widths=widths, **keywords)


def test_layers_that_talk_are_priced_on_their_own_network(fresh_cache, gets):
    """At t = 2 every block holds tensor-parallel collectives: a network 300× faster inside the node must not be
    served the slow network's layer timings (the key holds the network then)."""
    fresh = {name: _bound(cluster, (2,), cache=False) for name, cluster in (("slow", SLOW), ("fast", FAST))}
    assert fresh["fast"] > fresh["slow"] * 1.01  # the network moves the bound, so sharing would show
    assert _bound(SLOW, (2,)) == fresh["slow"]
    assert gets and "hit" not in gets
    gets.clear()
    assert _bound(FAST, (2,)) == fresh["fast"]
    assert gets and "hit" not in gets  # another key: priced again


def test_layers_that_do_not_talk_share_their_timings_across_networks(fresh_cache, gets):
    """At t = 1 no layer communicates: a second cluster with another network reuses the first's layer timings and its
    bound is the one an uncached evaluation gives."""
    fresh = _bound(FAST, (1,), cache=False)
    _bound(SLOW, (1,))
    assert gets and set(gets) == {"miss"}
    gets.clear()
    assert _bound(FAST, (1,)) == fresh
    assert gets and set(gets) == {"hit"}


def test_another_stack_is_another_key(fresh_cache, gets):
    """The stack prices the operators (its efficiency divides every device latency): a second efficiency misses."""
    slower = SLOW.replace(framework_efficiency=0.5)
    fresh = _bound(slower, (1,), cache=False)
    _bound(SLOW, (1,))
    gets.clear()
    assert _bound(slower, (1,)) == fresh < _bound(SLOW, (1,))
    assert "hit" not in gets[:1]
