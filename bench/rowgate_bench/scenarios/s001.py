"""s001 (bench/WORKLOADS.md): an API-key check, GET /rowgate/apikey, beside GET /live.

rowgate's key store holds one valid and one expired key. For each pool size, rowgate is loaded
with `oha -c 100` for /live, then the valid key (200), no key (401), an unknown key (403) and
the expired key (403); again with the key cache off (valid key only); PostgREST 12.0.2 runs the
same check as a db-pre-request function over the same keys. Around every load the calls of
rowgate.lookup_api_key are read from pg_stat_user_functions (track_functions = all). The
ceiling is pgbench of rowgate's look-up statement.
"""

import hashlib
import os
import time

from .. import pgbench, schema
from ..peers import POSTGREST_VERSION, postgrest_argv
from ..procs import free_port, run as run_cmd
from ..runner import comma_list
from ..servers import ServerError, http, rowgate_serve

NAME = "s001"
TITLE = "s001 API-key check `GET /rowgate/apikey`"
PUBLISHED = ("Rust actix 1,652 / 2,366 req/s at pool 10 / 50, FastAPI + asyncpg 1,097 req/s (`wrk -c100 -d60s`, "
             "6-core laptop, their own key table queried on every request).")
PATH_KEY, PATH_LIVE, PATH_POSTGREST = "/rowgate/apikey", "/live", "/rpc/apikey"
UNKNOWN_KEY = "rg_unknown"
# (case, path, key, expected status, look-up count exact); /live right before the valid key, so
# that the ratio of the two is least exposed to drifting machine load.
CASES = [("live", PATH_LIVE, None, 200, False), ("valid", PATH_KEY, "valid", 200, False),
         ("missing", PATH_KEY, None, 401, False), ("unknown", PATH_KEY, "unknown", 403, True),
         ("expired", PATH_KEY, "expired", 403, True)]
LOOKUP_SQL = "SELECT key_hash, name, role, claims, expires_at, revoked FROM rowgate.lookup_api_key(:h::text::bytea);\n"
CALLS_SQL = ("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions "
             "WHERE schemaname = 'rowgate' AND funcname = 'lookup_api_key'")
# The same check the PostgREST way: a pre-request function that looks the `apikey` header's
# SHA-256 up in rowgate's key store and raises PostgREST's custom 401/403 statuses.
POSTGREST_SQL = """
CREATE SCHEMA IF NOT EXISTS s001_postgrest;
CREATE OR REPLACE FUNCTION s001_postgrest.check_api_key() RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
  k text := current_setting('request.headers', true)::json->>'apikey';
BEGIN
  IF k IS NULL THEN
    RAISE SQLSTATE 'PT401' USING MESSAGE = 'No API key found in request';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM rowgate.api_keys
                 WHERE key_hash = sha256(convert_to(k, 'UTF8')) AND revoked_at IS NULL
                   AND (expires_at IS NULL OR expires_at > now())) THEN
    RAISE SQLSTATE 'PT403' USING MESSAGE = 'Invalid API key';
  END IF;
END $$;
CREATE OR REPLACE FUNCTION s001_postgrest.apikey() RETURNS json LANGUAGE sql IMMUTABLE
  AS $$ SELECT '{"valid": true}'::json $$;
GRANT USAGE ON SCHEMA s001_postgrest TO anonymous;
GRANT EXECUTE ON FUNCTION s001_postgrest.check_api_key(), s001_postgrest.apikey() TO anonymous;
"""


def arguments(ap):
    ap.add_argument("--quick", action="store_true", help="10 s runs, 3 s warm-up")
    ap.add_argument("--duration", type=int, help="seconds per load and for pgbench (default 20; 10 with --quick)")
    ap.add_argument("--warmup", type=int, help="warm-up seconds per case (default 5; 3 with --quick)")
    ap.add_argument("--connections", type=int, default=100, help="oha -c and pgbench -c (default 100)")
    ap.add_argument("--pools", type=comma_list(), default=[10, 50], help="rowgate --db-pool values (default 10,50)")
    ap.add_argument("--settle", type=float, default=2.0,
                    help="seconds to wait around a load before reading pg_stat_user_functions (default 2)")
    ap.add_argument("--settle-exact", type=float, default=11.0,
                    help="the same where the look-up count is reported (unknown and expired key, cache off): "
                         "idle backends flush their statistics within 10 s (default 11)")
    ap.add_argument("--no-ceilings", action="store_true", help="skip the pgbench ceiling")
    ap.add_argument("--no-cache-off", action="store_true", help="skip the runs with the key cache off")
    ap.add_argument("--no-postgrest", action="store_true", help="leave PostgREST (pre-request check) out")


