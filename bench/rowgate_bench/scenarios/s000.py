"""s000 (bench/WORKLOADS.md): GET /ptable?limit=10 over 1,000,000 rows, rowgate beside PostgREST
12.0.2, the database's ceilings for the same SQL.

Servers one after the other on one cluster (bench/.data/s000), each warmed up, then under
`oha -z <duration>s -c 100`; every server's answer must be the same 10 rows as PostgreSQL's own
json_agg. --jwt sends the workload's HS256 token on every request (and measures rowgate without
one too); --sweep repeats the load at other connection counts.
"""

import base64
import decimal
import hashlib
import hmac
import json
import time

from .. import pgbench, schema
from ..peers import POSTGREST_VERSION, postgrest_argv
from ..procs import free_port, raise_fd_limit
from ..runner import comma_list
from ..progress import Progress
from ..servers import ServerError, http, rowgate_serve

NAME = "s000"
TITLE = "s000 `GET /ptable?limit=10`"
PUBLISHED = ("EasyREST 5,664 req/s, PostgREST 12.2 3,794 req/s, p99 31.6 / 62.3 ms (i5-10500H, 6 cores, all on "
             "one host, a JWT on every request). EasyREST cannot be installed here; on this 2-core machine it "
             "measured 1,953–2,255 req/s and PostgREST 12.0.2 1,706–2,592.")
PATH = "/ptable?limit=10"
CASE = f"GET {PATH}"
DATASET = "s000-v1"  # bump when the data set below changes
ROWS, CHUNK = 1_000_000, 100_000
# The workload's token: HS256 with this secret, role webuser.
JWT_SECRET = "SMMDJHas78mV74GT749po1U1j97EkbXS"
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

SCHEMA_SQL = """
DROP VIEW IF EXISTS ptable;
DROP TABLE IF EXISTS prtable;
CREATE TABLE prtable (
  id SERIAL PRIMARY KEY, random_int INTEGER, random_text VARCHAR(50),
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, flag BOOLEAN,
  measurement NUMERIC(12,4), description TEXT);
CREATE VIEW ptable AS SELECT id, random_int, random_text, created_at, flag, measurement, description FROM prtable;
GRANT SELECT ON ptable TO anonymous, webuser;
"""

# The SQL each server sends per request, for the ceilings: rowgate's one statement and PostgREST
# 12.0.2's, as `log_statement = 'all'` shows them. Update them when either changes what it sends.
ROWGATE_SQL = ('SELECT "id", "random_int", "random_text", "created_at", "flag", "measurement", '
               '"description" FROM "public"."ptable" LIMIT 10;\n')
POSTGREST_MAIN = (
    'WITH pgrst_source AS ( SELECT "public"."ptable".* FROM "public"."ptable"     LIMIT :lim OFFSET :off )  '
    "SELECT null::bigint AS total_result_set, pg_catalog.count(_postgrest_t) AS page_total, "
    "coalesce(json_agg(_postgrest_t), '[]') AS body, "
    "nullif(current_setting('response.headers', true), '') AS response_headers, "
    "nullif(current_setting('response.status', true), '') AS response_status, "
    "'' AS response_inserted FROM ( SELECT * FROM pgrst_source ) _postgrest_t;\n")
POSTGREST_TX = (
    "\\set lim 10\n\\set off 0\nBEGIN ISOLATION LEVEL READ COMMITTED READ ONLY;\n"
    "select set_config('search_path', '\"public\", \"public\"', true), set_config('role', 'anonymous', true), "
    "set_config('request.jwt.claims', '{\"role\":\"anonymous\"}', true), set_config('request.method', 'GET', true), "
    "set_config('request.path', '/ptable', true), "
    "set_config('request.headers', '{\"host\":\"127.0.0.1\",\"accept\":\"*/*\"}', true), "
    "set_config('request.cookies', '{}', true);\n" + POSTGREST_MAIN + "COMMIT;\n")
PLAIN_SELECT = ("SELECT * FROM ptable LIMIT 10", "SELECT * FROM ptable LIMIT 10;\n")
CEILINGS = [PLAIN_SELECT,
            ("rowgate's statement (column list, LIMIT 10)", ROWGATE_SQL),
            ("PostgREST's main query alone (json_agg, LIMIT $1 OFFSET $2)",
             "\\set lim 10\n\\set off 0\n" + POSTGREST_MAIN),
            ("PostgREST's whole transaction: BEGIN; set_config(...); main query; COMMIT", POSTGREST_TX)]


