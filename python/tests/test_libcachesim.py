"""The pure-LRU page-cache replay (`mmsim replay --cache SIZE --policy pure`) misses exactly as
often as libCacheSim's LRU (the `libcachesim` package) on the same requests of the ARC traces
(Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead Replacement Cache", FAST '03)."""

import json
from pathlib import Path

import libcachesim
import pytest

from mmsim import cli

ARC = Path(__file__).resolve().parents[2] / "traces" / "arc"
REQUESTS = 200_000


@pytest.mark.parametrize(("trace", "pages"), [("P6", 2048), ("P6", 32768), ("P12", 16384)])
def test_pure_lru_misses_equal_libcachesim(tmp_path, capfd, trace, pages):
    source = ARC / f"{trace}.lis.zst"
    oracle = tmp_path / f"{trace}.oracleGeneral"
    convert = ["trace", "convert", "--oracle-general", "--max-requests", str(REQUESTS)]
    assert cli.main([*convert, str(source), str(oracle)]) == 0
    capfd.readouterr()
    replay = ["replay", str(source), "--cache", f"{pages * 4}KiB", "--policy", "pure"]
    assert cli.main([*replay, "--max-requests", str(REQUESTS), "--json"]) == 0
    report = json.loads(capfd.readouterr().out)
    reader = libcachesim.TraceReader(str(oracle), libcachesim.TraceType.ORACLE_GENERAL_TRACE)
    miss_ratio, _ = libcachesim.LRU(pages * 4096).process_trace(reader, 0, REQUESTS)
    assert report["requests"] == REQUESTS
    assert report["misses"] == round(miss_ratio * REQUESTS)
