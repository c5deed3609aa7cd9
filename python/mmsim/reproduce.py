"""The reproduced published measurements (``mmsim reproduce``) as pandas objects."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mmsim import _core

__all__ = ["Reproduction", "experiments", "reproduce"]

_COLUMNS = [
    "name",
    "unit",
    "published",
    "band_low",
    "band_high",
    "simulated",
    "verdict",
    "is_change",
    "ratio",
    "citation",
]


@dataclass(frozen=True)
class Reproduction:
    """One experiment's report for one seed.

    Attributes:
        experiment: its name (``"cow-reuse"``).
        title: what it compares.
        source: the title of the change it reproduces.
        seed: the run seed.
        verdict: ``"reproduced"``, ``"direction only"`` or ``"missed"``, from the bands of the
            published figures.
        reason: why, when the verdict is not ``"reproduced"``.
        rows: one row per figure, the published (headline) ones first: ``name``, ``unit``,
            ``published`` (the published figure, the middle of a published range; NaN for a
            diagnostic row), ``band_low`` and ``band_high`` (the band the model is checked
            against), ``simulated``, ``verdict`` (None for a diagnostic row), ``is_change`` (a
            gain in percent), ``ratio`` (simulated over published) and ``citation`` (where the
            figure and its band come from).
        configurations: the kernel of each machine run, with its non-default switches.
        notes: how the figures were obtained and what the model leaves out.

    ``print(r)`` shows the verdict and every column of every row, untruncated.
    """

    experiment: str
    title: str
    source: str
    seed: int
    verdict: str
    reason: str | None
    rows: pd.DataFrame
    configurations: list[str]
    notes: list[str]

    def __str__(self) -> str:
        head = f"{self.experiment} — {self.title} ({self.source}), seed {self.seed}\nverdict: {self.verdict}"
        if self.reason:
            head += f" — {self.reason}"
        shown = self.rows.drop(columns=["citation", "is_change"])
        with pd.option_context("display.max_columns", None, "display.width", None, "display.max_colwidth", None):
            return f"{head}\n{shown.to_string(float_format=_number)}"


def _number(v: float) -> str:
    """A figure without exponent or trailing zeros: ``6856390``, ``23.7374``."""
    return f"{v:.4f}".rstrip("0").rstrip(".")


def experiments() -> pd.DataFrame:
    """The experiments ``mmsim reproduce`` knows: ``name``, ``title``, ``source``."""
    return pd.DataFrame(_core.experiments(), columns=["name", "title", "source"])


def _row(row: dict[str, Any]) -> dict[str, Any]:
    p = row["published"]
    published = float("nan") if p is None else (p["low"] + p["high"]) / 2
    band = (float("nan"), float("nan")) if p is None else tuple(p["band"])
    return {
        "name": row["name"],
        "unit": row["unit"],
        "published": published,
        "band_low": band[0],
        "band_high": band[1],
        "simulated": row["simulated"]["mean"],
        "verdict": row["verdict"],
        "is_change": row["is_change"],
        "ratio": row["simulated"]["mean"] / published if published else float("nan"),
        "citation": None if p is None else p["citation"],
    }


def reproduce(name: str, seed: int = 1, quick: bool = False) -> Reproduction:
    """Runs experiment ``name`` (see :func:`experiments`) with one seed; ``quick`` uses small
    sizes. ``mmsim reproduce`` runs several seeds and reports their spread.

    Raises:
        ValueError: for an unknown experiment.
    """
    report = json.loads(_core.reproduce(name, seed, quick))
    rows = pd.DataFrame([_row(r) for r in report["rows"]], columns=_COLUMNS)
    return Reproduction(
        experiment=report["experiment"],
        title=report["title"],
        source=report["source"],
        seed=report["seeds"][0],
        verdict=report["verdict"],
        reason=report["reason"],
        rows=rows,
        configurations=list(report["configurations"]),
        notes=list(report["notes"]),
    )
