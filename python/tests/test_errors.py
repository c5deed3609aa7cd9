"""Kernel errors, signals, bad input and simulator failures as Python exceptions."""

import errno

import pytest

import mmsim


def test_errno_is_the_matching_oserror_subclass(machine):
    p = machine.process("p")
    with pytest.raises(FileNotFoundError) as e:
        p.open("/no/such/file")
    assert e.value.errno == errno.ENOENT
    assert e.value.filename == "/no/such/file"
    assert "open in pid" in e.value.__notes__[0]

    with pytest.raises(OSError) as e:
        p.mmap(0)
    assert e.value.errno == errno.EINVAL
    assert type(e.value) is OSError

    with pytest.raises(OSError) as e:
        p.close(42)
    assert e.value.errno == errno.EBADF

    machine.create_file("/f", 4096)
    with pytest.raises(FileExistsError):
        machine.create_file("/f", 4096)
    fd = p.open("/f")
    with pytest.raises(OSError) as e:
        p.write(fd, b"read-only descriptor")
    assert e.value.errno == errno.EBADF


def test_writing_a_running_executable_is_etxtbsy(machine):
    machine.create_file("/bin/app", "4MiB")
    machine.process("app").exec("/bin/app")
    with pytest.raises(OSError) as e:
        machine.process("writer").open("/bin/app", "rdwr")
    assert e.value.errno == errno.ETXTBSY


def test_signals_raise_memory_access_errors(machine):
    p = machine.process("p")
    with pytest.raises(mmsim.SegmentationFault) as e:
        p.touch(0x1000, 4096)
    assert isinstance(e.value, mmsim.MemoryAccessError)
    assert (e.value.signal, e.value.pid) == ("SIGSEGV", p.pid)

    ro = p.mmap("4KiB", "r")
    with pytest.raises(mmsim.SegmentationFault):
        p.write_bytes(ro, b"x")

    machine.create_file("/small", 4096)
    fd = p.open("/small", "rdwr")
    beyond = p.mmap("8KiB", "rw", "shared", fd=fd)
    p.touch(beyond, 4096)
    with pytest.raises(mmsim.BusError) as e:
        p.touch(beyond + 4096, 1)
    assert e.value.signal == "SIGBUS"


def test_out_of_memory_kills_with_sigkill():
    m = mmsim.Machine(memory="16MiB")
    p = m.process("hog")
    buf = p.mmap("64MiB")
    with pytest.raises(mmsim.OutOfMemory) as e:
        p.touch(buf, "64MiB", "write")
    assert e.value.signal == "SIGKILL"


def test_bad_arguments_are_value_errors(machine):
    p = machine.process("p")
    with pytest.raises(ValueError, match="prot"):
        p.mmap("4KiB", prot="rq")
    with pytest.raises(ValueError, match="unknown `anon`"):
        p.mmap("4KiB", flags="private|anon")
    with pytest.raises(ValueError, match='found "lots"'):
        p.mmap("lots")
    with pytest.raises(TypeError):
        p.mmap([4096])
    with pytest.raises(ValueError, match="needs one of rdonly"):
        p.open("/f", "append")
    with pytest.raises(ValueError, match="cpu 4: the machine has CPUs 0 to 3"):
        p.mmap("4KiB", cpu=4)
    with pytest.raises(ValueError, match="pattern:SEED"):
        machine.create_file("/f", 4096, content="pattern:x")
    with pytest.raises(ValueError, match="multiples of 4 KiB"):
        machine.create_file("/f", 8192, holes=[(100, 4096)])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cow_reuse": "sometimes"}, "switch `cow_reuse` has no value `sometimes`"),
        ({"tlb": "lazy"}, "unknown switch `tlb`"),
        ({"lru": "mglru", "kernel": "v5.15"}, "lru = mglru is not modelled for v5.15"),
        ({"kernel": "v9.9"}, "outside the modelled range"),
        ({"profile": "vax"}, "unknown machine profile `vax`"),
        ({"cpus": 0}, "a machine has 1 to 4096 CPUs"),
        ({"scheduler": "fifo"}, "unknown scheduler `fifo`"),
    ],
)
def test_bad_configuration_is_config_error(kwargs, message):
    with pytest.raises(mmsim.ConfigError, match=message) as e:
        mmsim.Machine(**kwargs)
    assert isinstance(e.value, ValueError)


def test_switches_by_kernel_name():
    m = mmsim.Machine(kernel="v5.12", cow_reuse="anon_exclusive")
    assert m.kernel == "v5.12"
    assert m.switches["cow_reuse"] == "anon_exclusive"
    assert m.switches["file_thp"] == "denywrite", "the other switches follow the kernel"


def test_exited_process_refuses_calls(machine):
    p = machine.process("p")
    child = p.fork()
    child.exit()
    with pytest.raises(ProcessLookupError, match="has exited"):
        child.mmap("4KiB")
    other = mmsim.Machine().process("elsewhere")
    with pytest.raises(ValueError, match="another machine"):
        machine.smaps(other)


def test_simulator_panic_raises_simulator_bug_with_seed_and_poisons_machine():
    m = mmsim.Machine(seed=42)
    p = m.process("p")
    with pytest.raises(mmsim.SimulatorBug) as e:
        m._core._inject_panic(p.pid, "invariant broken: test")
    assert isinstance(e.value, RuntimeError)
    assert e.value.seed == 42
    assert "invariant broken: test" in str(e.value)
    assert "reproduce with seed=42" in str(e.value)
    with pytest.raises(mmsim.SimulatorBug, match="unusable after a simulator bug"):
        p.mmap("4KiB")
    with pytest.raises(mmsim.SimulatorBug):
        m.vmstat()
    # The interpreter and other machines are unaffected.
    assert mmsim.Machine().process("q").mmap("4KiB") > 0


def test_event_bound_raises_simulation_stopped():
    m = mmsim.Machine(seed=3, max_events=50)
    p = m.process("p")
    buf = p.mmap("1MiB")
    with pytest.raises(mmsim.SimulationStopped, match="event bound exceeded") as e:
        p.touch(buf, "1MiB", "write")
    assert e.value.seed == 3
    with pytest.raises(mmsim.SimulationStopped, match="stopped earlier"):
        p.mmap("4KiB")
    assert m.smaps(p).Rss.iloc[0] > 0, "observables stay readable after a stop"
