"""s003-static (bench/WORKLOADS.md): three small files (489 B, 161 B, 30 B) served by rowgate's
--static-dir (API on an in-memory SQLite), each at 16 connections, beside the ceiling — the same
bytes from `rowgate ceiling` — one load at a time. Target (issue #7): static ≥ 80 % of the
ceiling. A failed request fails the run (the CI smoke test relies on it); a slow one never does.
"""

import os
import shutil
import tempfile

from .. import schema
from ..procs import free_port

NAME = "s003-static"
DATA = "s003"
TITLE = "s003-static: small files from `--static-dir`"
PUBLISHED = "~5,480 req/s per vCPU (Shuttle, axum's ServeDir, below its proxy's limit)."
FAIL_ON_FAILED = True
FILES = [("index.html", 489, "text/html; charset=utf-8"), ("app.css", 161, "text/css; charset=utf-8"),
         ("hello.txt", 30, "text/plain; charset=utf-8")]


def arguments(ap):
    ap.add_argument("--duration", type=int, default=10, help="seconds per load (default 10)")
    ap.add_argument("--connections", type=int, default=16, help="oha -c (default 16)")


def run(ctx):
    a = ctx.args
    ctx.result["config"].update(duration=a.duration, connections=a.connections)
    ctx.result["about"] = (f"`oha -z {a.duration}s -c {a.connections}` per file, one load at a time; the ceiling is "
                           "`rowgate ceiling` answering the same bytes with the same Content-Type.")
    work = tempfile.mkdtemp(prefix="rowgate-s003-")
    try:
        public = os.path.join(work, "public")
        os.makedirs(public)
        for name, size, _ in FILES:
            with open(os.path.join(public, name), "w") as f:
                f.write(("rowgate s003 static file " * 40)[: size - 1] + "\n")
        port = free_port()
        argv = [ctx.rowgate, "serve", "--db-uri", "sqlite::memory:", "--static-dir", public, "--server-host",
                "127.0.0.1", "--server-port", str(port)]
        with ctx.server("rowgate", argv, port) as static:
            for name, size, ctype in FILES:
                case = f"{name} ({size} B)"
                figures = ctx.load(static, static.url(f"/{name}"), a.connections, a.duration, label=name)
                schema.add(ctx.result, case, "rowgate", figures)
                port = free_port()
                argv = [ctx.rowgate, "ceiling", "--body-file", os.path.join(public, name), "--content-type", ctype,
                        "--server-port", str(port)]
                with ctx.server("ceiling", argv, port) as ceiling:
                    schema.add(ctx.result, case, "ceiling", ctx.load(ceiling, ceiling.url("/"), a.connections,
                                                                     a.duration, label=name))
                schema.compare(ctx.result, f"{case}: static / ceiling", schema.req_s(ctx.result, case, "rowgate"),
                               schema.req_s(ctx.result, case, "ceiling"), 0.8, pct=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
