"""A simulated machine: files, processes, and observables as pandas objects."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from mmsim import _core, procfs

__all__ = ["Machine", "Process", "Size"]

#: The simulated process class: its methods mirror the syscalls (see ``mmsim._core.Process``).
Process = _core.Process

#: A size or offset in bytes: an int, or a string like ``"64KiB"``, ``"2M"`` or ``"1GiB"``.
Size = int | str


class Machine:
    """A simulated machine running one kernel version.

    Every process method is a syscall or memory access that runs to completion, in virtual time,
    before it returns. The same seed and the same calls give the same results, byte for byte.

    Args:
        profile: the machine profile (``"tiny"``: 4 CPUs, 512 MiB; ``"epyc-vm"``: 2 CPUs, 24 GiB).
        kernel: the kernel version (``"v6.8"``, ``"5.12"``); it sets every behaviour switch.
            Default: the newest modelled.
        seed: the run's seed.
        cpus: override the profile's CPU count.
        memory: override the profile's memory size (``"2GiB"`` or bytes).
        scheduler: ``"time-ordered"`` (default), ``"random"``, ``"pct"``, ``"pct:DEPTH"``, ...
        max_events: a bound on scheduling events over the machine's life; reaching it raises
            :class:`mmsim.SimulationStopped`.
        sysfs: transparent-hugepage knobs by sysfs path, written at boot
            (``{"/sys/kernel/mm/transparent_hugepage/enabled": "always"}``).
        **switches: behaviour switches by their kernel names, overriding the kernel's
            (``cow_reuse="anon_exclusive"``).

    Raises:
        mmsim.ConfigError: an unknown profile, kernel, scheduler, switch or switch value, a
            switch value not modelled yet, a THP knob or value the kernel refuses, or an
            impossible size.

    Example::

        m = mmsim.Machine(memory="2GiB")
        p = m.process("reader")
        buf = p.mmap("1GiB")
        p.touch(buf, "1GiB", "read")            # maps the zero page
        assert m.smaps(p).Rss.sum() == 0
    """

    def __init__(
        self,
        profile: str = "tiny",
        kernel: str | None = None,
        seed: int = 0,
        cpus: int | None = None,
        memory: Size | None = None,
        scheduler: str | None = None,
        max_events: int | None = None,
        sysfs: dict[str, str | int] | None = None,
        **switches: str,
    ) -> None:
        self._core = _core.Machine(
            profile=profile,
            kernel=kernel,
            seed=seed,
            cpus=cpus,
            memory=memory,
            scheduler=scheduler,
            switches=switches,
            max_events=max_events,
            sysfs={path: str(value) for path, value in (sysfs or {}).items()},
        )

    def __repr__(self) -> str:
        return repr(self._core)

    @property
    def seed(self) -> int:
        """The run's seed."""
        return self._core.seed

    @property
    def kernel(self) -> str:
        """The kernel version, like ``"v6.8"``."""
        return self._core.kernel

    @property
    def profile(self) -> str:
        """The machine profile's name."""
        return self._core.profile

    @property
    def cpus(self) -> int:
        """The number of CPUs; ``cpu=`` arguments range over ``0 .. cpus - 1``."""
        return self._core.cpus

    @property
    def memory(self) -> int:
        """Physical memory in bytes."""
        return self._core.memory

    @property
    def switches(self) -> dict[str, str]:
        """Every behaviour switch and its value."""
        return self._core.switches

    @property
    def now_ns(self) -> int:
        """Virtual time since boot, in nanoseconds."""
        return self._core.now_ns

    @property
    def digest(self) -> str:
        """The fingerprint of the event history: the same seed and calls give the same digest."""
        return self._core.digest

    def create_file(
        self,
        path: str,
        size: Size,
        fs: str = "ext4",
        content: str = "zeros",
        holes: Sequence[tuple[Size, Size]] = (),
    ) -> None:
        """Creates a file.

        Args:
            path: its path (any string; there are no directories).
            size: its size in bytes.
            fs: ``"ext4"`` (a disk file system with a page cache) or ``"tmpfs"``.
            content: ``"zeros"``, or ``"pattern:SEED"`` for bytes generated from a seed.
            holes: unallocated ``(offset, length)`` ranges, multiples of 4 KiB.

        Raises:
            FileExistsError: the path exists.
            ValueError: a bad ``fs``, ``content`` or hole.
        """
        self._core.create_file(path, size, fs=fs, content=content, holes=list(holes))

    def process(self, name: str) -> Process:
        """A new process called ``name`` with an empty address space."""
        return self._core.new_process(name)

    def _pid(self, process: Process | int) -> int:
        if isinstance(process, int):
            return process
        if process.machine is not self._core:
            raise ValueError(f"{process!r} belongs to another machine")
        return process.pid

    def smaps_text(self, process: Process | int) -> str:
        """``/proc/PID/smaps`` as the kernel prints it."""
        return self._core.smaps_text(self._pid(process))

    def smaps(self, process: Process | int) -> pd.DataFrame:
        """``/proc/PID/smaps``: one row per VMA (``start``, ``end``, ``perms``, ``offset``,
        ``path``, ..., every field in kB as an int, ``VmFlags`` as a string); see
        :func:`mmsim.procfs.parse_smaps`."""
        return procfs.parse_smaps(self.smaps_text(process))

    def smaps_rollup_text(self, process: Process | int) -> str:
        """``/proc/PID/smaps_rollup`` as the kernel prints it (``FileNotFoundError`` before v4.14)."""
        return self._core.smaps_rollup_text(self._pid(process))

    def smaps_rollup(self, process: Process | int) -> pd.Series:
        """``/proc/PID/smaps_rollup``: the process's smaps fields summed, in kB (int64)."""
        return procfs.parse_fields(self.smaps_rollup_text(process), name="smaps_rollup")

    def maps_text(self, process: Process | int) -> str:
        """``/proc/PID/maps`` as the kernel prints it."""
        return self._core.maps_text(self._pid(process))

    def status_text(self, process: Process | int) -> str:
        """The memory lines of ``/proc/PID/status`` as the kernel prints them."""
        return self._core.status_text(self._pid(process))

    def status(self, process: Process | int) -> pd.Series:
        """The memory lines of ``/proc/PID/status`` (``VmRSS``, ``RssAnon``, ...), in kB."""
        return procfs.parse_fields(self.status_text(process), name="status")

    def vmstat_text(self) -> str:
        """``/proc/vmstat`` as the kernel prints it."""
        return self._core.vmstat_text()

    def vmstat(self) -> pd.Series:
        """``/proc/vmstat``: an int64 Series indexed by counter name, in the kernel's order."""
        return procfs.parse_vmstat(self.vmstat_text())

    def meminfo_text(self) -> str:
        """``/proc/meminfo`` as the kernel prints it."""
        return self._core.meminfo_text()

    def lockdep_text(self) -> str:
        """Lockdep's report as the kernel logs it: the first splat, or ``clean``."""
        return self._core.lockdep_text()

    def meminfo(self) -> pd.Series:
        """``/proc/meminfo``: an int64 Series of kB indexed by field name, in the kernel's order."""
        return procfs.parse_fields(self.meminfo_text(), name="meminfo")

    def inspect(self, process: Process | int, addr: int) -> dict[str, int]:
        """The model's state at ``addr`` by kernel names, as drgn would read it: the PTE and
        PMD entries (``pte.present``, ``pte.write``, ``pmd.leaf``, ...) and the fields of the
        folio mapped there (``folio.refcount``, ``folio.mapcount``, ``folio.pincount``,
        ``folio.anon_exclusive`` from v5.19, ``folio.dirty``, ...). Fields the kernel lacks, or
        that have no value at ``addr``, are absent. docs/scenarios.md lists every name."""
        return dict(self._core.inspect(self._pid(process), addr))

    def pagemap(self, process: Process | int, addr: int, pages: int) -> pd.DataFrame:
        """``/proc/PID/pagemap`` for ``pages`` pages from ``addr``, decoded: one row per page,
        indexed by ``addr``, with bool columns ``present``, ``swapped``, ``exclusive``,
        ``soft_dirty``, ``file``, ``zero_page`` and the ``pfn`` (0 when not present); addresses
        print in hex (:class:`mmsim.procfs.Address`)."""
        columns = self._core.pagemap(self._pid(process), addr, pages)
        frame = pd.DataFrame(columns)
        frame["addr"] = procfs.addresses(frame["addr"].tolist())
        return frame.set_index("addr")

    def check(self) -> None:
        """Runs the whole-system checkers (refcounts, mapcounts, page tables, LRU lists, ...).

        Raises:
            mmsim.SimulatorBug: an invariant is broken.
        """
        self._core.check()