def make_keys(ctx, pg):
    """Exactly one valid key (`bench`) and one expired; returns {"valid", "expired", "unknown"}."""
    pg.ensure_roles("anonymous")
    if pg.psql("SELECT to_regclass('rowgate.api_keys') IS NOT NULL") == "t":
        pg.psql("DELETE FROM rowgate.api_keys")  # keys of earlier runs

    def apikey(*args):
        env = dict(os.environ, ROWGATE_DB_URI=pg.uri())
        return run_cmd([ctx.rowgate, "apikey", *args], timeout=60, env=env).stdout.strip()

    keys = {"valid": apikey("create", "--role", "anonymous", "--name", "bench"),
            "expired": apikey("create", "--role", "anonymous", "--name", "bench-expired", "--expires", "1s"),
            "unknown": UNKNOWN_KEY}
    time.sleep(2)
    state = pg.psql("SELECT count(*) FILTER (WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) "
                    "|| '/' || count(*) FROM rowgate.api_keys")
    if state != "1/2" or not keys["valid"].startswith("rg_"):
        raise RuntimeError(f"expected 1 valid key of 2, found {state} ({keys['valid'][:6]}…)")
    digest = hashlib.sha256(keys["valid"].encode()).hexdigest()
    stored = pg.psql(f"SELECT count(*) FROM rowgate.api_keys WHERE key_hash = '\\x{digest}'::bytea")
    ctx.result["checks"]["SHA-256 of the valid key is the stored hash"] = stored == "1"
    return keys


def measure(ctx, server, pg, label, case, path, key, expect, exact, keys):
    a = ctx.args
    url, headers = server.url(path), ({"apikey": keys[key]} if key else {})
    status, _, body = http(url, headers=headers)
    ctx.result["checks"].setdefault(f"{case} answer (want {expect})", f"{status} {body[:100].decode(errors='replace')}")
    counted = server.name.startswith("rowgate")
    # An idle backend may hold its function statistics up to 10 s before flushing them; wait that
    # out where the count is reported.
    settle = a.settle_exact if exact else a.settle
    ctx.oha.warm(url, a.warmup, a.connections, headers=headers)
    if counted:
        time.sleep(settle)
        calls = int(pg.psql(CALLS_SQL))
    secrets = [keys["valid"], keys["expired"]]
    figures = ctx.load(server, url, a.connections, a.duration, pg, ok=(str(expect),), redact=secrets,
                       headers=headers, label=case)
    figures["extra"] = {"expect": expect}
    if counted:
        time.sleep(settle)
        calls = int(pg.psql(CALLS_SQL)) - calls
        figures["extra"].update({"look-ups": calls, "look-ups/s": calls / a.duration, "look-ups exact": exact})
    schema.add(ctx.result, f"pool {label}: {case}", server.name, figures)


def bench_config(ctx, pg, keys, name, pool, argv, cases, ready, headers=None):
    port = free_port()
    try:
        server = ctx.server(name, argv(port), port, ready=ready, headers=headers, log_name=f"{name}-pool{pool}")
    except ServerError as e:
        for case, *_ in cases:
            schema.add(ctx.result, f"pool {pool}: {case}", name, schema.load(error=str(e)))
        return
    with server:
        for case, path, key, expect, exact in cases:
            measure(ctx, server, pg, pool, case, path, key, expect, exact or "cache off" in name, keys)
            if not server.alive():
                break


