"""s003-customers (bench/WORKLOADS.md): one user's 500 customers as JSON (~54 KB), 16 concurrent,
10,000 requests, as `GET /customers?select=id,firstname,lastname,email,phone,priority&owner_id=eq.1`
(the seed filtered by a sub-select on the user's e-mail; the id is used here).

One server at a time, same data: rowgate on PostgreSQL (bench/.data/s003; cache off, then on),
PostgREST 12.0.2 on the same database, rowgate on an SQLite file (cache off, then on); each
`oha -n N -c 16` after a 500-request warm-up. req/s per CPU-second (server plus PostgreSQL)
compares with the seed's per-vCPU figure. The ceiling is pgbench of the SELECT behind the answer.
"""

import json
import os
import shutil
import sqlite3
import tempfile

from .. import pgbench, schema
from ..peers import postgrest_argv
from ..procs import free_port, run as run_cmd
from ..servers import ServerError, http, rowgate_serve, wait_cache_live

NAME = "s003-customers"
DATA = "s003"
TITLE = "s003-customers: one user's 500 customers"
PUBLISHED = "~1,040–1,066 req/s per vCPU (Shuttle, sqlx on axum, a shared remote PostgreSQL); 775 req/s at 1 vCPU."
PATH = "/customers?select=id,firstname,lastname,email,phone,priority&owner_id=eq.1"
CEILING_SQL = "SELECT id, firstname, lastname, email, phone, priority FROM customers WHERE owner_id = 1;\n"
CASE = "one user's 500 customers, c16"
PG_SCHEMA = """
DROP TABLE IF EXISTS customers, users;
CREATE TABLE users (id serial PRIMARY KEY, name varchar(100), email varchar(255), password varchar,
  created_at timestamptz DEFAULT now(), role varchar DEFAULT 'user');
CREATE TABLE customers (id serial PRIMARY KEY, firstname varchar, lastname varchar, email varchar,
  phone varchar(14), priority smallint CHECK (priority BETWEEN 1 AND 5), owner_id int REFERENCES users (id),
  is_archived bool DEFAULT false, created_at timestamptz DEFAULT now());
INSERT INTO users (name, email, password) VALUES ('Test', 'test@example.com', 'x');
INSERT INTO customers (firstname, lastname, email, phone, priority, owner_id)
  SELECT 'Test', 'User', 'test@example.com', '123456789', 1, 1 FROM generate_series(1, 500);
CREATE INDEX ON customers (owner_id);
GRANT SELECT ON users, customers TO anonymous;
ANALYZE;
"""
SQLITE_SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT, password TEXT,
  created_at TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), role TEXT DEFAULT 'user');
CREATE TABLE customers (id INTEGER PRIMARY KEY, firstname TEXT, lastname TEXT, email TEXT, phone TEXT,
  priority INTEGER CHECK (priority BETWEEN 1 AND 5), owner_id INTEGER REFERENCES users (id),
  is_archived BOOLEAN DEFAULT 0, created_at TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')));
INSERT INTO users (name, email, password) VALUES ('Test', 'test@example.com', 'x');
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
INSERT INTO customers (firstname, lastname, email, phone, priority, owner_id)
  SELECT 'Test', 'User', 'test@example.com', '123456789', 1, 1 FROM n;
CREATE INDEX customers_owner ON customers (owner_id);
"""


def arguments(ap):
    ap.add_argument("--requests", type=int, default=10_000, help="oha -n (default 10,000)")
    ap.add_argument("--no-postgrest", action="store_true", help="leave PostgREST out")


def measure(ctx, name, argv, port, pg=None, cache_feed=False):
    """One server: its answer, the warm-up (with the cache on, the first store) and the load.
    cache_feed: wait for the cache to follow PostgreSQL's changes first."""
    try:
        server = ctx.server(name, argv(port), port, ready=PATH)
        if cache_feed:
            wait_cache_live(server)
    except ServerError as e:
        schema.add(ctx.result, CASE, name, schema.load(error=str(e)))
        return
    with server:
        url = server.url(PATH)
        body = http(url)[2]
        ctx.oha.run(ctx.oha.argv(url, 16, requests=500))  # the warm-up
        figures = ctx.load(server, url, 16, cluster=pg, requests=ctx.args.requests, label="load")
    cpu = (figures.get("server_cpu_s") or 0) + (figures.get("db_cpu_s") or 0)
    figures["extra"] = {"rows": len(json.loads(body)), "bytes": len(body),
                        "req/s per CPU-second": ctx.args.requests / cpu if cpu else None}
    schema.add(ctx.result, CASE, name, figures)


def run(ctx):
    a = ctx.args
    ctx.result["config"].update(requests=a.requests, connections=16)
    ctx.result["about"] = (f"`GET {PATH}`: `oha -n {a.requests} -c 16` after 500 warm-up requests, one server at "
                           "a time. req/s per CPU-second = requests ÷ (server + PostgreSQL CPU seconds), comparable "
                           "with the seed's req/s per vCPU.")
    postgrest = None
    if a.no_postgrest:
        schema.not_run(ctx.result, "postgrest", "left out with --no-postgrest")
    else:
        postgrest = ctx.postgrest()
    pg = ctx.cluster()
    pg.ensure_roles("anonymous")
    pg.psql(PG_SCHEMA)
    uri = pg.uri("authenticator")
    for cache in ("false", "true"):
        if cache == "true":
            # The cache's change feed, installed by rowgate: logical decoding (the cluster runs with
            # wal_level=logical), which the serving role reads over a replication connection.
            pg.psql("ALTER ROLE authenticator REPLICATION")
            run_cmd([ctx.rowgate, "cache", "install", "--db-uri", pg.uri()], timeout=300)
        measure(ctx, "rowgate-pg" + ("-cached" if cache == "true" else ""),
                lambda port: rowgate_serve(ctx.rowgate, port, uri, "--cache-enabled", cache), free_port(), pg,
                cache_feed=cache == "true")
    if postgrest:
        measure(ctx, "postgrest", lambda port: postgrest_argv(postgrest, f"{ctx.logs}/postgrest.conf", port, uri),
                free_port(), pg)
    ctx.result["ceilings"].append(pgbench.ceiling(pg, "the customers SELECT (500 rows)", CEILING_SQL, 16, 5))
    pg.stop()
    work = tempfile.mkdtemp(prefix="rowgate-s003-")
    try:
        db, rules = os.path.join(work, "customers.db"), os.path.join(work, "rules.toml")
        c = sqlite3.connect(db)
        c.executescript(SQLITE_SCHEMA)
        c.close()
        with open(rules, "w") as f:
            f.write('[customers]\nselect = { anon = "true" }\n[users]\nselect = { anon = "true" }\n')
        for cache in ("false", "true"):
            measure(ctx, "rowgate-sqlite" + ("-cached" if cache == "true" else ""), lambda port: rowgate_serve(
                ctx.rowgate, port, f"sqlite:{db}", "--db-rules", rules, "--cache-enabled", cache, schemas=None,
                anon_role="anon"), free_port())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    pgr = schema.req_s(ctx.result, CASE, "postgrest")
    schema.compare(ctx.result, "rowgate on PostgreSQL / PostgREST req/s", schema.req_s(ctx.result, CASE, "rowgate-pg"),
                   pgr)
