"""The response cache (bench/WORKLOADS.md): s000-cached, s002-cached and s002-invalidation.

Each beside the uncached rowgate, PostgREST 12.0.2 and the ceiling — the same answer served by
`rowgate ceiling`, rowgate's HTTP stack with nothing behind it — in the same run, one load at a
time, on s000's and s002's clusters and data sets (bench/.data/s000, s002), with the cache's
change feed installed by `rowgate cache install` (logical decoding; --feed triggers for triggers).

  s000-cached        GET /ptable?limit=10 at 100 connections: uncached, cached, cached with
                     If-None-Match (304), PostgREST, ceiling; the cached rowgate and the ceiling
                     alternate --rounds times and are reported by their median rounds.
  s002-cached        the master-detail read with a random dept: the cache populated by random
                     reads, at 100 and 4096 connections; uncached, PostgREST and ceiling at 100.
  s002-invalidation  see cache_invalidation.py.
"""

import os
import time

from .. import pgbench, schema
from ..peers import POSTGREST_VERSION, postgrest_argv
from ..procs import free_port, raise_fd_limit, run as run_cmd
from ..runner import comma_list
from ..servers import ServerError, ceiling, http, metrics, rowgate_serve, wait_cache_live
from . import cache_invalidation, s000, s002
from .cache_invalidation import hit_ratio

NAME = "cache"
TITLE = "Response cache: s000-cached, s002-cached, s002-invalidation"
PUBLISHED = ("the s002 service: 54,502–56,109 req/s from its in-memory cache, 5,354–6,978 uncached (i7-3770, 4 cores, "
             "`ab -k`); invalidation: zero stale reads after an acknowledged write.")
S000 = f"s000: GET {s000.PATH}"


def arguments(ap):
    ap.add_argument("--quick", action="store_true", help="10 s loads, 3 s warm-up, 15 s cache population")
    ap.add_argument("--duration", type=int, help="seconds per load (default 20; 10 with --quick)")
    ap.add_argument("--warmup", type=int, help="warm-up seconds (default 5; 3 with --quick)")
    ap.add_argument("--populate", type=int, help="seconds of random reads that populate the s002 cache "
                                                 "(default 40; 15 with --quick)")
    ap.add_argument("--scenarios", type=comma_list({"s000-cached", "s002"}), default=["s000-cached", "s002"],
                    help="comma list from s000-cached, s002 (s002-cached and s002-invalidation)")
    ap.add_argument("--rounds", type=int, help="s000: alternate the cached rowgate and the ceiling this many times "
                                               "(default 3; 1 with --quick)")
    ap.add_argument("--no-invalidation", action="store_true", help="skip s002-invalidation")
    ap.add_argument("--no-postgrest", action="store_true", help="leave PostgREST out")
    ap.add_argument("--no-ceilings", action="store_true", help="skip the pgbench ceilings")
    ap.add_argument("--db-pool", type=int, default=10, help="--db-pool / db-pool of every server (default 10)")
    ap.add_argument("--feed", choices=["logical", "triggers"], default="logical",
                    help="how changes reach the cache: logical decoding (default) or triggers")


def install_cache(ctx, pg):
    """The change feed; the serving role reads it over a replication connection."""
    pg.psql("ALTER ROLE authenticator REPLICATION")
    triggers = ["--triggers"] if ctx.args.feed == "triggers" else []
    ctx.log(run_cmd([ctx.rowgate, "cache", "install", "--db-uri", pg.uri(), *triggers], timeout=300).stdout.strip())


def start(ctx, name, pg, kind, ready, body=None):
    """rowgate (kind "uncached" or "cached"), PostgREST or the ceiling answering `body`."""
    port, uri = free_port(), pg.uri("authenticator")
    if kind == "postgrest":
        argv = postgrest_argv(ctx.args.postgrest, f"{ctx.logs}/postgrest.conf", port, uri, db_pool=ctx.args.db_pool)
    elif kind == "ceiling":
        path = os.path.join(ctx.logs, f"ceiling-body-{name}.json")
        with open(path, "wb") as f:
            f.write(body)
        argv = ceiling(ctx.rowgate, port, path)
    else:
        cache = ["--cache-enabled", "true", "--cache-max-bytes", str(1 << 30)] if kind == "cached" else []
        argv = rowgate_serve(ctx.rowgate, port, uri, *cache, pool=ctx.args.db_pool)
    server = ctx.server(name, argv, port, ready=ready)
    if kind == "cached":
        wait_cache_live(server)
    return server


