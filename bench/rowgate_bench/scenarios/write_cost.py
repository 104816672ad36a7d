"""write-cost (bench/cache/write-cost): what a write costs rowgate and PostgreSQL under each
change feed of the response cache. `oha -c 32` random one-row PATCHes of a dept for 10 s on s002's
data set (bench/.data/s002, made when missing): rowgate without the cache and with it, fed by
triggers and by logical decoding; CPU microseconds per write of rowgate and of PostgreSQL.
"""

from .. import schema
from ..procs import free_port, run as run_cmd
from ..servers import rowgate_serve
from . import s002
from .cache_invalidation import WRITE_BODY, WRITE_PATH

NAME = "write-cost"
DATA = "s002"
TITLE = "write-cost: a write under each change feed of the response cache"
PUBLISHED = "none: a measurement of rowgate's own (docs/benchmarks.md, s002-invalidation session 3)."
CASE = "PATCH /dept?deptno=eq.<random>"
# (label, `cache install` flag, rowgate flags), measured in this order
RUNS = [("no cache (triggers installed)", ["--triggers"], []),
        ("cache, triggers", None, ["--cache-enabled", "true"]),
        ("no cache (publication only)", [], []),
        ("cache, logical decoding", None, ["--cache-enabled", "true"])]


def arguments(ap):
    ap.add_argument("--duration", type=int, default=10, help="seconds per load (default 10)")
    ap.add_argument("--connections", type=int, default=32, help="oha -c (default 32)")


def run(ctx):
    a = ctx.args
    ctx.result["about"] = (f"`oha -z {a.duration}s -c {a.connections}` random one-row `PATCH /dept` on s002's data, "
                           "the same binary in all four; rowgate `--db-pool 10`. CPU µs a write = CPU seconds ÷ "
                           "writes answered.")
    pg = ctx.cluster()
    s002.prepare(pg)
    pg.psql("ALTER ROLE authenticator REPLICATION; GRANT UPDATE ON dept TO anonymous")
    for label, install, flags in RUNS:
        if install is not None:
            run_cmd([ctx.rowgate, "cache", "install", "--db-uri", pg.uri(), *install], timeout=300)
        port = free_port()
        argv = rowgate_serve(ctx.rowgate, port, pg.uri("authenticator"), *flags, pool=10)
        with ctx.server(label, argv, port, ready="/live") as server:
            figures = ctx.load(server, server.url(WRITE_PATH), a.connections, a.duration, pg, ok=("204",), rand=True,
                               method="PATCH", content_type="application/json", body=WRITE_BODY, label=label)
        writes = max(figures.get("requests") or 0, 1)
        figures["extra"] = {"rowgate CPU µs/write": 1e6 * (figures.get("server_cpu_s") or 0) / writes,
                            "PostgreSQL CPU µs/write": 1e6 * (figures.get("db_cpu_s") or 0) / writes}
        schema.add(ctx.result, CASE, label, figures)
