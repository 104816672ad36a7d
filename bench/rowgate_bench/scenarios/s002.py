"""s002 (bench/WORKLOADS.md): master-detail, a random dept with its 10 emps nested, and single-row
inserts, rowgate beside PostgREST 12.0.2.

Data set S (100,000 depts, 1,000,000 emps) in bench/.data/s002, made once. Each server in turn:
`oha --rand-regex-url` (a uniformly random dept id per request) at 1, 64, 100, 1024 and 4096
connections, then `POST /dept_log` (return=minimal) at 100; both must answer the same JSON for
one dept. With --rounds N the servers alternate N times and each case is reported by its median
round. The ceiling is pgbench of the seed's two SELECTs. The data set and request are also the
cache runner's (cache.py imports them from here).
"""

import json
import time

from .. import pgbench, schema
from ..peers import POSTGREST_VERSION, postgrest_argv
from ..procs import free_port, raise_fd_limit
from ..progress import Progress
from ..runner import comma_list
from ..servers import ServerError, http, rowgate_serve

NAME = "s002"
TITLE = "s002 master-detail `GET /dept?select=*,emp(*)&deptno=eq.<random>`"
PUBLISHED = ("5,354–6,978 req/s uncached, 54,502–56,109 req/s from an in-memory cache (i7-3770, 4 cores, `ab -k`, "
             "1 M depts, PostgreSQL on SSD); zero failed requests up to 4,096 connections. By connections, "
             "uncached: c=1 2,003, c=8 6,979, c=64 5,937, c=512 5,624, c=4096 4,331 req/s.")
DATASET = "s002-S-v1"  # bump when the data set below changes
DEPTS, EMPS_PER_DEPT, CHUNK = 100_000, 10, 10_000
FIRST_DEPT, FIRST_EMP = 1_000_000, 2_000_000  # ids 1,000,000..1,099,999: a uniform random id is one regex
PATH = "/dept?select=*,emp(*)&deptno=eq.{}"
RAND_PATH = r"/dept\?select=\*,emp\(\*\)&deptno=eq[.]10[0-9]{5}"
SAMPLE_DEPT = FIRST_DEPT + 4242
INSERT_BODY = '{"dname":"Dname - insertBenchmark","loc":"Loc - insertBenchmark"}'
CONCURRENCY = [1, 64, 100, 1024, 4096]
TWO_SELECTS = (f"\\set id random({FIRST_DEPT}, {FIRST_DEPT + DEPTS - 1})\n"
               "SELECT deptno, dname, loc FROM dept WHERE deptno = :id;\n"
               "SELECT empno, ename, job, mgr, hiredate, sal, comm, deptno FROM emp WHERE deptno = :id;\n")
SCHEMA_SQL = """
DROP TABLE IF EXISTS emp, dept, dept_log CASCADE;
CREATE TABLE dept (deptno integer PRIMARY KEY, dname text, loc text);
CREATE TABLE emp (
  empno integer PRIMARY KEY, ename text, job text, mgr integer REFERENCES emp (empno),
  hiredate date, sal integer, comm integer, deptno integer REFERENCES dept (deptno));
CREATE TABLE dept_log (id bigserial PRIMARY KEY, dname text, loc text, at timestamptz DEFAULT now());
GRANT SELECT ON dept, emp TO anonymous;
GRANT INSERT ON dept_log TO anonymous;
GRANT USAGE ON SEQUENCE dept_log_id_seq TO anonymous;
"""


def arguments(ap):
    ap.add_argument("--quick", action="store_true", help="10 s runs, 3 s warm-up")
    ap.add_argument("--duration", type=int, help="seconds per load (default 20; 10 with --quick)")
    ap.add_argument("--warmup", type=int, help="warm-up seconds per server (default 5; 3 with --quick)")
    ap.add_argument("--concurrency", type=comma_list(), default=CONCURRENCY,
                    help=f"connection counts (default {','.join(map(str, CONCURRENCY))})")
    ap.add_argument("--servers", type=comma_list({"rowgate", "postgrest"}), default=["rowgate", "postgrest"],
                    help="comma list from rowgate,postgrest")
    ap.add_argument("--db-pool", type=int, default=10, help="--db-pool / db-pool of both servers (default 10)")
    ap.add_argument("--no-insert", action="store_true", help="skip the single-row insert case")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the pgbench ceiling")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every server this many times, alternating; each case by its median round")


def generate(pg):
    """dept and emp with the seed's fixed strings, 10 emps per dept, in chunks of depts."""
    pg.ensure_roles("anonymous")
    pg.psql(SCHEMA_SQL)
    bar = Progress(f"data set {DATASET}: dept", DEPTS, "depts")
    for first in range(0, DEPTS, CHUNK):
        last = min(first + CHUNK, DEPTS) - 1
        pg.psql(f"""
INSERT INTO dept SELECT {FIRST_DEPT} + i, 'Dname - insertBenchmark', 'Loc - insertBenchmark'
  FROM generate_series({first}, {last}) i;
INSERT INTO emp SELECT {FIRST_EMP} + i * {EMPS_PER_DEPT} + j, 'Ename - insertBenchmark', 'Job - insertBenchmark',
  NULL, DATE '1981-06-09', 99, 99, {FIRST_DEPT} + i
  FROM generate_series({first}, {last}) i, generate_series(0, {EMPS_PER_DEPT - 1}) j""", timeout=1800)
        bar.update(last + 1, f" ({(last + 1) * EMPS_PER_DEPT:,} emps)")
    pg.psql("CREATE INDEX emp_deptno_index ON emp USING btree (deptno); ANALYZE dept; ANALYZE emp", timeout=1800)