def s000_cached(ctx):
    a, r = ctx.args, ctx.result
    pg = ctx.cluster("s000")
    r["checks"]["s000: data set generated this run"] = pg.ensure_dataset(s000.DATASET, s000.generate)
    install_cache(ctx, pg)
    D, W = a.duration, a.warmup

    def measure(name, kind, body=None):
        """{case: LOAD} of one server."""
        try:
            server = start(ctx, name, pg, kind, s000.PATH, body)
        except ServerError as e:
            return {S000: schema.load(error=str(e))}, None
        with server:
            url = server.url(s000.PATH)
            answer = http(url)
            cases = {S000: ctx.load(server, url, 100, D, pg, warmup=W)}
            if kind == "cached":
                etag = http(url)[1]["etag"]
                cases[f"{S000}, If-None-Match → 304"] = ctx.load(
                    server, url, 100, D, pg, ok=("304",), headers={"If-None-Match": etag}, label="304")
            return cases, answer[2]

    loads = {"rowgate-uncached": [measure("rowgate-uncached", "uncached")[0]], "rowgate-cached": [], "ceiling": []}
    # The cache hit and the ceiling alternate round by round (host noise hits both alike).
    for n in range(a.rounds):
        if a.rounds > 1:
            ctx.log(f"s000 round {n + 1} of {a.rounds}")
        cases, body = measure("rowgate-cached", "cached")
        loads["rowgate-cached"].append(cases)
        loads["ceiling"].append(measure("ceiling", "ceiling", body or b"[]")[0])
    if a.postgrest:
        loads["postgrest"] = [measure("postgrest", "postgrest")[0]]
    for name, rounds in loads.items():
        for case in rounds[0]:
            runs = [x[case] for x in rounds if case in x]
            schema.add(r, case, name, schema.median_round(runs) if len(runs) > 1 else runs[0])
    if not a.no_ceilings:
        r["ceilings"].append(pgbench.ceiling(pg, f"s000: {s000.PLAIN_SELECT[0]}", s000.PLAIN_SELECT[1], 100, D))
    pg.stop()


def s002_cached(ctx):
    a, r = ctx.args, ctx.result
    pg = ctx.cluster("s002")
    r["checks"]["s002: data set generated this run"] = s002.prepare(pg)
    pg.psql("GRANT UPDATE ON dept, emp TO anonymous")
    install_cache(ctx, pg)
    ready, D = s002.PATH.format(s002.SAMPLE_DEPT), a.duration

    def load(server, c, label):
        return ctx.load(server, server.url(s002.RAND_PATH), c, D, pg, rand=True, label=label)

    def measure(name, kind, body=None):
        try:
            server = start(ctx, name, pg, kind, ready, body)
        except ServerError as e:
            schema.add(r, "s002: c100", name, schema.load(error=str(e)))
            return None
        with server:
            answer = http(server.url(ready))[2]
            if kind == "cached":
                ctx.log(f"s002 {name}: populating the cache ({a.populate} s of random reads)")
                ctx.oha.warm(server.url(s002.RAND_PATH), a.populate, 100, rand=True)
                entries = metrics(server).get("rowgate_cache_entries")
                r["checks"]["s002: cache entries after populating"] = None if entries is None else int(entries)
            else:
                ctx.oha.warm(server.url(s002.RAND_PATH), a.warmup, 64, rand=True)
            for c in (100, 4096) if kind == "cached" else (100,):
                m0 = metrics(server) if kind == "cached" else {}
                figures = schema.add(r, f"s002: c{c}", name, load(server, c, f"c{c}"))
                if kind == "cached":
                    figures["extra"] = {"hit ratio": hit_ratio(m0, metrics(server))}
                time.sleep(2)
            if kind in ("cached", "uncached") and not a.no_invalidation:
                read_rate = schema.req_s(r, "s002: c100", name) or 1000
                cache_invalidation.mixes(ctx, server, pg, kind, read_rate)
            return answer

    measure("rowgate-uncached", "uncached")
    body = measure("rowgate-cached", "cached")
    if a.postgrest:
        measure("postgrest", "postgrest")
    measure("ceiling", "ceiling", body or b"[]")
    if not a.no_ceilings:
        r["ceilings"].append(pgbench.ceiling(pg, "s002: the seed's two SELECTs for a random dept", s002.TWO_SELECTS,
                                             100, D))
    pg.stop()


