"""``mmsim.diff``: the host's kernel beside the model, as a DataFrame (``docs/host.md``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import mmsim


@pytest.mark.skipif(os.geteuid() != 0, reason="native runs need root")
def test_diff_on_the_host_is_a_dataframe_of_agreeing_rows(scenarios: Path) -> None:
    df = mmsim.diff(str(scenarios / "fork-cow.toml"))
    assert list(df.columns[:3]) == ["scenario", "release", "line"]
    assert len(df) >= 10
    # Per-process rows are exact; system-wide counters (vmstat) also count this Python
    # process's own allocations, so only the exact ones are held to agree here.
    exact = df[df["class"] == "Exact"]
    assert len(exact) >= 10
    assert (exact["verdict"] == "agree").all(), exact
    smaps = df[df["what"].str.startswith("smaps Shared_Dirty")]
    assert smaps["kernel"].tolist() == smaps["model"].tolist() == ["64"]


@pytest.mark.skipif(os.geteuid() != 0, reason="native runs need root")
def test_a_scenario_the_host_cannot_run_is_a_refused_row(scenarios: Path) -> None:
    df = mmsim.diff([str(scenarios / "dax" / "hole-read.toml")])
    assert df["verdict"].tolist() == ["refused"]
    assert "pmem" in df["reason"][0]


def test_an_unknown_guest_series_is_a_value_error(scenarios: Path) -> None:
    with pytest.raises(ValueError, match="6.1 or 6.12"):
        mmsim.diff(str(scenarios / "fork-cow.toml"), guest="5.4")