def prepare(pg):
    """The data set, made when missing; the insert table emptied. Returns whether it was made."""
    made = pg.ensure_dataset(DATASET, generate)
    pg.psql("TRUNCATE dept_log")
    return made


def start_server(ctx, name, pg, port):
    uri = pg.uri("authenticator")
    if name == "postgrest":
        argv = postgrest_argv(ctx.postgrest(), f"{ctx.data}/postgrest.conf", port, uri, db_pool=ctx.args.db_pool)
    else:
        argv = rowgate_serve(ctx.rowgate, port, uri, pool=ctx.args.db_pool)
    return ctx.server(name, argv, port, ready=PATH.format(SAMPLE_DEPT))


def bench_server(ctx, name, pg):
    """One round of one server: {case: LOAD} and its answer for the sample dept."""
    a, cases = ctx.args, {}
    try:
        server = start_server(ctx, name, pg, free_port())
    except ServerError as e:
        return {f"c{c}": schema.load(error=str(e)) for c in a.concurrency}, None
    with server:
        _, _, body = http(server.url(PATH.format(SAMPLE_DEPT)))
        ctx.oha.warm(server.url(RAND_PATH), a.warmup, 64, rand=True)
        for c in a.concurrency:
            cases[f"c{c}"] = ctx.load(server, server.url(RAND_PATH), c, a.duration, pg, rand=True, label=f"c{c}")
            if not server.alive():
                return cases, body
            time.sleep(2)  # let closed connections drain before the next level
        if not a.no_insert:
            cases["insert"] = ctx.load(server, server.url("/dept_log"), 100, a.duration, pg, ok=("201",),
                                       method="POST", content_type="application/json", body=INSERT_BODY,
                                       headers={"Prefer": "return=minimal"}, label="insert")
    return cases, body


def check_answers(ctx, bodies):
    """Both servers' answers for the sample dept, parsed, must be equal: one dept, 10 emps."""
    try:
        parsed = {n: json.loads(b) for n, b in bodies.items()}
    except ValueError as e:
        ctx.result["checks"]["answers"] = f"not JSON: {e}"
        return
    for n, v in parsed.items():
        emps = len(v[0].get("emp", [])) if isinstance(v, list) and v else 0
        ctx.result["checks"][f"{n}: answer for dept {SAMPLE_DEPT}"] = f"{len(v)} dept, {emps} emps, {len(bodies[n])} B"
    if len(parsed) > 1:
        ctx.result["checks"]["answers equal across servers"] = len(
            {json.dumps(v, sort_keys=True) for v in parsed.values()}) == 1


def ratios(ctx, ceiling):
    r = ctx.result
    for case in [f"c{c}" for c in ctx.args.concurrency] + ["insert"]:
        target = {"c100": 5, "insert": 3}.get(case)
        schema.compare(r, f"{case}: rowgate / PostgREST {POSTGREST_VERSION} req/s", schema.req_s(r, case, "rowgate"),
                       schema.req_s(r, case, "postgrest"), target)
    schema.compare(r, "c100: rowgate req/s / the pgbench ceiling (two SELECTs)", schema.req_s(r, "c100", "rowgate"),
                   ceiling, pct=True)
    failed = sum(f.get("failed") or 0 for e, s, f in schema.loads(r) if s == "rowgate" and e["case"] != "insert")
    if any(s == "rowgate" for _, s, _ in schema.loads(r)):
        schema.ratio(r, "rowgate: failed requests over every concurrency level", f"{failed:,}", "0",
                     "met" if failed == 0 else "NOT met")


def run(ctx):
    a = ctx.args
    a.duration = a.duration or (10 if a.quick else 20)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    ctx.result["config"].update(duration=a.duration, warmup=a.warmup, concurrency=a.concurrency, db_pool=a.db_pool,
                                servers=a.servers, rounds=a.rounds, dataset=DATASET, nofile=raise_fd_limit())
    ctx.result["about"] = (
        f"{DEPTS:,} depts and {DEPTS * EMPS_PER_DEPT:,} emps; a uniformly random dept per request (`oha "
        f"--rand-regex-url`), {a.duration} s per level after a {a.warmup} s warm-up at 64 connections; the insert: "
        f"`POST /dept_log`, `Prefer: return=minimal`, 100 connections; db-pool {a.db_pool} for both servers; no "
        "response cache. `failed`: oha errors and answers other than 200 (201 for the insert)."
        + (f" The servers alternated {a.rounds} times; each row is the median round, failures summed over all "
           "rounds." if a.rounds > 1 else ""))
    if "postgrest" not in a.servers:
        schema.not_run(ctx.result, "postgrest", "left out with --servers")
    servers = [s for s in a.servers if s != "postgrest" or ctx.postgrest()]
    pg = ctx.cluster()
    ctx.result["checks"]["data set generated this run"] = prepare(pg)
    rounds, bodies = {s: {} for s in servers}, {}
    for n in range(a.rounds):
        if a.rounds > 1:
            ctx.log(f"round {n + 1} of {a.rounds}")
        for name in servers:  # strictly one after the other
            cases, body = bench_server(ctx, name, pg)
            for case, figures in cases.items():
                rounds[name].setdefault(case, []).append(figures)
            if body is not None:
                bodies[name] = body
    for name, cases in rounds.items():
        for case, runs in cases.items():
            c = int(case[1:]) if case.startswith("c") else None
            schema.add(ctx.result, case, name, schema.median_round(runs) if len(runs) > 1 else runs[0], connections=c)
    check_answers(ctx, bodies)
    ceiling = None
    if not a.no_ceiling:
        ctx.result["ceilings"].append(pgbench.ceiling(pg, "the seed's two SELECTs for a random dept", TWO_SELECTS,
                                                      100, a.duration))
        ceiling = ctx.result["ceilings"][-1]["tps"]
    ratios(ctx, ceiling)
