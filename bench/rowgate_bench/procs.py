"""Processes a runner starts, and stopping them whatever happens.

Takes commands; returns `subprocess.Popen` handles kept in one list. `cleanup()` stops them all,
newest first, then runs the stop callbacks registered with `at_cleanup` (the clusters). With
`handle_signals()`, SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt, so that a runner's
`finally` stops everything also when the suite's timeout or Ctrl-C ends it. Also the small
process helpers every module uses: `run`, `free_port`, `raise_fd_limit`, `log`.
"""

import resource
import signal
import socket
import subprocess
import sys
import time

_started = []  # Popen objects not stopped yet
_callbacks = []  # stop functions, run by cleanup() newest first
_label = ["bench"]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def set_label(label):
    """The name log lines start with (the scenario's)."""
    _label[0] = label


def log(msg):
    """A time-stamped line on stderr (the suite keeps it in the runner's log)."""
    print(f"[{_label[0]} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def handle_signals():
    for s in SIGNALS:
        signal.signal(s, _interrupt)


def start(argv, logfile=None, env=None, cwd=None, stderr=True):
    """Starts argv with its output in logfile (or discarded; stderr too unless stderr=False, for
    a JSON output) and remembers it for cleanup()."""
    out = open(logfile, "w") if logfile else subprocess.DEVNULL
    try:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT if stderr else subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    finally:
        if logfile:
            out.close()  # the child holds its own descriptor
    _started.append(p)
    return p


def stop(p, timeout=10):
    """SIGTERM, then SIGKILL after `timeout` seconds; forgets p."""
    if p in _started:
        _started.remove(p)
    if p.poll() is not None:
        return
    try:
        p.terminate()
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=5)
    except ProcessLookupError:
        pass


def at_cleanup(fn):
    """Registers fn to run at cleanup(); returns fn, so that its owner can forget() it."""
    _callbacks.append(fn)
    return fn


def forget(fn):
    if fn in _callbacks:
        _callbacks.remove(fn)


def cleanup():
    """Stops every process still running and runs the stop callbacks. Signals are ignored
    meanwhile (a second Ctrl-C must not leave a cluster running) and handled again after."""
    previous = [signal.signal(s, signal.SIG_IGN) for s in SIGNALS]
    try:
        for p in reversed(list(_started)):
            try:
                stop(p)
            except Exception as e:  # noqa: BLE001 - keep stopping the others
                log(f"warning: could not stop pid {p.pid}: {e}")
        while _callbacks:
            fn = _callbacks.pop()
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                log(f"warning: {e}")
    finally:
        for s, h in zip(SIGNALS, previous):
            signal.signal(s, h)


def run(argv, timeout, check=True, **kw):
    """Runs argv to its end; text output captured. check=True raises on a non-zero exit with
    the command's stderr in the message."""
    r = subprocess.run(argv, timeout=timeout, text=True, capture_output=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv[:3]))} … exited {r.returncode}: "
                           f"{(r.stderr or r.stdout).strip()[-800:]}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_fd_limit():
    """As many file descriptors as the hard limit allows (up to 65,536), for 4,096 connections in
    oha and in the servers started from here; returns the new (soft, hard) limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return list(resource.getrlimit(resource.RLIMIT_NOFILE))
