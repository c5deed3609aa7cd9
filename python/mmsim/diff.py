"""The real kernel as mmsim's oracle (``mmsim diff``) as a pandas DataFrame."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from mmsim import _core

__all__ = ["diff"]

_COLUMNS = [
    "scenario",
    "release",
    "line",
    "what",
    "expected",
    "kernel",
    "model",
    "class",
    "verdict",
    "reason",
]


def _class_name(c: object) -> str:
    """``"Exact"``, or ``"ModelOnly"`` for ``{"ModelOnly": why}``."""
    return c if isinstance(c, str) else next(iter(c))  # type: ignore[call-overload]


def diff(
    files: str | Sequence[str],
    *,
    guest: str | None = None,
    timeout: int = 120,
) -> pd.DataFrame:
    """Runs scenario files natively beside the model and returns one row per compared row.

    On the host's own kernel (as root), or with ``guest="6.1"`` / ``"6.12"`` in one boot of
    Debian's kernel under qemu (``docs/host.md``; the guest's ``/init`` is the ``mmsim`` binary,
    named by ``MMSIM_GUEST_INIT`` when Python runs this). Columns: ``scenario``, ``release``
    (the kernel's ``uname -r``), ``line``, ``what``, ``expected``, ``kernel``, ``model``,
    ``class`` (how the row compares: ``Exact``, ``Change``, ``Noisy``, ``Progress``,
    ``ModelOnly``), ``verdict`` (``agree``, ``disagree``, ``declared``, ``stale``,
    ``model_only``; ``refused`` or ``lost`` for a scenario that did not run, with the reason)
    and ``reason``.
    """
    names = [files] if isinstance(files, str) else list(files)
    results = json.loads(_core.diff(names, guest, timeout))
    rows: list[dict[str, object]] = []
    for r in results:
        outcome = r["outcome"]
        report = outcome.get("compared")
        if report is None:
            verdict, why = next(iter(outcome.items()))
            rows.append({"scenario": r["scenario"], "verdict": verdict, "reason": why})
            continue
        for row in report["rows"]:
            rows.append(
                {
                    "scenario": r["scenario"],
                    "release": report["release"],
                    **{k: row.get(k) for k in ("line", "what", "expected", "kernel", "model")},
                    "class": _class_name(row["class"]),
                    "verdict": row["verdict"],
                    "reason": row.get("reason"),
                }
            )
    return pd.DataFrame(rows, columns=_COLUMNS)
