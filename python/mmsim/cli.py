"""The ``mmsim`` command installed with the package: the same program as the Rust binary."""

from __future__ import annotations

import sys

from mmsim import _core

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Runs ``mmsim`` with ``argv`` (default: ``sys.argv``) and returns its exit status."""
    args = sys.argv if argv is None else ["mmsim", *argv]
    return int(_core.cli_main([str(a) for a in args]))


if __name__ == "__main__":
    sys.exit(main())
