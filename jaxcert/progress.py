"""Progress displays with elapsed time and an estimate of what remains (``rich.progress``).

On a terminal the display is a rich progress bar redrawn in place; otherwise (CI logs,
pipes) one plain line per step, so logs stay readable.  Each step carries a weight, its
expected share of the run.  The estimate of what remains is computed from what remains:

    left = r × (weight of the steps not started) + max(0, r × w_current − time in the current step)

with r the seconds per unit weight of the steps finished in this process (their total time over
their total weight: a cumulative rate, so one fast or slow step moves it little).  It counts down
while a step runs instead of freezing, never goes back to "unknown" once known, and is an
estimate, not a promise: a cold run is dominated by compilation, which the weights only
approximate.  The suite reports the phase of the current step (:meth:`StepProgress.phase`:
"compiling" while it waits for the step's programs, then "running"), and the display shows it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["StepProgress", "PROBE_WEIGHTS", "format_seconds"]

#: Relative cost of each probe in a suite run (measured shares of a cold LJ run, rounded): the
#: trajectory owner pays the Langevin run, zero_modes and cross_maxwell relax first.
PROBE_WEIGHTS: dict[str, float] = {
    "config_temperature": 4.0, "zero_modes": 2.0, "cross_maxwell": 2.0, "reversibility": 1.5, "trimer": 1.5,
}


def format_seconds(s: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


class StepProgress:
    """Progress over named steps with weights.

    Use as ``certify(..., progress=StepProgress(names))``: the object is the suite's callback
    ``(name, index, total, seconds_of_previous)``; ``"done"`` closes the display.

    Args:
      names: the steps in order.
      weights: name → relative cost (default 1; :data:`PROBE_WEIGHTS` for probes).
      label: what is running (shown before the step name).
      stream: where to draw (stderr by default); rich is used only if it is a terminal.
      done: names already finished (a resumed run), counted as done from the start.
    """

    def __init__(self, names: Sequence[str], weights: Mapping[str, float] | None = None, label: str = "",
                 stream: Any = None, done: Sequence[str] = ()) -> None:
        self.names = list(names)
        self.weights = {n: float((weights or {}).get(n, 1.0)) for n in self.names}
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.total = sum(self.weights.values()) or 1.0
        self.finished = {n for n in done if n in self.weights}
        self.t0 = time.perf_counter()
        self.current: str | None = None
        self.current_phase = ""
        self._t_step = self.t0  # when the current step started
        self._timed: set[str] = set()  # steps finished in this process (what the rate is measured on)
        self._timed_s = 0.0  # their total time
        self._rich: Any = None
        self._task: Any = None
        if getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                ProgressColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.text import Text

            owner = self

            class Left(ProgressColumn):  # re-rendered at every refresh: the estimate counts down live
                def render(self, task: Any) -> Text:
                    s = owner.remaining_s()
                    return Text("estimating…" if s is None else f"about {format_seconds(s)} left")

            self._rich = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[steps]}"),
                                  TimeElapsedColumn(), Left(), console=Console(file=self.stream), transient=False)
            self._rich.start()
            self._task = self._rich.add_task(label, total=self.total, completed=self._done_weight(),
                                             steps=self._steps())

    def _done_weight(self) -> float:
        return sum(self.weights[n] for n in self.finished)

    def _steps(self) -> str:
        return f"{len(self.finished)}/{len(self.names)}"

    def remaining_s(self) -> float | None:
        """Estimated seconds left (None until the first step of this process finishes); see the module
        docstring for the formula."""
        done = sum(self.weights[n] for n in self._timed)
        if done <= 0:
            return None
        rate = self._timed_s / done
        cur = self.weights.get(self.current, 0.0) if self.current is not None else 0.0
        not_started = self.total - self._done_weight() - cur
        in_step = time.perf_counter() - self._t_step
        return rate * max(0.0, not_started) + max(0.0, rate * cur - in_step)

    def phase(self, what: str) -> None:
        """The current step's phase ("compiling", "running"): shown in the display (a plain line off a
        terminal when the phase is "compiling", so a log never sits silent while programs compile)."""
        self.current_phase = what
        if self.current is None:
            return
        if self._rich is not None:
            self._rich.update(self._task, description=f"{self.label} · {what} {self.current}".strip(" ·"))
        elif what == "compiling":
            print(f"      compiling {self.current} · elapsed {format_seconds(time.perf_counter() - self.t0)}",
                  file=self.stream, flush=True)

    def __call__(self, name: str, idx: int, total: int, last: float) -> None:
        now = time.perf_counter()
        if self.current is not None and self.current in self.weights:
            self.finished.add(self.current)
            self._timed.add(self.current)
            self._timed_s += now - self._t_step
        self._t_step = now
        self.current_phase = ""
        if name == "done":
            self.close()
            return
        self.current = name
        if self._rich is not None:
            self._rich.update(self._task, completed=self._done_weight(), description=f"{self.label} {name}".strip(),
                              steps=self._steps())
            return
        left = self.remaining_s()
        est = f" · about {format_seconds(left)} left" if left is not None else ""
        print(f"[{len(self.finished) + 1}/{len(self.names)}] {self.label + ' ' if self.label else ''}{name} · "
              f"elapsed {format_seconds(time.perf_counter() - self.t0)}{est}", file=self.stream, flush=True)

    def close(self) -> None:
        """Finish the display (idempotent)."""
        if self._rich is not None:
            self._rich.update(self._task, completed=self.total, description=f"{self.label} done".strip(),
                              steps=self._steps())
            self._rich.stop()
            self._rich = None
        elif self.current is not None:
            print(f"done · {len(self.finished)}/{len(self.names)} · elapsed "
                  f"{format_seconds(time.perf_counter() - self.t0)}", file=self.stream, flush=True)
        self.current = None