def ratios(r):
    def tps(prefix):
        return next((c["tps"] for c in r["ceilings"] if c["label"].startswith(prefix)), None)

    hit = schema.req_s(r, S000, "rowgate-cached")
    schema.compare(r, "s000: cache hit / ceiling (the same answer from rowgate's HTTP stack)", hit,
                   schema.req_s(r, S000, "ceiling"), 0.8, pct=True)
    schema.compare(r, "s000: cache hit / uncached rowgate", hit, schema.req_s(r, S000, "rowgate-uncached"))
    schema.compare(r, f"s000: cache hit / PostgREST {POSTGREST_VERSION}", hit, schema.req_s(r, S000, "postgrest"))
    schema.compare(r, "s000: 304 revalidation / ceiling", schema.req_s(r, f"{S000}, If-None-Match → 304",
                                                                       "rowgate-cached"),
                   schema.req_s(r, S000, "ceiling"), pct=True)
    schema.compare(r, "s000: cache hit / pgbench ceiling (SELECT * FROM ptable LIMIT 10)", hit, tps("s000"), pct=True)
    warm = schema.req_s(r, "s002: c100", "rowgate-cached")
    schema.compare(r, f"s002 c100: cache warm / PostgREST {POSTGREST_VERSION}", warm,
                   schema.req_s(r, "s002: c100", "postgrest"), 10)
    schema.compare(r, "s002 c100: cache warm / uncached rowgate", warm,
                   schema.req_s(r, "s002: c100", "rowgate-uncached"))
    schema.compare(r, "s002 c100: cache warm / ceiling", warm, schema.req_s(r, "s002: c100", "ceiling"), pct=True)
    schema.compare(r, "s002 c100: cache warm / pgbench ceiling (the two SELECTs)", warm, tps("s002"), pct=True)
    failed = schema.get(r, "s002: c4096", "rowgate-cached").get("failed")
    if failed is not None:
        schema.ratio(r, "s002 c4096 with the cache warm: failed requests", f"{failed:,}", "0",
                     "met" if failed == 0 else "NOT met")
    cache_invalidation.ratios(r)


def run(ctx):
    a = ctx.args
    a.duration = a.duration or (10 if a.quick else 20)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    a.populate = a.populate or (15 if a.quick else 40)
    a.rounds = a.rounds or (1 if a.quick else 3)
    ctx.result["config"].update(duration=a.duration, warmup=a.warmup, populate=a.populate, db_pool=a.db_pool,
                                scenarios=a.scenarios, rounds=a.rounds, feed=a.feed, nofile=raise_fd_limit())
    ctx.result["about"] = (
        f"{a.duration} s per load after a {a.warmup} s warm-up, 100 connections unless the case says; the s002 cache "
        f"populated by {a.populate} s of random reads; db-pool {a.db_pool}; s000's cached rowgate and ceiling "
        f"alternated {a.rounds} time(s), each by its median round; changes fed to the cache by {a.feed}. The ceiling "
        "is `rowgate ceiling`: the same answer from rowgate's HTTP stack with nothing behind it. In "
        "s002-invalidation the writes and the checker run beside the reads.")
    a.postgrest = None if a.no_postgrest else ctx.postgrest()
    if a.no_postgrest:
        schema.not_run(ctx.result, "postgrest", "left out with --no-postgrest")
    if "s000-cached" in a.scenarios:
        s000_cached(ctx)
    if "s002" in a.scenarios:
        s002_cached(ctx)
    ratios(ctx.result)