def arguments(ap):
    ap.add_argument("--quick", action="store_true", help="10 s runs, 3 s warm-up")
    ap.add_argument("--duration", type=int, help="seconds per load and per pgbench run (default 20; 10 with --quick)")
    ap.add_argument("--warmup", type=int, help="warm-up seconds per server (default 5; 3 with --quick)")
    ap.add_argument("--connections", type=int, default=100, help="oha -c and pgbench -c (default 100)")
    ap.add_argument("--peers", type=comma_list({"rowgate", "postgrest", "rowgate-anon"}),
                    help="comma list from rowgate,postgrest (default both) and, with --jwt, rowgate-anon "
                         "(rowgate without a JWT; default with --jwt: all three)")
    ap.add_argument("--jwt", action="store_true", help="the workload's HS256 JWT (role webuser) on every request")
    ap.add_argument("--db-pool", type=int, default=10, help="rowgate --db-pool (default 10, PostgREST's default)")
    ap.add_argument("--no-ceilings", action="store_true", help="skip the pgbench ceilings")
    ap.add_argument("--sweep", type=comma_list(), default=[], metavar="N,N,...",
                    help="after the main load, the same load at each of these connection counts")


def result_name(args):
    return "s000" + ("-jwt" if args.jwt else "") + ("-sweep" if args.sweep else "")


def mint_jwt(now=None, lifetime=3600):
    """The workload's HS256 token: claims sub 1, role webuser, valid for an hour."""
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    now = int(time.time()) if now is None else now
    header = {"alg": "HS256", "typ": "JWT"}
    claims = {"sub": "1", "role": "webuser", "iat": now, "exp": now + lifetime}
    signing_input = ".".join(b64(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims))
    return signing_input + "." + b64(hmac.new(JWT_SECRET.encode(), signing_input.encode(), hashlib.sha256).digest())


def random_text(lo, hi):
    """SQL for lo..hi random alphanumerics; referencing g makes PostgreSQL draw it for every row."""
    return (f"(SELECT string_agg(substr('{ALNUM}', 1 + floor(random() * 62)::int, 1), '') "
            f"FROM generate_series(1, {lo} + floor(random() * {hi - lo + 1})::int + 0 * g))")


def generate(pg):
    """prtable with the workload's distributions, set-based, in chunks; created_at is one value
    for every row, as the original's single INSERT gave."""
    pg.ensure_roles("anonymous", "webuser")
    pg.psql(SCHEMA_SQL)
    created_at = pg.psql("SELECT localtimestamp")
    bar = Progress(f"data set {DATASET}: prtable", ROWS)
    for start in range(1, ROWS + 1, CHUNK):
        end = min(start + CHUNK - 1, ROWS)
        pg.psql(f"""INSERT INTO prtable (id, random_int, random_text, created_at, flag, measurement, description)
SELECT g, floor(random() * 1000000)::int, {random_text(10, 30)}, '{created_at}'::timestamp, random() > 0.5,
       (random() * 10000)::numeric(12,4), 'Description for row ' || g || E'\\n' || {random_text(50, 100)}
FROM generate_series({start}, {end}) g""", timeout=1800)
        bar.update(end)
    pg.psql(f"SELECT setval('prtable_id_seq', {ROWS}); ANALYZE prtable")


def start_server(ctx, name, pg, port, token):
    uri = pg.uri("authenticator")
    if name == "postgrest":
        jwt = {"jwt_secret": JWT_SECRET, "jwt_cache_max_lifetime": 10} if token else {}
        argv = postgrest_argv(ctx.postgrest(), f"{ctx.data}/postgrest.conf", port, uri, **jwt)
    else:
        argv = rowgate_serve(ctx.rowgate, port, uri, pool=ctx.args.db_pool)
        argv += ["--jwt-secret", JWT_SECRET] if name == "rowgate" and token else []
    headers = {"Authorization": f"Bearer {token}"} if token and name != "rowgate-anon" else {}
    return ctx.server(name, argv, port, ready=PATH, headers=headers), headers


def bench_server(ctx, name, pg, token):
    """One server: its answer, the main load and the sweep. Returns its answer (or None)."""
    a = ctx.args
    try:
        server, headers = start_server(ctx, name, pg, free_port(), token)
    except ServerError as e:
        schema.add(ctx.result, CASE, name, schema.load(error=str(e)))
        return None
    with server:
        url = server.url(PATH)
        status, _, body = http(url, headers=headers)
        if headers:  # a token with a broken signature must be refused, not ignored
            bad = headers["Authorization"][:-4] + ("AAAA" if not headers["Authorization"].endswith("AAAA") else "BBBB")
            ctx.result["checks"][f"{name}: status for a token with a wrong signature (want 401)"] = \
                http(url, headers={"Authorization": bad})[0]
        redact = [token] if headers else []
        figures = ctx.load(server, url, a.connections, a.duration, pg, warmup=a.warmup, redact=redact, headers=headers,
                           label=f"c{a.connections}")
        figures["extra"] = {"bytes per answer": len(body)}
        schema.add(ctx.result, CASE, name, figures)
        for c in a.sweep:
            schema.add(ctx.result, f"c{c}", name, ctx.load(server, url, c, a.duration, pg, redact=redact,
                                                           headers=headers, label=f"{c} connections"), connections=c)
        return status, body


