"""Sweeps: a scenario run at every point of a grid, on a Dask cluster or in this process.

The Python counterpart of ``mmsim sweep``. Every point is an independent, deterministic
simulation (the same point gives the same digest wherever it runs), so a sweep spreads over
Dask workers without changing its results; the rows come back in grid order, the first axis
varying slowest.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from mmsim.scenario import run_scenario

__all__ = ["sweep"]

Point = tuple[tuple[str, str], ...]


def _points(grid: Mapping[str, Iterable[Any]]) -> list[Point]:
    axes = [(key, [str(v) for v in values]) for key, values in grid.items()]
    for key, values in axes:
        if not values:
            raise ValueError(f"grid axis {key!r} has no values")
    return [
        tuple(zip([key for key, _ in axes], combo, strict=True))
        for combo in itertools.product(*(values for _, values in axes))
    ]


def _run_point(path: str, point: Point, fixed: Mapping[str, str]) -> dict[str, Any]:
    """Runs one point; executed on a Dask worker (or here)."""
    values = dict(point)
    kernel = values.pop("kernel", None)
    seed = values.pop("seed", None)
    result = run_scenario(
        path,
        seed=None if seed is None else int(seed),
        kernel=kernel,
        set={**fixed, **values},
    )
    report = result.report
    return {
        **dict(point),
        "passed": result.passed,
        "failures": len(result.failures),
        "stopped": result.stopped,
        "virtual_time_ns": report["virtual_time_ns"],
        "events": report["events"],
        "digest": result.digest,
        "vmstat": report["vmstat"],
    }


def sweep(
    path: str | os.PathLike[str],
    grid: Mapping[str, Iterable[Any]],
    *,
    set: Mapping[str, str | int] | None = None,  # noqa: A002 - the CLI's --set
    counters: Iterable[str] | None = None,
    client: Any = None,
    local: bool = False,
) -> pd.DataFrame:
    """Runs the scenario at ``path`` at every point of ``grid``.

    Args:
        path: the scenario file (TOML).
        grid: axis name to its values, in order: ``"kernel"`` (versions such as ``"v5.12"``),
            ``"seed"``, or any ``mmsim run --set`` key (a switch such as ``"cow_reuse"``, a cost
            ``"cost.NAME"``, a tunable ``"read_ahead_kb"``). The first axis varies slowest.
        set: overrides applied at every point, as ``run_scenario``'s ``set``.
        counters: ``/proc/vmstat`` counters to give a column each; by default every counter
            that is non-zero at some point.
        client: where to run: ``None`` starts a ``dask.distributed.LocalCluster`` of one
            single-threaded worker process per CPU (those processes import the calling script
            again, so a script needs the guard ``if __name__ == "__main__":``); a scheduler
            address (``"tcp://host:8786"``) or a ``dask.distributed.Client`` uses that cluster.
        local: run every point in this process, one after the other, without Dask.

    Returns:
        One row per point: a column per axis, ``passed``, ``failures`` (failed expectations),
        ``stopped`` (why a run stopped early, or None), ``virtual_time_ns``, ``events``,
        ``digest``, and the counters.

    Raises:
        ValueError: an empty axis, or an unknown counter.
        RuntimeError: a cluster started from a process that is itself a child importing the
            script again (the guard is missing).
        mmsim.ScenarioError, mmsim.ConfigError: bad input, as ``run_scenario`` raises it.
    """
    scenario = os.fspath(os.path.abspath(path))
    points = _points(grid)
    fixed = {key: str(value) for key, value in (set or {}).items()}
    if local:
        rows = [_run_point(scenario, point, fixed) for point in points]
    else:
        rows = _on_dask(scenario, points, fixed, client)
    names = list(counters) if counters is not None else None
    if names is None:
        names = [k for k in rows[0]["vmstat"] if any(r["vmstat"][k] for r in rows)] if rows else []
    for row in rows:
        vmstat = row.pop("vmstat")
        for name in names:
            if name not in vmstat:
                raise ValueError(f"{name!r} is not a /proc/vmstat counter")
            row[name] = vmstat[name]
    return pd.DataFrame(rows, columns=[*grid.keys(), *_FIXED_COLUMNS, *names])


_FIXED_COLUMNS = ["passed", "failures", "stopped", "virtual_time_ns", "events", "digest"]


def _on_dask(
    scenario: str, points: list[Point], fixed: Mapping[str, str], client: Any
) -> list[dict[str, Any]]:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(
            "mmsim.sweep needs dask.distributed (pip install 'linux-mmsim[sweep]'), "
            "or local=True to run in this process"
        ) from e
    if isinstance(client, Client):
        return _gather(client, scenario, points, fixed)
    if isinstance(client, str):
        with Client(client) as c:
            return _gather(c, scenario, points, fixed)
    if multiprocessing.parent_process() is not None:
        raise RuntimeError(
            "mmsim.sweep: starting a LocalCluster in a child process, which means a worker is "
            "importing your script again: put the script's code under "
            '`if __name__ == "__main__":`, or pass local=True'
        )
    workers = max(1, min(len(points), os.cpu_count() or 1))
    with (
        LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as c,
    ):
        return _gather(c, scenario, points, fixed)


def _gather(
    client: Any, scenario: str, points: list[Point], fixed: Mapping[str, str]
) -> list[dict[str, Any]]:
    futures = [client.submit(_run_point, scenario, point, fixed, pure=False) for point in points]
    rows: list[dict[str, Any]] = client.gather(futures)
    return rows
