"""What every runner under bench/ shares. A runner imports it with
`sys.path.insert(0, <bench dir>)`; nothing here starts a process or writes a file."""

import os
import resource
import shutil
import sys
import time


def children_cpu_seconds():
    """User and system CPU seconds of this process's children that have finished: read before
    and after a load-generator run, the difference is what the load generator used."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def oha_path():
    """oha's path when it is installed (on PATH, or where `cargo install` puts it), else None."""
    installed = os.path.expanduser("~/.cargo/bin/oha")
    return shutil.which("oha") or (installed if os.path.exists(installed) else None)


class Progress:
    """A progress bar for a long step (data generation): one line per update on stderr, which the
    suite keeps in the runner's log, so a line each (not a carriage-return redraw) reads back."""

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