def check_answers(ctx, answers, reference):
    """Every answer 10 rows, equal to each other and to the database's json_agg, compared as
    parsed JSON with exact numbers."""
    checks = ctx.result["checks"]
    ref = json.loads(reference, parse_float=decimal.Decimal)
    parsed = {}
    for name, (status, body) in answers.items():
        try:
            parsed[name] = json.loads(body, parse_float=decimal.Decimal)
        except ValueError as e:
            checks[f"{name}: answer"] = f"not JSON: {e}"
            continue
        rows = len(parsed[name]) if isinstance(parsed[name], list) else None
        checks[f"{name}: answer"] = (f"status {status}, {rows} rows, "
                                     f"{'equal to' if parsed[name] == ref else 'DIFFERENT from'} PostgreSQL's json_agg")
    if len(parsed) > 1:
        checks["answers equal across servers"] = len({json.dumps(v, default=str, sort_keys=True)
                                                      for v in parsed.values()}) == 1


def ratios(ctx):
    r, jwt = ctx.result, ctx.args.jwt
    rg, pr, anon = (schema.get(r, CASE, n) for n in ("rowgate", "postgrest", "rowgate-anon"))
    schema.compare(r, f"rowgate{'-with-JWT' if jwt else ''} / PostgREST{'-with-JWT' if jwt else ''} req/s",
                   rg.get("req_s"), pr.get("req_s"), 5)
    schema.compare(r, "PostgREST p99 / rowgate p99", pr.get("p99_ms"), rg.get("p99_ms"), 3)
    if jwt:
        schema.compare(r, "rowgate-with-JWT / rowgate-anonymous req/s (no more than 5 % below)",
                       rg.get("req_s"), anon.get("req_s"), 0.95, pct=True)
    plain = next((c["tps"] for c in r["ceilings"] if c["label"] == PLAIN_SELECT[0]), None)
    schema.compare(r, "rowgate req/s / plain-SELECT pgbench ceiling", rg.get("req_s"), plain, 0.3, pct=True)
    if rg.get("peak_rss_mb"):
        v = rg["peak_rss_mb"]
        schema.ratio(r, "rowgate peak RSS under load", f"{v:.1f} MB", "< 30 MB", "met" if v < 30 else "NOT met")


def run(ctx):
    a = ctx.args
    a.duration = a.duration or (10 if a.quick else 20)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    peers = a.peers or (["rowgate-anon", "rowgate", "postgrest"] if a.jwt else ["rowgate", "postgrest"])
    if a.sweep:
        ctx.result["config"]["nofile"] = raise_fd_limit()
    token = mint_jwt() if a.jwt else None
    ctx.result["config"].update(duration=a.duration, warmup=a.warmup, connections=a.connections, db_pool=a.db_pool,
                                peers=peers, jwt=a.jwt, sweep=a.sweep, dataset=DATASET)
    who = ("the workload's HS256 JWT (role webuser) on every request to rowgate (`--jwt-secret`) and PostgREST "
           "(`jwt-secret`, `jwt-cache-max-lifetime = 10`); rowgate-anon is rowgate without either"
           if a.jwt else "anonymous requests")
    ctx.result["about"] = (f"{ROWS:,} rows; `oha -z {a.duration}s -c {a.connections}` after a {a.warmup} s warm-up, "
                           f"one server at a time; rowgate `--db-pool {a.db_pool}`, PostgREST {POSTGREST_VERSION} with "
                           f"its defaults (db-pool 10); {who}."
                           + (f" Then the same load at {', '.join(map(str, a.sweep))} connections." if a.sweep else ""))
    if "postgrest" in peers:
        ctx.postgrest()  # installed before the cluster starts, while nothing is measured
    else:
        schema.not_run(ctx.result, "postgrest", "left out with --peers")
    pg = ctx.cluster()
    ctx.result["checks"]["data set generated this run"] = pg.ensure_dataset(DATASET, generate)
    if a.jwt:
        granted = pg.psql("SELECT has_table_privilege('webuser', 'public.ptable', 'SELECT')") == "t"
        ctx.result["checks"]["webuser has SELECT on ptable"] = granted
    answers = {}
    for name in peers:  # strictly one after the other
        if name == "postgrest" and not ctx.postgrest():
            continue
        answer = bench_server(ctx, name, pg, token)
        if answer:
            answers[name] = answer
    check_answers(ctx, answers, pg.psql("SELECT json_agg(t) FROM (SELECT * FROM ptable LIMIT 10) t"))
    if not a.no_ceilings:
        ctx.result["ceilings"] = [pgbench.ceiling(pg, label, sql, a.connections, a.duration) for label, sql in CEILINGS]
    ratios(ctx)
