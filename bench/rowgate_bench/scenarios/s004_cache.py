"""s004-cache (bench/s004/cache): the response cache on SQLite. s004's data (quick size) served by
rowgate with the cache off, then on, each under `oha -z 5s -c 50` for a page of 20 posts and for
one user by id; anonymous reads, every table public.
"""

import os
import shutil
import tempfile

from .. import schema
from ..procs import free_port
from ..servers import rowgate_serve
from .s004_data import TABLES, make_data, rowgate_db

NAME = "s004-cache"
DATA = "s004"
TITLE = "s004-cache: the response cache on SQLite"
PUBLISHED = "none for this scenario; the static-response ceiling on this host is ~65–90k req/s."


def arguments(ap):
    ap.add_argument("--duration", type=int, default=5, help="seconds per load (default 5)")
    ap.add_argument("--connections", type=int, default=50, help="oha -c (default 50)")


def run(ctx):
    a = ctx.args
    ctx.result["about"] = (f"s004's quick data; `oha -z {a.duration}s -c {a.connections}`, anonymous; rowgate with "
                           "`--cache-enabled false`, then `true`, each on a fresh copy of the data.")
    data = make_data(True)
    paths = ["/posts10k?limit=20", "/users?id=eq." + data["users"][7][0]]
    work = tempfile.mkdtemp(prefix="rowgate-s004-cache-")
    try:
        rules = os.path.join(work, "rules.toml")
        with open(rules, "w") as f:
            f.write("".join(f'[{t}]\nselect = {{ anon = "true" }}\n' for t in TABLES))
        for cache in ("false", "true"):
            db, port, name = rowgate_db(work, data, f"cache-{cache}.db"), free_port(), f"rowgate, cache {cache}"
            argv = rowgate_serve(ctx.rowgate, port, f"sqlite:{db}", "--db-rules", rules, "--cache-enabled", cache,
                                 schemas=None, anon_role="anon")
            with ctx.server(name, argv, port, ready=paths[0]) as server:
                for path in paths:
                    schema.add(ctx.result, f"GET {path}", name,
                               ctx.load(server, server.url(path), a.connections, a.duration, label=path))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for path in paths:
        schema.compare(ctx.result, f"GET {path}: cache on / cache off req/s",
                       schema.req_s(ctx.result, f"GET {path}", "rowgate, cache true"),
                       schema.req_s(ctx.result, f"GET {path}", "rowgate, cache false"))
