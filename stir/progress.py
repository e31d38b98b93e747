"""Progress of long work: a tqdm bar on a terminal, a log line every few percent otherwise.

One library for every bar: tqdm, which Lightning's own training bar (``TQDMProgressBar``) already
uses and which is a dependency anyway (rich would be a second one for the same job). What reports
progress: inversions (images x steps, the current median residual, the ETA), difficulty walks,
stitching fits and the units of a preset (unit i of N, what is measured); training has Lightning's
bar (``trainer.enable_progress_bar``).

    with Progress(total=n * steps, desc="inverting", unit="image-step") as bar:
        for ...:
            bar.update(n, r1=lambda: float(loss.median()))   # callables run only when shown

On a terminal (stderr is a TTY) the bar redraws itself; elsewhere (a log file, CI, a job's output)
nothing redraws, and a line ``desc: 35% (350,000 of 1,000,000 image-step), r1 0.061, 2m10s, ETA 4m01s``
is logged at INFO each time another ``every`` of the work is done, at most once per ``min_interval``
seconds, plus a last line when work that took longer than that ends. ``enabled=False`` is silent.
"""
from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any, Callable, Dict, Optional, Union

log = logging.getLogger("stir.progress")

Value = Union[float, int, str, Callable[[], Any]]
EVERY = 0.05  # a log line each time another 5% of the work is done (no terminal) ...
MIN_INTERVAL = 5.0  # ... at most one per 5 seconds


def on_terminal() -> bool:
    """Whether a bar can redraw itself: stderr is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


def clock(seconds: float) -> str:
    """4s, 3m05s, 1h12m ("?" when not finite)."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _show(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


class Progress:
    """One piece of long work: ``total`` units (``unit``), ``desc`` saying what is done.

    Args:
        total: units of the whole work (image-steps, steps, units of a preset ...).
        desc: what is done, shown before the bar and at the start of every log line.
        enabled: False: no bar, no line.  terminal: force the bar (True) or the log lines (False);
            None: the bar when stderr is a terminal.
        every: log a line each time this fraction more of the work is done (terminal off; ``EVERY``).
        min_interval: at most one log line per this many seconds, the last one excepted (``MIN_INTERVAL``).
        leave: keep the finished bar on screen (inner bars of nested work: False).
    """

    def __init__(self, total: int, desc: str, unit: str = "it", *, enabled: bool = True,
                 terminal: Optional[bool] = None, every: Optional[float] = None,
                 min_interval: Optional[float] = None, leave: bool = True, logger: logging.Logger = log):
        self.total, self.desc, self.unit = max(int(total), 0), desc, unit
        self.enabled = enabled and self.total > 0
        self.terminal = on_terminal() if terminal is None else terminal
        self.every = EVERY if every is None else every
        self.min_interval = MIN_INTERVAL if min_interval is None else min_interval
        self.log = logger
        self.done = 0
        self.start = time.monotonic()
        self._last_line = self.start
        self._next_fraction = self.every
        self._last_postfix = -math.inf
        self._lines = 0
        self._bar = None
        if self.enabled and self.terminal:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=f" {unit}", unit_scale=True, leave=leave,
                             dynamic_ncols=True, mininterval=0.5, smoothing=0.1)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    def eta(self) -> float:
        """Seconds left at the rate so far (inf before any unit is done)."""
        elapsed = time.monotonic() - self.start
        return math.inf if self.done == 0 else elapsed * (self.total - self.done) / self.done

    def update(self, n: int = 1, **postfix: Value) -> None:
        """``n`` more units done; ``postfix``: what to show beside the count (values or callables)."""
        if not self.enabled:
            return
        self.done = min(self.done + int(n), self.total)
        now = time.monotonic()
        if self._bar is not None:
            if postfix and now - self._last_postfix >= 0.5:  # computing a median may sync a GPU: not every step
                self._bar.set_postfix({k: _show(_value(v)) for k, v in postfix.items()}, refresh=False)
                self._last_postfix = now
            self._bar.update(int(n))
            return
        if self.fraction + 1e-12 >= self._next_fraction and now - self._last_line >= self.min_interval:
            self._line(postfix, now)
        while self._next_fraction <= self.fraction + 1e-12:
            self._next_fraction += self.every

    def describe(self, desc: str) -> None:
        """Change what the bar says it is doing (unit i of N: what is measured now)."""
        self.desc = desc
        if self._bar is not None:
            self._bar.set_description(desc, refresh=True)
        elif self.enabled:
            self.log.info("%s", desc)

    def _line(self, postfix: Dict[str, Value], now: float) -> None:
        shown = "".join(f", {k} {_show(_value(v))}" for k, v in postfix.items())
        self.log.info("%s: %d%% (%s of %s %s)%s, %s, ETA %s", self.desc, int(100 * self.fraction), f"{self.done:,}",
                      f"{self.total:,}", self.unit, shown, clock(now - self.start), clock(self.eta()))
        self._last_line = now
        self._lines += 1

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif now_done(self) and (self._lines or time.monotonic() - self.start >= self.min_interval):
            self.log.info("%s: done (%s %s) in %s", self.desc, f"{self.done:,}", self.unit,
                          clock(time.monotonic() - self.start))
        self.enabled = False


def now_done(bar: Progress) -> bool:
    return bar.done >= bar.total


def _value(v: Value) -> Any:
    return v() if callable(v) else v
