"""The matplotlib helper."""

import matplotlib

matplotlib.use("Agg")

import mmsim  # noqa: E402
from mmsim import plot  # noqa: E402


def test_rss_by_vma_draws_one_bar_per_vma(machine):
    machine.create_file("/lib/a", "64KiB")
    p = machine.process("p")
    p.touch(p.mmap("64KiB"), "32KiB", "write")
    fd = p.open("/lib/a")
    p.touch(p.mmap("64KiB", "r", "private", fd=fd), "64KiB")
    smaps = machine.smaps(p)
    ax = plot.rss_by_vma(smaps)
    widths = sorted(bar.get_width() for bar in ax.patches)
    assert widths == sorted(smaps.Rss.tolist())
    assert any("/lib/a" in label.get_text() for label in ax.get_yticklabels())
    assert isinstance(mmsim.Machine, type)
