"""Korthikanti Table 5 beside Calculon: the data are the eight cells of the validation cases, and the section
reports both tools' errors on the published batch times."""

from __future__ import annotations

import pytest

from experiments import calculon_reference as ref
from experiments.validation_cases import get_case


def test_every_cell_is_a_validation_case_with_the_same_published_time():
    for size, modes in ref.TABLE5.items():
        for mode, (published_s, _) in modes.items():
            case = get_case(ref.case_name(size, mode))
            if case.metric == "samples_s":  # the full-recompute rows carry the batch time itself
                assert case.global_batch / case.published == pytest.approx(published_s)
            else:  # the selective + SP rows publish MFU; their batch times are Table 5's other column
                assert case.metric == "mfu" and case.recompute == "selective" and case.sequence_parallel


def test_the_section_reports_both_errors_from_our_rate_errors():
    errors = {ref.case_name("175b", "full"): 0.0, ref.case_name("1t", "full"): -0.2}  # 20 % slow: 1/0.8 × the time
    text = "\n".join(ref.section(errors))
    assert "| 1t | full | 94.42 | 118.02 (+25.0%) | 90.08 (-4.6%) |" in text
    assert "ours 12.5%, Calculon's 2.6% over 2 runs." in text  # both of 175B–1T: no second figure
    eight = {ref.case_name(size, mode): 0.0 for size, modes in ref.TABLE5.items() for mode in modes}
    eight[ref.case_name("22b", "full")] = -0.5  # 2× the time: in the eight-run error, not in the six of 175B–1T
    text = "\n".join(ref.section(eight))
    assert "ours 12.5%, Calculon's 3.7% over 8 runs; over the 6 runs of 175B–1T: ours 0.0%, Calculon's 4.0%" in text
    assert ref.section({}) == []


def test_calculons_terms_sum_to_its_batch_time_in_every_cell():
    """The term split was read from Calculon's stats at the same commit as its batch times: they must agree."""
    assert set(ref.CALCULON_TERMS) == set(ref.TABLE5)
    for size, modes in ref.TABLE5.items():
        for mode, (_, calculon_s) in modes.items():
            terms = ref.CALCULON_TERMS[size][mode]
            assert tuple(terms) == ref.TERMS
            assert sum(terms.values()) == pytest.approx(calculon_s, abs=0.006)
