"""Exceptions raised by mmsim.

A simulated syscall that fails raises the built-in :class:`OSError` subclass of its errno
(``ENOENT`` gives :class:`FileNotFoundError`, ``EINVAL`` a plain :class:`OSError` with
``errno == 22``), exactly as the same call would in Python on Linux. Everything else is one of
the classes below, all subclasses of :class:`MmsimError`:

- :class:`MemoryAccessError` and its subclasses: a simulated memory access raised a signal.
- :class:`ConfigError` and :class:`ScenarioError` (both :class:`ValueError`): bad input.
- :class:`SimulatorBug` (a :class:`RuntimeError`): an invariant of the simulator broke; the
  message and ``.seed`` say how to reproduce it.
- :class:`SimulationStopped` (a :class:`RuntimeError`): the simulation could not go on (every
  task blocked, or the event bound was reached).

The compiled core (``mmsim._core``) raises these classes; they are defined here so that they
carry their attributes and docstrings in plain Python.
"""

from __future__ import annotations

__all__ = [
    "BusError",
    "ConfigError",
    "MemoryAccessError",
    "MmsimError",
    "OutOfMemory",
    "ScenarioError",
    "SegmentationFault",
    "SimulationStopped",
    "SimulatorBug",
]


class MmsimError(Exception):
    """Base class of every mmsim-specific exception."""


class ConfigError(MmsimError, ValueError):
    """An impossible machine: an unknown profile, kernel, switch or switch value, a switch value
    whose behaviour is not modelled yet, or an impossible size. The message is the simulator's."""


class ScenarioError(MmsimError, ValueError):
    """A scenario file that cannot be run as written.

    Attributes:
        file: the scenario file.
        line: the 1-based line of the problem, or 0 when it is not tied to a line (an unreadable
            file, an override that does not apply).
    """

    def __init__(self, message: str, file: str, line: int) -> None:
        super().__init__(message)
        self.file = file
        self.line = line


class MemoryAccessError(MmsimError):
    """A simulated memory access raised a signal.

    Attributes:
        signal: the signal's name (``"SIGSEGV"``, ``"SIGBUS"``, ``"SIGKILL"``).
        pid: the simulated process that made the access.
    """

    signal: str = ""

    def __init__(self, message: str, pid: int) -> None:
        super().__init__(message)
        self.pid = pid


class SegmentationFault(MemoryAccessError):
    """SIGSEGV: no mapping at the address, or a mapping without the access right."""

    signal = "SIGSEGV"


class BusError(MemoryAccessError):
    """SIGBUS: a file mapping beyond the end of the file, or a page that cannot be provided."""

    signal = "SIGBUS"


class OutOfMemory(MemoryAccessError):
    """SIGKILL from the OOM killer: no memory could be found for a fault."""

    signal = "SIGKILL"


class SimulatorBug(MmsimError, RuntimeError):
    """An invariant of the simulator broke (a panic inside it, or a failed whole-system check).

    This is a bug in mmsim, not in the simulated program. The machine that raised it refuses
    further use. The message ends with the seed (and scheduler) that reproduce it.

    Attributes:
        seed: the machine's seed.
    """

    def __init__(self, message: str, seed: int) -> None:
        super().__init__(message)
        self.seed = seed


class SimulationStopped(MmsimError, RuntimeError):
    """The simulation could not go on: every task was blocked (the watchdog's report says on
    what) or the bound on scheduling events was reached. The machine refuses further calls;
    its observables can still be read.

    Attributes:
        seed: the machine's seed.
    """

    def __init__(self, message: str, seed: int) -> None:
        super().__init__(message)
        self.seed = seed
