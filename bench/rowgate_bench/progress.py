"""A progress bar for a long step (data generation).

Takes a label and a total; each `update(done)` prints one line on stderr with the bar, the count,
the seconds spent and an estimate of those left. One line per update rather than a
carriage-return redraw, because the suite keeps the output in a log that is read back later.
"""

import sys
import time


class Progress:
    WIDTH = 30

    def __init__(self, label, total, unit="rows"):
        self.label, self.total, self.unit = label, total, unit
        self.started = time.time()

    def update(self, done, extra=""):
        frac = min(1.0, done / self.total) if self.total else 1.0
        filled = int(frac * self.WIDTH)
        spent = time.time() - self.started
        left = f", ~{spent / frac - spent:.0f} s left" if 0 < frac < 1 else ""
        bar = "#" * filled + "." * (self.WIDTH - filled)
        print(f"[{time.strftime('%H:%M:%S')}] {self.label} [{bar}] {frac * 100:3.0f}% "
              f"{done:,}/{self.total:,} {self.unit}{extra}, {spent:.0f} s{left}", file=sys.stderr, flush=True)
