"""Scenario files run from Python, and determinism."""

import pytest

import mmsim


def test_fork_cow_scenario_passes_and_shows_smaps(scenarios):
    result = mmsim.run_scenario(scenarios / "fork-cow.toml", show="smaps:parent")
    assert result.passed, result.failures
    assert result.failures.empty
    assert list(result.failures.columns) == ["line", "expected", "observed"]
    assert result.stopped is None
    report = result.report
    assert report["expectations"] == 5
    assert report["operations"] > 0
    assert dict(report["switches"])["cow_reuse"] == "anon_exclusive"
    assert set(report) >= {"scenario", "kernel", "seed", "digest", "virtual_time_ns", "events"}
    smaps = result.shown["/proc/parent/smaps"]
    assert "Shared_Dirty" in smaps and "VmFlags" in smaps


def test_failed_expectations_are_a_dataframe(tmp_path, scenarios):
    wrong = (scenarios / "fork-cow.toml").read_text().replace("equals = 17", "equals = 99")
    path = tmp_path / "wrong.toml"
    path.write_text(wrong)
    result = mmsim.run_scenario(path)
    assert not result.passed
    assert len(result.failures) == 1
    failure = result.failures.iloc[0]
    lines = wrong.splitlines()
    value = lines.index("equals = 99") + 1  # 1-based
    header = value - lines[value - 1 :: -1].index("[[expect]]")
    assert header <= failure.line <= value, "the line of the failed `[[expect]]` block"
    assert "= 99" in failure.expected and "= 17" in failure.observed


def test_broken_scenario_raises_scenario_error_with_line(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text(
        '[[process]]\nname = "p"\n[[step]]\nprocess = "p"\nops = [\n'
        '  { op = "mmap", len = "4KiB", prot = "rw", flags = "private|anonymous" },\n'
        '  { op = "teleport" },\n]\n'
    )
    with pytest.raises(mmsim.ScenarioError) as e:
        mmsim.run_scenario(path)
    assert isinstance(e.value, ValueError)
    assert e.value.file == str(path)
    assert e.value.line == 7
    assert "unknown operation `teleport`" in str(e.value)


def test_missing_file_and_bad_overrides(tmp_path, scenarios):
    with pytest.raises(mmsim.ScenarioError) as e:
        mmsim.run_scenario(tmp_path / "absent.toml")
    assert e.value.line == 0
    with pytest.raises(mmsim.ScenarioError, match="unknown setting `tlb`"):
        mmsim.run_scenario(scenarios / "fork-cow.toml", set={"tlb": "lazy"})
    with pytest.raises(mmsim.ConfigError):
        mmsim.run_scenario(scenarios / "fork-cow.toml", kernel="v9.9")
    with pytest.raises(ValueError, match="unknown observable"):
        mmsim.run_scenario(scenarios / "fork-cow.toml", show="pagecache")


def test_overrides_reach_the_run(scenarios):
    result = mmsim.run_scenario(
        scenarios / "fork-cow.toml", seed=9, set={"cost.copy_page_4k": 1000}
    )
    baseline = mmsim.run_scenario(scenarios / "fork-cow.toml", seed=9)
    assert result.report["seed"] == 9
    assert result.passed
    assert result.report["virtual_time_ns"] > baseline.report["virtual_time_ns"], (
        "a dearer page copy makes the run longer"
    )


def test_same_seed_same_digest(scenarios):
    first = mmsim.run_scenario(scenarios / "fork-cow.toml", seed=7)
    second = mmsim.run_scenario(scenarios / "fork-cow.toml", seed=7)
    assert first.digest == second.digest
    assert first.report == second.report


def machine_digest(seed: int, pages: int) -> tuple[str, int, list[int]]:
    m = mmsim.Machine(seed=seed)
    p = m.process("p")
    buf = p.mmap("1MiB")
    p.touch(buf, pages * 4096, "write")
    child = p.fork()
    child.write_bytes(buf, b"x")
    return m.digest, m.now_ns, m.vmstat().tolist()


def test_machine_is_deterministic():
    assert machine_digest(5, 16) == machine_digest(5, 16)
    assert machine_digest(5, 16)[0] != machine_digest(5, 17)[0], "the digest sees the history"
