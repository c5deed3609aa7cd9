"""The published measurements and the command line, from Python."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import mmsim
from mmsim.cli import main


def test_reproduce_returns_rows_as_a_dataframe() -> None:
    r = mmsim.reproduce("cow-reuse", seed=1, quick=True)
    assert r.experiment == "cow-reuse" and r.source.startswith('"mm: COW: restore full accuracy in page reuse"')
    assert "https://lkml.kernel.org/r/" in r.source, "a citation a reader can follow"
    assert isinstance(r.rows, pd.DataFrame)
    assert r.rows.name[0] == "pmbench throughput gain", "headline rows first"
    gain = r.rows.set_index("name").loc["pmbench throughput gain"]
    assert gain.unit == "%" and gain.published == 24.9 and gain.simulated > 0 and gain.is_change
    assert (gain.band_low, gain.band_high) == (12.45, 49.8) and "LKP" in gain.citation
    assert r.verdict in {"reproduced", "direction only", "missed"}
    assert "v5.11 cow_reuse=mapcount" in r.configurations
    # Counters the change text does not publish have no published figure.
    copies = r.rows.set_index("name").loc["pmbench COW copies page_count"]
    assert pd.isna(copies.published) and copies.simulated > 0 and pd.isna(copies.verdict)
    assert r.notes
    # Printed whole: no column elided, however wide.
    shown = str(r)
    assert "published" in shown and "band_high" in shown and "..." not in shown


def test_experiments_and_bad_names() -> None:
    assert "cow-reuse" in set(mmsim.experiments().name)
    with pytest.raises(ValueError, match="unknown experiment"):
        mmsim.reproduce("nonsense")


def test_the_mmsim_command_is_the_rust_cli(capfd: pytest.CaptureFixture[str], scenarios: Path) -> None:
    assert main(["reproduce", "--list"]) == 0
    listed = capfd.readouterr().out
    assert "cow-reuse" in listed and "hugetlb-locking" in listed
    assert "thp-exec" in listed and "not yet modelled" not in listed
    assert main(["run", str(scenarios / "fork-cow.toml")]) == 0
    assert ": all hold" in capfd.readouterr().out
    assert main(["run", str(scenarios / "fork-cow.toml"), "--set", "nonsense"]) == 2
    assert main(["--version"]) == 0


def test_the_console_script_is_installed() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mmsim.cli", "reproduce", "--list"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0 and "cow-reuse" in out.stdout
