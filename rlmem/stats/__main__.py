"""``python -m rlmem.stats``: :mod:`rlmem.stats` is a library, not a command; this says where
the command is (``python -m rlmem.compare``), so that a library module has no program in it."""

from __future__ import annotations


def main() -> int:
    """Print where the statistics are documented and which command compares runs."""
    print("rlmem.stats is the statistics library (IQM, bootstrap intervals, probability of "
          "improvement, performance profiles; `python -c \"import rlmem.stats; "
          "help(rlmem.stats)\"`). To compare runs, use its command line: "
          "python -m rlmem.compare RUN_OR_GLOB... (--help lists its options).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
