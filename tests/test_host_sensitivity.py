"""experiments.host_sensitivity re-evaluates the table's torus answers under another family's host: with the torus's
own host it reproduces the published row exactly (same path as the search), with DGX H100's it buys fewer chips."""

from __future__ import annotations

import pytest

from experiments.host_sensitivity import TABLE, with_host
from experiments.system_table import load_rows


@pytest.mark.slow
def test_the_torus_host_reproduces_the_row_and_a_dgx_host_buys_fewer_chips():
    row = next(r for r in load_rows(TABLE) if r["workload"] == "gpt2-xl" and r["kind"] == "power")
    assert row["best"]["system"]["topology"] == "torus"
    chips, samples_s = with_host(row, "tpuv4-torus")
    assert chips == row["best"]["chips"] and samples_s == pytest.approx(row["best"]["samples_s"], rel=1e-9)
    fewer, slower = with_host(row, "dgx-h100")
    assert fewer < chips and slower < samples_s
