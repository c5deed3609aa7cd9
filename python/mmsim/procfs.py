"""Parsers from the kernel's ``/proc`` text formats to pandas objects.

The simulator prints its observables in the kernel's own formats; these functions read them.
They read the same files of a real Linux machine too, so simulated and measured numbers can be
compared in one table::

    real = mmsim.procfs.parse_smaps(open(f"/proc/{pid}/smaps").read())
"""

from __future__ import annotations

import re

import pandas as pd

__all__ = ["Address", "parse_fields", "parse_smaps", "parse_vmstat"]


class Address(int):
    """A virtual address: an ``int`` in every way (arithmetic gives plain ints, it compares
    and hashes as its value) that prints in hex, as ``/proc`` prints addresses, so a DataFrame
    column of them reads ``0x7f0000000000`` rather than ``139637976727552``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"0x{int(self):x}"

    __str__ = __repr__


def addresses(values: list[int]) -> pd.Series:
    """``values`` as an object column of :class:`Address` (pandas would make plain int64 of it)."""
    return pd.Series([Address(v) for v in values], dtype=object)

# `start-end perms offset dev inode [path]`, the first line of each VMA in maps and smaps.
_VMA = re.compile(
    r"^(?P<start>[0-9a-f]+)-(?P<end>[0-9a-f]+)\s+(?P<perms>\S{4})\s+(?P<offset>[0-9a-f]+)\s+"
    r"(?P<dev>[0-9a-f]+:[0-9a-f]+)\s+(?P<inode>\d+)\s*(?P<path>.*)$"
)
# `Name:   123 kB` or `Name:   123`.
_FIELD = re.compile(r"^(?P<name>[A-Za-z][\w()]*):\s*(?P<value>\d+)(?: kB)?\s*$")
_VMA_COLUMNS = ["start", "end", "perms", "offset", "dev", "inode", "path"]


def parse_smaps(text: str) -> pd.DataFrame:
    """One row per VMA of ``/proc/PID/smaps`` text.

    Columns: ``start``, ``end`` (:class:`Address`: ints that print in hex), ``offset`` (int), ``perms``, ``dev``, ``inode``, ``path``
    (``""`` for an anonymous mapping), then every field in the order the kernel prints them:
    sizes in kB as ints (``Size``, ``Rss``, ``Pss``, ...), other numbers (``THPeligible``) as ints,
    and ``VmFlags`` as a string of mnemonics (``"rd wr mr mw me ac"``).
    """
    rows: list[dict[str, object]] = []
    for line in text.splitlines():
        vma = _VMA.match(line)
        if vma:
            rows.append(
                {
                    "start": int(vma["start"], 16),
                    "end": int(vma["end"], 16),
                    "perms": vma["perms"],
                    "offset": int(vma["offset"], 16),
                    "dev": vma["dev"],
                    "inode": int(vma["inode"]),
                    "path": vma["path"].strip(),
                }
            )
            continue
        if not rows:
            raise ValueError(f"not smaps text: expected a VMA line first, found {line!r}")
        if line.startswith("VmFlags:"):
            rows[-1]["VmFlags"] = line.removeprefix("VmFlags:").strip()
            continue
        field = _FIELD.match(line)
        if field is None:
            raise ValueError(f"not smaps text: cannot read {line!r}")
        rows[-1][field["name"]] = int(field["value"])
    if not rows:
        return pd.DataFrame(columns=_VMA_COLUMNS)
    frame = pd.DataFrame(rows)
    for column in ("start", "end"):
        frame[column] = addresses(frame[column].tolist())
    return frame


def parse_fields(text: str, name: str | None = None) -> pd.Series:
    """The ``Name: value [kB]`` lines of ``/proc/meminfo``, ``/proc/PID/status`` or
    ``/proc/PID/smaps_rollup`` as an int64 Series indexed by field name, in the kernel's order
    (values in kB where the kernel prints kB). Other lines (the rollup's header, text fields of a
    real status file) are skipped."""
    names: list[str] = []
    values: list[int] = []
    for line in text.splitlines():
        field = _FIELD.match(line)
        if field:
            names.append(field["name"])
            values.append(int(field["value"]))
    return pd.Series(values, index=pd.Index(names, name="field"), dtype="int64", name=name)


def parse_vmstat(text: str) -> pd.Series:
    """``/proc/vmstat`` as an int64 Series indexed by counter name, in the kernel's order."""
    names: list[str] = []
    values: list[int] = []
    for line in text.splitlines():
        counter, _, value = line.partition(" ")
        if not value:
            raise ValueError(f"not vmstat text: cannot read {line!r}")
        names.append(counter)
        values.append(int(value))
    return pd.Series(values, index=pd.Index(names, name="counter"), dtype="int64", name="vmstat")
