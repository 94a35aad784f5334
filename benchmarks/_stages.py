"""Progress of the benchmark scripts: one line per stage on stderr, with the time since the start.

The scripts run for minutes; these lines say what they are doing (the tables go to stdout at the end).
"""

from __future__ import annotations

import sys
import time

_T0 = time.perf_counter()


def stage(text: str) -> None:
    """``[  12.3 s] text`` on stderr, flushed at once (visible in a pipe or a CI log)."""
    print(f"[{time.perf_counter() - _T0:7.1f} s] {text}", file=sys.stderr, flush=True)
