"""Plots of mmsim results with matplotlib (an optional dependency: ``pip install
linux-mmsim[plot]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["rss_by_vma"]


def rss_by_vma(smaps: pd.DataFrame, field: str = "Rss", ax: Axes | None = None) -> Axes:
    """A horizontal bar per VMA of ``field`` (kB) from :meth:`mmsim.Machine.smaps`, labelled by
    the mapping's path (or its address range for an anonymous mapping) and permissions.

    Returns the Axes drawn on (a new figure's when ``ax`` is None).
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.4 * len(smaps) + 1.5))
    labels = [
        f"{path or f'{start:x}-{end:x}'} {perms}"
        for path, start, end, perms in zip(smaps.path, smaps.start, smaps.end, smaps.perms)
    ]
    ax.barh(labels, smaps[field], color="tab:blue")
    ax.invert_yaxis()
    ax.set_xlabel(f"{field} (kB)")
    ax.set_title(f"{field} by VMA")
    return ax
