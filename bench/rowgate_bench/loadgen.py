"""The load generators, their output turned into the schema's LOAD figures.

oha drives every scenario but s004: `Oha.find()` returns it from PATH or ~/.cargo/bin (after
`OhaInstall`, which runs `cargo install oha --locked` in the background on a fresh machine, has
finished); `Oha.argv(...)` builds a command, `Oha.run(argv)` runs it and returns a LOAD.
`run_loadgen` drives examples/loadgen, rowgate's own generator for s004: it sends a list of
requests, each exactly once, at a fixed concurrency (oha picks requests at random, which cannot
delete 100 given rows), and reports the time to complete them all.
"""

import json
import os
import shutil
import subprocess

from . import DATA, procs, schema

CARGO_OHA = os.path.expanduser("~/.cargo/bin/oha")


def oha_path():
    return shutil.which("oha") or (CARGO_OHA if os.path.exists(CARGO_OHA) else None)


class OhaInstall:
    """`cargo install oha --locked` in the background when oha is missing, so that it compiles
    beside rowgate's build rather than after it."""

    def __init__(self):
        self.proc = None
        if oha_path() is None:
            log = os.path.join(DATA, "oha-install.log")
            os.makedirs(DATA, exist_ok=True)
            procs.log(f"oha not found: cargo install oha --locked in the background (log {log})")
            self.proc = procs.start(["cargo", "install", "oha", "--locked"], log, cwd="/tmp")

    def wait(self, timeout=2400):
        if self.proc is not None:
            procs.log("waiting for cargo install oha")
            try:
                code = self.proc.wait(timeout=timeout)
            finally:
                procs.stop(self.proc)
            if code != 0:
                raise RuntimeError(f"cargo install oha failed (exit {code}), see {DATA}/oha-install.log")
        return Oha.find()


class Oha:
    def __init__(self, path):
        self.path = path
        h = procs.run([path, "--help"], timeout=30).stdout
        self.flags = ["--output-format", "json"] if "--output-format" in h else ["--json"]
        self.flags += ["--no-tui"] if "--no-tui" in h else []
        # Requests in flight at the -z deadline finish instead of counting as errors.
        if "--wait-ongoing-requests-after-deadline" in h:
            self.flags.append("--wait-ongoing-requests-after-deadline")
        self.version = procs.run([path, "--version"], timeout=30).stdout.strip()

    @classmethod
    def find(cls):
        path = oha_path()
        if path is None:
            raise RuntimeError("oha is not installed (cargo install oha --locked)")
        return cls(path)

    def argv(self, url, connections, duration=None, requests=None, headers=None, method=None, body=None,
             content_type=None, rand=False, rate=None):
        """oha's command: for `duration` seconds or `requests` requests; with rand, url is a
        regular expression each request's URL is drawn from; rate caps the requests a second."""
        argv = [self.path, "-c", str(connections)] + (["-z", f"{duration}s"] if duration else ["-n", str(requests)])
        argv += self.flags
        for k, v in (headers or {}).items():
            argv += ["-H", f"{k}: {v}"]
        if method:
            argv += ["-m", method]
        if content_type:
            argv += ["-T", content_type]
        if body is not None:
            argv += ["-d", body]
        if rate:
            argv += ["-q", str(rate)]
        return argv + (["--rand-regex-url", url] if rand else [url])

    def run(self, argv, ok=("200",), redact=()):
        """Runs oha to its end; a LOAD whose `failed` counts transport errors and statuses not in ok.
        Secrets (tokens, keys) in redact are left out of the recorded command."""
        raw = run_json(argv, timeout=_timeout(argv))
        command = " ".join(argv)
        for secret in redact:
            command = command.replace(secret, "<secret>")
        return dict(summarize(raw, ok), command=command)

    def warm(self, url, seconds, connections, **kw):
        """A warm-up load whose figures are not kept."""
        run_json(self.argv(url, connections, duration=seconds, **kw), timeout=seconds + 120)


def _timeout(argv):
    if "-z" in argv:
        return int(argv[argv.index("-z") + 1].rstrip("s")) + 300
    return 1800


def run_json(argv, timeout):
    r = subprocess.run(argv, timeout=timeout, text=True, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"{os.path.basename(argv[0])} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout)


def summarize(raw, ok=("200",)):
    """oha's JSON as a LOAD. Requests still in flight at a -z deadline ("aborted due to
    deadline") are listed among the errors but not counted as failed: they are not the server's."""
    s, pct = raw.get("summary", {}), raw.get("latencyPercentiles", {})
    statuses = {str(k): v for k, v in (raw.get("statusCodeDistribution") or {}).items()}
    errors = raw.get("errorDistribution") or {}

    def ms(seconds):
        return None if seconds is None else seconds * 1000.0

    failed = sum(v for k, v in errors.items() if "deadline" not in k)
    failed += sum(v for k, v in statuses.items() if k not in ok)
    return schema.load(req_s=s.get("requestsPerSec"), mib_s=(s.get("sizePerSec") or 0) / 2**20,
                       p50_ms=ms(pct.get("p50")), p95_ms=ms(pct.get("p95")), p99_ms=ms(pct.get("p99")),
                       max_ms=ms(s.get("slowest")), requests=sum(statuses.values()), failed=failed,
                       statuses=statuses, errors=errors)


def run_loadgen(binary, port, lines, concurrency, keep_alive, path):
    """examples/loadgen: every request of `lines` ({"method", "path", "headers", "body"}) once, at
    `concurrency`, a new connection per request unless keep_alive. The requests go to the file
    `path`. A LOAD with completed_s; failed counts transport errors and answers other than 2xx."""
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    argv = [binary, "--addr", f"127.0.0.1:{port}", "--requests", path, "--concurrency", str(concurrency)]
    raw = run_json(argv + (["--keep-alive"] if keep_alive else []), timeout=900)
    statuses = {str(k): v for k, v in raw["statuses"].items()}
    failed = sum(v for k, v in statuses.items() if not k.startswith("2")) + sum(raw["errors"].values())
    return schema.load(completed_s=raw["completed_s"], req_s=raw["rps"], mib_s=raw.get("mib_per_sec"),
                       p50_ms=raw.get("p50_ms"), p95_ms=raw.get("p95_ms"), p99_ms=raw.get("p99_ms"),
                       max_ms=raw.get("max_ms"), requests=raw.get("requests"), failed=failed,
                       statuses=statuses, errors=raw["errors"])
