"""mmsim: a deterministic simulator of Linux memory management.

Configure a machine, drive its processes with syscalls, and read what the kernel would show::

    import mmsim

    m = mmsim.Machine(kernel="v6.8", seed=1)
    p = m.process("parent")
    buf = p.mmap("64KiB")
    p.write_bytes(buf, b"hello")
    child = p.fork()
    child.write_bytes(buf, b"HELLO")          # copy-on-write
    assert p.read_bytes(buf, 5) == b"hello"
    m.smaps(p)                                # a pandas DataFrame, one row per VMA
    m.vmstat()["pgreuse"]                     # a pandas Series of /proc/vmstat

Scenario files run with :func:`run_scenario`; the published measurements with
:func:`reproduce` (``mmsim.reproduce("cow-reuse").rows`` is a DataFrame); grids of runs with
:func:`sweep` (on Dask, a DataFrame with a row per point); the real kernel beside the model with
:func:`diff` (a DataFrame of kernel and model per row); the ``mmsim`` command
is installed with the package. Python configures, runs and analyses; every
mechanism runs in the compiled simulator (``mmsim._core``).
"""

from mmsim._core import __version__
from mmsim.errors import (
    BusError,
    ConfigError,
    MemoryAccessError,
    MmsimError,
    OutOfMemory,
    ScenarioError,
    SegmentationFault,
    SimulationStopped,
    SimulatorBug,
)
from mmsim.diff import diff
from mmsim.machine import Machine, Process
from mmsim.reproduce import Reproduction, experiments, reproduce
from mmsim.scenario import ScenarioResult, run_scenario
from mmsim.sweep import sweep

__all__ = [
    "BusError",
    "ConfigError",
    "Machine",
    "MemoryAccessError",
    "MmsimError",
    "OutOfMemory",
    "Process",
    "Reproduction",
    "ScenarioError",
    "ScenarioResult",
    "SegmentationFault",
    "SimulationStopped",
    "SimulatorBug",
    "__version__",
    "diff",
    "experiments",
    "reproduce",
    "run_scenario",
    "sweep",
]