def ratios(ctx, ceiling):
    r = ctx.result
    for p in ctx.args.pools:
        def load(case, server="rowgate"):
            return schema.get(r, f"pool {p}: {case}", server)
        valid, off = load("valid"), load("valid", "rowgate, key cache off")
        schema.compare(r, f"pool {p}: valid key (cache on) req/s / `/live`", valid.get("req_s"),
                       load("live").get("req_s"), 0.8, pct=True)
        schema.compare(r, f"pool {p}: valid key, cache off, req/s / the pgbench look-up ceiling", off.get("req_s"),
                       ceiling, 0.25, pct=True)
        if off.get("requests"):
            schema.ratio(r, f"pool {p}: cache off: database look-ups per request (below 1: concurrent requests "
                            "for one key shared a look-up)", f"{off['extra']['look-ups'] / off['requests']:.3f}")
        schema.compare(r, f"pool {p}: valid key, rowgate (key cache on) / PostgREST {POSTGREST_VERSION} "
                          "(pre-request check)", valid.get("req_s"), load("valid", "postgrest").get("req_s"))
        unknown = load("unknown")
        if unknown.get("req_s") and valid.get("req_s"):
            v = unknown["req_s"] / valid["req_s"]
            verdict = "met" if v >= 1 else "within run-to-run noise" if v >= 0.85 else "NOT met"
            schema.ratio(r, f"pool {p}: unknown-key req/s / valid-key req/s", f"{v:.2f}", "≥ 1 (not slower)", verdict)
            v = unknown["extra"]["look-ups/s"]
            schema.ratio(r, f"pool {p}: look-ups of the unknown key in the database per second", f"{v:.2f}", "≤ 1",
                         "met" if v <= 1.05 else "NOT met")


def run(ctx):
    a = ctx.args
    a.duration = a.duration or (10 if a.quick else 20)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    ctx.result["config"].update(duration=a.duration, warmup=a.warmup, connections=a.connections, pools=a.pools,
                                settle=a.settle, settle_exact=a.settle_exact)
    ctx.result["about"] = (
        f"`oha -z {a.duration}s -c {a.connections}` after a {a.warmup} s warm-up per case, one load at a time; one "
        f"valid key (role anonymous), one expired key, the unknown key `{UNKNOWN_KEY}`. `failed` counts oha errors "
        "and answers with another status than expected. look-ups: calls of `rowgate.lookup_api_key` during the load "
        f"(read {a.settle:g} s around it, or {a.settle_exact:g} s where `look-ups exact`).")
    if a.no_postgrest:
        schema.not_run(ctx.result, "postgrest", "left out with --no-postgrest")
    else:
        ctx.postgrest()
    pg = ctx.cluster(settings=["track_functions=all"])
    keys = make_keys(ctx, pg)
    uri = pg.uri("authenticator")
    for p in a.pools:  # strictly one after the other
        bench_config(ctx, pg, keys, "rowgate", p, lambda port: rowgate_serve(ctx.rowgate, port, uri, pool=p),
                     CASES, PATH_LIVE)
    for p in [] if a.no_cache_off else a.pools:
        bench_config(ctx, pg, keys, "rowgate, key cache off", p, lambda port: rowgate_serve(
            ctx.rowgate, port, uri, "--api-key-cache-max-entries", "0", pool=p), CASES[1:2], PATH_LIVE)
    if not a.no_postgrest and ctx.postgrest():
        pg.psql(POSTGREST_SQL)
        for p in a.pools:
            bench_config(ctx, pg, keys, "postgrest", p, lambda port: postgrest_argv(
                ctx.postgrest(), f"{ctx.data}/postgrest-pool{p}.conf", port, uri, schemas="s001_postgrest",
                db_pre_request="s001_postgrest.check_api_key", db_pool=p),
                [(c, PATH_POSTGREST, k, s, False) for c, _, k, s, _ in CASES[1:]], PATH_POSTGREST,
                {"apikey": keys["valid"]})
    ceiling = None
    if not a.no_ceilings:
        digest = hashlib.sha256(keys["valid"].encode()).hexdigest()
        entry = pgbench.ceiling(pg, "rowgate's key look-up (as authenticator, the valid key's hash)", LOOKUP_SQL,
                                a.connections, a.duration, user="authenticator", defines=[f"h=\\x{digest}"])
        ctx.result["ceilings"].append(entry)
        ceiling = entry["tps"]
    ratios(ctx, ceiling)
