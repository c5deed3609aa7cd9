"""Shared fixtures: the repository root (for scenario files) and a small machine."""

from pathlib import Path

import pytest

import mmsim

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scenarios() -> Path:
    """The worked-example scenario files."""
    return ROOT / "scenarios"


@pytest.fixture
def machine() -> mmsim.Machine:
    """A `tiny` machine (4 CPUs, 512 MiB) running the default kernel, seed 1."""
    return mmsim.Machine(seed=1)
