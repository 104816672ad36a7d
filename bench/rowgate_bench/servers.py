"""A server under test, and the HTTP requests the runners send outside the load.

`Server(name, argv, port, logs, ready=PATH)` starts argv with its output in logs/<name>.log (or
<log_name>.log) and returns once it answers 200 on PATH (or, without `ready`, accepts
connections); it raises ServerError with the log's last lines when it does not. Its pid is
what the CPU and RSS of a load are read from; `stop()` (or leaving a `with` block) ends it.
`rowgate_serve` and `ceiling` build rowgate's command lines; `metrics` and `wait_cache_live`
read rowgate's metrics; `http` sends one request and returns (status, headers, body) whatever
the status.
"""

import json
import os
import re
import socket
import time
import urllib.parse
from http.client import HTTPConnection

from . import procs


class ServerError(RuntimeError):
    pass


class Server:
    def __init__(self, name, argv, port, logs, ready=None, headers=None, timeout=60, env=None, log_name=None):
        self.name, self.port, self.ready = name, port, ready
        self.base = f"http://127.0.0.1:{port}"
        os.makedirs(logs, exist_ok=True)
        self.logfile = os.path.join(logs, re.sub(r"[^A-Za-z0-9_.-]+", "-", log_name or name) + ".log")
        self.proc = procs.start(argv, self.logfile, env=env)
        err = self._wait(ready, headers, timeout)
        if err:
            self.stop()
            raise ServerError(f"{name} did not start: {err}; {self.logfile}: {self.log_tail()}")
        procs.log(f"{name} ready on :{port}")

    def _wait(self, ready, headers, timeout):
        deadline, last = time.time() + timeout, None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return f"exited with code {self.proc.returncode}"
            try:
                if ready is None:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    return None
                status, _, body = http(self.base + ready, headers=headers, timeout=2)
                if status == 200:
                    return None
                last = f"status {status}: {body[:200]!r}"
            except OSError as e:
                last = str(e)
            time.sleep(0.1)
        return f"not ready within {timeout} s (last: {last})"

    def log_tail(self, lines=3):
        try:
            with open(self.logfile, errors="replace") as f:
                return " | ".join(x.strip() for x in f.readlines()[-lines:] if x.strip())
        except OSError:
            return ""

    def url(self, path):
        return self.base + path

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        procs.stop(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.stop()


def http(url, method="GET", body=None, headers=None, timeout=10):
    """One request on a new connection: (status, headers with lower-case names, body bytes)."""
    u = urllib.parse.urlsplit(url)
    conn = HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            headers = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, u.path + (f"?{u.query}" if u.query else ""), body=body,
                     headers={"Accept": "application/json", **(headers or {})})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def call(base, method, path, body=None, headers=None):
    """A set-up request that must succeed: its JSON answer (None when empty)."""
    status, _, raw = http(base + path, method, body, headers, timeout=60)
    if status >= 300:
        raise RuntimeError(f"{method} {path}: {status} {raw[:400]!r}")
    return json.loads(raw) if raw else None


def metrics(server):
    """rowgate's /rowgate/metrics as {name: value}; {} when it does not answer them."""
    try:
        status, _, body = http(server.url("/rowgate/metrics"))
    except OSError:
        return {}
    pairs = [line.split(" ") for line in body.decode().splitlines() if line and not line.startswith("#")]
    return {p[0]: float(p[1]) for p in pairs if status == 200 and len(p) == 2}


def wait_cache_live(server, timeout=30):
    """Waits until rowgate's response cache follows the database's changes (before that it
    answers uncached); stops the server and raises ServerError when it does not."""
    deadline = time.time() + timeout
    while metrics(server).get("rowgate_cache_live") != 1.0:
        if time.time() > deadline:
            server.stop()
            raise ServerError(f"{server.name}: the response cache never became live (see {server.logfile})")
        time.sleep(0.1)


def rowgate_serve(binary, port, db_uri, *extra, pool=None, schemas="public", anon_role="anonymous"):
    """`rowgate serve` on 127.0.0.1:port for db_uri; extra flags appended as given."""
    argv = [binary, "serve", "--db-uri", db_uri, "--server-host", "127.0.0.1", "--server-port", str(port)]
    if schemas:
        argv += ["--db-schemas", schemas]
    if anon_role:
        argv += ["--db-anon-role", anon_role]
    if pool is not None:
        argv += ["--db-pool", str(pool)]
    return argv + list(extra)


def ceiling(binary, port, body_file, content_type=None):
    """`rowgate ceiling`: the bytes of body_file from rowgate's HTTP stack, nothing behind it."""
    argv = [binary, "ceiling", "--body-file", body_file, "--server-port", str(port)]
    return argv + (["--content-type", content_type] if content_type else [])
