"""The machine, the commit and the tools a result was measured with.

`describe()` returns the machine's cores, CPU model, memory, kernel and load average;
`commit()` the repository's HEAD and whether the work tree has changes; `tool_version(argv)` the
first line a tool prints for its version. Nothing here fails: what cannot be read is left out.
"""

import os
import subprocess

from . import REPO


def _first_line(path, prefix):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def describe():
    mem = _first_line("/proc/meminfo", "MemTotal")
    try:
        loadavg = open("/proc/loadavg").read().strip()
    except OSError:
        loadavg = None
    return {"cores": os.cpu_count(), "cpu": _first_line("/proc/cpuinfo", "model name"),
            "memory_gib": round(int(mem.split()[0]) / 2**20, 1) if mem else None,
            "kernel": os.uname().release, "loadavg_at_start": loadavg}


def commit():
    """(HEAD's hash, whether tracked files differ from it), or (None, None) outside git."""
    def git(*args):
        r = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return head, (None if status is None else bool(status))


def tool_version(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return ((r.stdout or r.stderr).strip().splitlines() or ["?"])[0]
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({e})"
