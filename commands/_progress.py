"""Progress of the slow steps of a command, on stderr.

On a terminal a rich spinner shows the current stage, its counter (``3/45``) and the elapsed time; when
stderr is not a terminal (a pipe, a log file, CI) every stage is one plain line when it starts and one
when it ends, with its duration, so a log shows what took the time. A stage that ends within ``QUIET_S``
says nothing (a quick command, or one refused at once, keeps its one-line error alone on stderr).
``--json`` output on stdout is never touched.

Library code does not render: it accepts a callback ``progress(message, done=None, total=None)`` (or
logs), and the CLI passes :class:`Progress` (an instance is such a callback).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol


class ProgressCallback(Protocol):
    def __call__(self, message: str, done: int | None = None, total: int | None = None) -> None: ...


QUIET_S = 1.0  # a stage shorter than this is not shown


def no_progress(message: str, done: int | None = None, total: int | None = None) -> None:
    """A callback that shows nothing."""


def _fmt(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{int(seconds // 60)} min {seconds % 60:.0f} s"


class Progress:
    """``with Progress("kb init") as p: with p.stage("embedding"): ...; p("doc 3", 3, 45)``."""

    def __init__(self, name: str, *, enabled: bool = True, terminal: bool | None = None,
                 stream: Any = None) -> None:
        self.name = name
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self._live: Any = None
        self._task: Any = None
        self._stage: str | None = None
        self._stage_t0 = 0.0
        self._last_line = ""
        self.t0 = time.perf_counter()

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> Progress:
        self.t0 = time.perf_counter()
        if self.enabled and self.terminal:
            from rich.console import Console
            from rich.progress import Progress as RichProgress
            from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn
            from rich.table import Column

            # spinner and clock keep their width; a long stage text is cut at the terminal's edge instead
            self._live = RichProgress(
                SpinnerColumn(table_column=Column(min_width=2, no_wrap=True)),
                TimeElapsedColumn(table_column=Column(min_width=7, no_wrap=True)),
                TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
                console=Console(file=self.stream), transient=True)
            self._live.__enter__()
            self._task = self._live.add_task(self.name, total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    # -- reporting -------------------------------------------------------------------------
    def _line(self, text: str) -> None:
        if not self.enabled:
            return
        if self._live is not None:
            self._live.console.print(f"[dim]{self.name}: {text}[/dim]", highlight=False)
            return
        print(f"{self.name}: {text}", file=self.stream, flush=True)

    @contextlib.contextmanager
    def stage(self, message: str) -> Iterator[Progress]:
        """One stage: announced once it has run ``QUIET_S``, its duration said when it ends."""
        self._stage, self._stage_t0 = message, time.perf_counter()
        shown = threading.Event()

        def announce() -> None:
            shown.set()
            if self._live is None:
                self._line(f"{message} ...")

        if self._live is not None:
            self._live.update(self._task, description=f"{self.name}: {message}")
        timer = threading.Timer(QUIET_S, announce)
        timer.daemon = True
        timer.start()
        failed = True
        try:
            yield self
            failed = False
        finally:
            timer.cancel()
            took = time.perf_counter() - self._stage_t0
            if shown.is_set():
                end = "stopped" if failed else "done"
                if self._live is not None:
                    self._live.console.print(f"[dim]{self.name}: {message} ({end} in {_fmt(took)})[/dim]",
                                             highlight=False)
                else:
                    self._line(f"{message}: {end} in {_fmt(took)}")
            self._stage = None

    def __call__(self, message: str, done: int | None = None, total: int | None = None) -> None:
        """The callback library code calls: a sub-step of the current stage, with an optional counter."""
        count = f" [{done}/{total}]" if done is not None and total else ""
        if self._live is not None:
            label = f"{self.name}: {self._stage + ' - ' if self._stage else ''}{message}{count}"
            self._live.update(self._task, description=label)
            return
        line = f"{message}{count}"
        # one line per sub-step, except a counter that moves in small steps: every tenth of the total
        if done is not None and total and total > 20 and done not in (1, total) and done % max(1, total // 10):
            return
        if line != self._last_line:
            self._last_line = line
            self._line(line)
