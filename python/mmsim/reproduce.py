"""The reproduced published measurements (``mmsim reproduce``) as pandas objects."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from mmsim import _core

__all__ = ["Reproduction", "experiments", "reproduce"]


@dataclass(frozen=True)
class Reproduction:
    """One experiment's report.

    Attributes:
        experiment: its name (``"cow-reuse"``).
        title: what it compares.
        source: the change text it reproduces.
        seed: the run seed.
        rows: one row per figure: ``name``, ``unit``, ``published`` (NaN where the change text
            publishes none), ``simulated``, ``is_change`` (a gain in percent), and ``ratio``
            (simulated over published).
        notes: how the figures were obtained and what the model leaves out.
    """

    experiment: str
    title: str
    source: str
    seed: int
    rows: pd.DataFrame
    notes: list[str]


def experiments() -> pd.DataFrame:
    """The experiments ``mmsim reproduce`` knows: ``name``, ``title``, ``source``."""
    return pd.DataFrame(_core.experiments(), columns=["name", "title", "source"])


def reproduce(name: str, seed: int = 1, quick: bool = False) -> Reproduction:
    """Runs experiment ``name`` (see :func:`experiments`); ``quick`` uses small sizes.

    Raises:
        ValueError: for an unknown experiment.
    """
    report = json.loads(_core.reproduce(name, seed, quick))
    rows = pd.DataFrame(report["rows"], columns=["name", "unit", "published", "simulated", "is_change"])
    rows["published"] = rows["published"].astype("float64")
    rows["ratio"] = rows["simulated"] / rows["published"]
    return Reproduction(
        experiment=report["experiment"],
        title=report["title"],
        source=report["source"],
        seed=report["seed"],
        rows=rows,
        notes=list(report["notes"]),
    )
