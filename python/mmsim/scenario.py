"""Running scenario files (``docs/scenarios.md``) from Python."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mmsim import _core

__all__ = ["ScenarioResult", "run_scenario"]


@dataclass(frozen=True)
class ScenarioResult:
    """The outcome of :func:`run_scenario`.

    Attributes:
        passed: every operation and expectation held and the run finished.
        failures: one row per failed operation or expectation: ``line`` (in the scenario file),
            ``expected``, ``observed``.
        report: the whole report, with the same fields as ``mmsim run --json`` (``seed``,
            ``switches``, ``digest``, ``virtual_time_ns``, ``events``, ...).
        shown: the observables the scenario (or ``show=``) asked for, title to kernel text
            (``"/proc/parent/smaps"`` to its text).
    """

    passed: bool
    failures: pd.DataFrame
    report: dict[str, Any]
    shown: dict[str, str]

    def __repr__(self) -> str:
        return (
            f"ScenarioResult(passed={self.passed}, failures={len(self.failures)}, "
            f"scenario={self.report['scenario']!r}, seed={self.report['seed']}, "
            f"digest={self.digest!r})"
        )

    @property
    def stopped(self) -> str | None:
        """Why the simulation stopped before the end (watchdog, event bound), or None."""
        stopped: str | None = self.report["stopped"]
        return stopped

    @property
    def digest(self) -> str:
        """The fingerprint of the run's event history: the same seed gives the same digest."""
        digest: str = self.report["digest"]
        return digest


def run_scenario(
    path: str | os.PathLike[str],
    seed: int | None = None,
    kernel: str | None = None,
    set: Mapping[str, str | int] | None = None,  # noqa: A002 - the CLI's --set
    show: str | Iterable[str] | None = None,
) -> ScenarioResult:
    """Runs a scenario file, as ``mmsim run`` does.

    Args:
        path: the scenario file (TOML).
        seed: override the scenario's seed.
        kernel: override the kernel version (sets every switch to that version's behaviour).
        set: overrides by name, as ``mmsim run --set``: a switch (``{"cow_reuse":
            "anon_exclusive"}``), a cost in ns (``{"cost.zero_page_4k": 300}``) or a tunable
            (``{"read_ahead_kb": 0}``).
        show: observables to print after the run: ``"smaps:PROCESS"``, ``"vmstat"``, ... (one
            string or several).

    Returns:
        The result; a scenario whose expectations fail still returns (``passed`` is False).

    Raises:
        mmsim.ScenarioError: the file cannot be read or parsed, or an override does not apply
            (``.file`` and ``.line`` say where).
        mmsim.ConfigError: an unknown kernel version.
        ValueError: an unknown observable in ``show``.
        mmsim.SimulatorBug: an invariant of the simulator broke.
    """
    sets = [(key, str(value)) for key, value in (set or {}).items()]
    shows = [show] if isinstance(show, str) else list(show or [])
    passed, text = _core.run_scenario(
        os.fspath(path), seed=seed, kernel=kernel, sets=sets, show=shows
    )
    report = json.loads(text)
    failures = pd.DataFrame(report["failures"], columns=["line", "expected", "observed"]).astype(
        {"line": "int64"}
    )
    shown = {title: body for title, body in report["shown"]}
    return ScenarioResult(passed=passed, failures=failures, report=report, shown=shown)
