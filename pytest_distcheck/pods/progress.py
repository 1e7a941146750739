"""A progress bar (rich) for the bounded wait on a pod: what it is doing, and time used of the limit."""

from __future__ import annotations

import time
from typing import Any, TextIO


class WaitBar:
    """Call it with status texts; the bar shows seconds elapsed out of ``total_s``. ``close()`` ends it.

    Drawn on ``file`` (a terminal: live; anything else: rich prints the final state only).
    """

    def __init__(self, title: str, total_s: float, file: TextIO) -> None:
        self.title = title
        self.total_s = total_s
        self.file = file
        self._progress: Any = None
        self._task: Any = None
        self._t0 = time.monotonic()

    def __call__(self, text: str) -> None:
        if self._progress is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                      TimeElapsedColumn(), TextColumn(f"of {self.total_s:.0f} s"),
                                      console=Console(file=self.file), transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.title, total=self.total_s)
        elapsed = min(time.monotonic() - self._t0, self.total_s)
        self._progress.update(self._task, description=f"{self.title}: {text}", completed=elapsed)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
