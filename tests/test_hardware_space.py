"""PHAZE's architecture space: counted against an independent brute-force enumeration of the rules."""

import itertools

import numpy as np
import pytest

from phaze_env.hardware.accelerator import TPUV4, get_preset
from phaze_env.hardware.area import arch_area_mm2
from phaze_env.design import DesignSpace
from phaze_env.hardware.space import ArchSpace


def _brute_force(num_tc, num_vc, widths, depths, buffers, budget):
    """The rules written out plainly: every combination, area window with the 1-TC/1-VC waiver; tuples in the
    knob order (num_tc, tc_width, tc_depth, num_vc, buffer_mb)."""
    kept = []
    for tc, width, depth, vc, buf in itertools.product(num_tc, widths, depths, num_vc, buffers):
        a = float(arch_area_mm2(tc, width, depth, vc, width, buf))  # vector width = tensor width
        if a > budget * (1 + 1e-9):
            continue
        if a < 0.3 * budget * (1 - 1e-9) and tc != 1 and vc != 1:
            continue
        kept.append((tc, width, depth, vc, buf))
    return kept


def test_full_space_matches_brute_force():
    p2 = [2**i for i in range(13)]  # 1 … 4096
    dims = [2**i for i in range(1, 9)]  # 2 … 256
    buffers = [2**i for i in range(1, 8)]  # 2 … 128 MB
    expected = _brute_force(p2, p2, dims, dims, buffers, TPUV4.area_mm2)
    space = ArchSpace()
    assert len(space) == len(expected)
    a = space.arrays
    got = list(zip(a["num_tc"].tolist(), a["tc_width"].tolist(), a["tc_depth"].tolist(), a["num_vc"].tolist(), a["buffer_mb"].tolist()))
    assert got == sorted(expected)
    assert (a["vc_width"] == a["tc_width"]).all()


def test_space_contains_tpuv4_and_excludes_oversized_designs():
    space = ArchSpace()
    assert TPUV4 in space
    assert TPUV4.replace(num_tc=16) not in space  # over budget
    assert TPUV4.replace(vc_width=64) not in space  # vector width must equal tensor width
    assert space.area_window_lower == 0.3 and space.budget_mm2 == pytest.approx(TPUV4.area_mm2)
    areas = space.arrays["area_mm2"]
    assert areas.max() <= space.budget_mm2 * (1 + 1e-9)


def test_lower_bound_is_waived_only_for_single_core_designs():
    space = ArchSpace()
    a = space.arrays
    small = a["area_mm2"] < 0.3 * space.budget_mm2
    assert small.any()
    assert ((a["num_tc"][small] == 1) | (a["num_vc"][small] == 1)).all()


def test_index_and_getitem_are_inverse():
    space = ArchSpace()
    rng = np.random.default_rng(0)
    for i in rng.integers(0, len(space), 50).tolist() + [0, len(space) - 1]:
        assert space.index(space[i]) == i
    assert space[-1] == space[len(space) - 1]
    with pytest.raises(IndexError):
        space[len(space)]
    with pytest.raises(ValueError):
        space.index(TPUV4.replace(num_tc=4096))


def test_reduced_space_iterates_and_counts():
    space = DesignSpace(num_tc=(1, 2, 4, 8), num_vc=(1, 2), tc_width=(64, 128), tc_depth=(128,), buffer_mb=(32, 128),
                        microbatch=(1, 2), recompute=(False,), hbm_gb=(32.0,))
    configs = list(space.arch_space())
    assert len(configs) == len(space.arch_space()) and len(set(configs)) == len(configs)
    assert all(c.tc_depth == 128 and c.vc_width == c.tc_width for c in configs)
    assert space.designs == 2 * len(configs) == len(list(space))  # every in-window design, counted two ways
    expected = _brute_force((1, 2, 4, 8), (1, 2), (64, 128), (128,), (32, 128), TPUV4.area_mm2)
    assert [(c.num_tc, c.tc_width, c.tc_depth, c.num_vc, c.buffer_mb) for c in configs] == sorted(expected)


def test_unique_core_configurations_reconstruct_every_architecture():
    space = ArchSpace()
    tc, tc_index = space.tc_configs
    vc, vc_index = space.vc_configs
    a = space.arrays
    assert (tc[tc_index, 0] == a["num_tc"]).all() and (tc[tc_index, 3] == a["buffer_mb"]).all()
    assert (vc[vc_index, 0] == a["num_vc"]).all() and (vc[vc_index, 1] == a["vc_width"]).all()
    assert len(tc) < len(space) and len(vc) < len(space)


def test_design_space_faces_agree_with_the_enumeration():
    """DesignSpace's window test, its area tables and ArchSpace (checked against brute force above) select the
    same architectures, on the reduced space and on a slice of the full one."""
    a100 = get_preset("a100")  # 2 vector sublanes, not TPUv4's 8: the area of every face must use the base's
    for space in (DesignSpace.reduced(), DesignSpace(num_tc=(1, 2, 8, 64), num_vc=(1, 2, 64), tc_depth=(2, 128, 256)),
                  DesignSpace.reduced(base=a100, num_vc=(1, 16, 256))):
        arch = {(a.num_tc, a.tc_width, a.tc_depth, a.num_vc, a.buffer_mb) for a in space.arch_space()}
        tables = space.area_tables()
        for idx in itertools.product(*(range(n) for n in space.nvec[:5])):
            design = space.decode(list(idx) + [0, 0, 0])
            key = (design.num_tc, design.tc_width, design.tc_depth, design.num_vc, design.buffer_mb)
            assert space.area_ok(design) == bool(tables.ok[idx]) == (key in arch), key
            assert (space.overshoot(design) > 0) == (key not in arch)
            assert tables.overshoot[idx] == pytest.approx(space.overshoot(design), abs=1e-15)
        assert space.designs == len(list(space))
        for design in list(space)[:20]:
            assert space.area_mm2(design) == pytest.approx(design.accelerator(space.base).area_mm2)


def test_named_spaces_and_validation():
    assert DesignSpace.named("full") == DesignSpace()
    assert DesignSpace.named("reduced") == DesignSpace.reduced()
    assert DesignSpace.reduced().combinations == 576
    assert DesignSpace.named("reduced", hbm_gb=(32.0,)).hbm_gb == (32.0,)
    with pytest.raises(ValueError, match="unknown space"):
        DesignSpace.named("medium")
    with pytest.raises(ValueError, match="microbatch"):
        DesignSpace(microbatch=())
    with pytest.raises(ValueError, match="duplicate"):
        DesignSpace(hbm_gb=(32.0, 32.0))
    with pytest.raises(ValueError, match="budget"):
        DesignSpace(budget_mm2=0.0)
