"""Sweeps over a grid of overrides, in this process and on a Dask cluster."""

import pytest

import mmsim

GRID = {"cow_reuse": ["page_count", "mapcount"], "seed": range(2)}


def test_a_local_sweep_has_a_row_per_point_in_grid_order(scenarios):
    rows = mmsim.sweep(scenarios / "cow/odirect-clear-refs.toml", GRID, local=True)
    assert list(rows[["cow_reuse", "seed"]].itertuples(index=False, name=None)) == [
        ("page_count", "0"),
        ("page_count", "1"),
        ("mapcount", "0"),
        ("mapcount", "1"),
    ]
    assert rows["passed"].all() and (rows["failures"] == 0).all()
    # Under mapcount the unpinned page is reused in place; page_count copies it.
    reuse = rows.groupby("cow_reuse")["pgreuse"].max()
    assert reuse["mapcount"] == 1 and reuse["page_count"] == 0
    assert "nr_free_pages" in rows.columns, "every counter non-zero somewhere"
    # Each point is the run mmsim.run_scenario gives with the same overrides.
    one = mmsim.run_scenario(
        scenarios / "cow/odirect-clear-refs.toml", seed=1, set={"cow_reuse": "mapcount"}
    )
    assert rows.iloc[3]["digest"] == one.digest


def test_a_dask_sweep_gives_the_local_rows(scenarios):
    pytest.importorskip("dask.distributed")
    path = scenarios / "cow/odirect-clear-refs.toml"
    counters = ["pgreuse", "pgfault"]
    local = mmsim.sweep(path, GRID, counters=counters, local=True)
    on_dask = mmsim.sweep(path, GRID, counters=counters)
    assert list(on_dask.columns) == [*GRID, "passed", "failures", "stopped",
                                     "virtual_time_ns", "events", "digest", *counters]
    assert on_dask.equals(local)


def test_bad_sweeps_raise(scenarios):
    path = scenarios / "cow/odirect-clear-refs.toml"
    with pytest.raises(ValueError, match="no values"):
        mmsim.sweep(path, {"seed": []}, local=True)
    with pytest.raises(ValueError, match="not a /proc/vmstat counter"):
        mmsim.sweep(path, {"seed": [0]}, counters=["pgnothing"], local=True)
    with pytest.raises(mmsim.ScenarioError, match="mglru"):
        mmsim.sweep(path, {"kernel": ["v5.8"], "lru": ["mglru"]}, local=True)
