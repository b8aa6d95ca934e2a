"""The search's bounds take a workload as the rest of the API does: a :class:`Workload` or a built-in one's name, and
anything else is one clear ``TypeError`` (not an ``AttributeError`` from deep inside the bounding)."""

from __future__ import annotations

import numpy as np
import pytest

from phaze_env.workloads import registry
from search.bounds import row_variant_bounds, throughput_bounds
from tiny import CLUSTER, SPACE, TINY

KNOBS = dict(microbatch=(1, 4), tensor_widths=(1, 2))


def test_a_workload_name_bounds_as_its_workload(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN, TINY.name, TINY)  # a built-in name, without tracing a large model
    arch = SPACE.arch_space()
    by_name = row_variant_bounds(TINY.name, arch, CLUSTER, **KNOBS)
    by_object = row_variant_bounds(TINY, arch, CLUSTER, **KNOBS)
    assert by_name.keys() == by_object.keys()
    for variant, bound in by_object.items():
        np.testing.assert_array_equal(by_name[variant], bound)
    np.testing.assert_array_equal(throughput_bounds(TINY.name, arch, CLUSTER, **KNOBS),
                                  throughput_bounds(TINY, arch, CLUSTER, **KNOBS))


@pytest.mark.parametrize("workload", [42, None, ["tiny-gpt2"]])
def test_anything_else_is_a_type_error(workload):
    with pytest.raises(TypeError, match="a workload is named by a string"):
        row_variant_bounds(workload, SPACE.arch_space(), CLUSTER, **KNOBS)


def test_an_unknown_name_says_which_names_exist():
    with pytest.raises(ValueError, match="unknown workload 'gpt-9'.*Known workloads"):
        row_variant_bounds("gpt-9", SPACE.arch_space(), CLUSTER, **KNOBS)
