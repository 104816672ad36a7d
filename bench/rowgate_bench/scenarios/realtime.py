"""realtime-fanout (bench/WORKLOADS.md): one table's inserts pushed to N subscribers, each a user
of its own, the table under row-level security (every signed-in user may read it), writes at a
fixed rate through the HTTP API. examples/realtime_load opens the subscribers (Supabase
Realtime's WebSocket protocol to rowgate, Server-Sent Events to PocketBase) and writes the rows;
each row carries its write's start time, so every delivery's latency is measured from the
write's start to the subscriber. In one run, one load at a time, per subscriber count:

  rowgate, PostgreSQL   the publication `supabase_realtime`, RLS policy `USING (true)` for the
                        role `authenticated` (a read per role, not per user: the policy reads no
                        claim), rowgate's own pool
  rowgate, SQLite       `realtime-tables`, the rule `authenticated = "true"`
  PocketBase 0.40.6     its realtime (SSE), the collection's list and view rules
                        `@request.auth.id != ""` (checked per subscriber per record)

then, at the middle subscriber count, the write rate raised step by step (from 10 writes/s) until
a server stops keeping up (deliveries missing, or p99 over a second): the most messages/s each
delivers. A count whose messages/s at the fixed rate pass --budget (10,000 × 100 = 1,000,000/s,
past what one machine's loopback and load generator carry) is measured at the rate within it too.
Figures per load: messages/s delivered, latency p50/p99/max, server (and PostgreSQL) CPU, the
server's RSS before the subscribers, with them idle, and at peak: KB per idle connection.

Targets (issue #22): p99 < 100 ms at 1,000 subscribers and 100 writes/s with RLS on; ≥ 3×
PocketBase's delivered messages/s at equal or better p99; < 20 KB RSS per idle connection.
"""

import base64
import hashlib
import hmac
import json
import os
import sqlite3
import subprocess
import threading
import time

from .. import procs, schema
from ..peers import pocketbase_binary
from ..procs import free_port
from ..servers import call

NAME = "realtime-fanout"
DATA = "realtime"
TITLE = "realtime-fanout: one table's inserts to N subscribers under row-level security, beside PocketBase"
PUBLISHED = (
    "Supabase Realtime's Postgres Changes limits (docs, `data/realtime/throughput.json`; their hardware, "
    "Micro / Small / Large compute): with RLS, 500 clients → 3,000 messages/s total (p95 228 / 282 / 618 ms), "
    "1,500–2,000 → 3,000–4,000 msg/s (p95 356–606 ms), 3,000–4,000 → 3,000–4,000 msg/s (p95 616–920 ms); "
    "without RLS, 500 clients → 32,000 msg/s (p95 184–238 ms), 5,000–10,000 → 50,000 msg/s (p95 0.7–1.35 s). "
    "Their Broadcast (no database): 32,000 users, 224,000 msg/s, p99 213 ms on a 2–6 node cluster.")
FAIL_ON_FAILED = False
USES_OHA = False
EXAMPLES = ["realtime_load"]
JWT_SECRET = "realtime-fanout-secret-of-at-least-32-bytes"
SCHEMA = """
DROP PUBLICATION IF EXISTS supabase_realtime;
DROP TABLE IF EXISTS public.messages;
CREATE TABLE public.messages (id bigserial PRIMARY KEY, body text NOT NULL, sent_at bigint NOT NULL,
                              created_at timestamptz NOT NULL DEFAULT now());
ALTER TABLE public.messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY signed_in_read ON public.messages FOR SELECT TO authenticated USING (true);
CREATE POLICY service_write ON public.messages FOR INSERT TO service_role WITH CHECK (true);
GRANT USAGE ON SCHEMA public TO authenticated, service_role;
GRANT SELECT ON public.messages TO authenticated;
GRANT SELECT, INSERT ON public.messages TO service_role;
GRANT USAGE ON SEQUENCE public.messages_id_seq TO service_role;
"""
RULES = """[messages.select]
authenticated = "true"
service_role = "true"
[messages.insert]
service_role = "true"
"""


def arguments(ap):
    ap.add_argument("--subscribers", default="100,1000,10000",
                    help="subscriber counts, comma-separated (default 100,1000,10000)")
    ap.add_argument("--rate", type=float, default=100, help="writes per second (default 100)")
    ap.add_argument("--duration", type=float, default=10, help="seconds of writes per load (default 10)")
    ap.add_argument("--ramp", default="10,25,50,100,250,500,1000,2000",
                    help="write rates of the saturation step, comma-separated ('' to skip)")
    ap.add_argument("--budget", type=float, default=100_000,
                    help="above this many messages/s (subscribers × rate), a subscriber count is also "
                         "measured at the rate that fits (default 100000)")
    ap.add_argument("--peers", choices=["pocketbase", "none"], default="pocketbase",
                    help="peers beside rowgate: pocketbase (the default) or none")
    ap.add_argument("--out", help="results file stem (default bench/results/<date>-realtime-fanout)")


def token(claims):
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    head = b64(b'{"alg":"HS256","typ":"JWT"}')
    body = b64(json.dumps(claims).encode())
    sig = hmac.new(JWT_SECRET.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def start_rowgate(ctx, name, db_uri, *extra):
    port = free_port()
    argv = [ctx.rowgate, "serve", "--db-uri", db_uri, "--db-anon-role", "anon", "--jwt-secret", JWT_SECRET,
            "--server-host", "127.0.0.1", "--server-port", str(port), "--realtime-enabled", "true",
            "--server-max-connections", "30000", "--log-level", "warn", *extra]
    return ctx.server(name, argv, port, ready="/ready")


def run(ctx):
    a = ctx.args
    counts = [int(x) for x in a.subscribers.split(",") if x.strip()]
    ramp = [float(x) for x in a.ramp.split(",") if x.strip()]
    ctx.result["config"].update(subscribers=counts, rate=a.rate, duration=a.duration, ramp=ramp)
    ctx.result["about"] = (
        f"{', '.join(f'{n:,}' for n in counts)} subscribers, each a user of its own (its own token), of one "
        f"table's inserts; {a.rate:g} writes/s for {a.duration:g} s through the HTTP API (examples/realtime_load, "
        "which also holds the subscribers: everything on this one machine); latency from each write's start to "
        f"each delivery. A count whose messages/s at that rate pass {a.budget:,.0f} is measured again at the rate "
        "within it (what this machine's loopback and load generator can carry). Saturation: the middle count at "
        "rising write rates until deliveries go missing or p99 passes 1 s. rowgate on PostgreSQL (RLS on) and on "
        "SQLite (access rules); PocketBase with list/view rules for signed-in users.")
    procs.raise_fd_limit()
    work = os.path.join(ctx.data, "work")
    os.makedirs(work, exist_ok=True)
    users = max(counts)
    tokens = os.path.join(work, "tokens.txt")
    exp = int(time.time()) + 6 * 3600
    with open(tokens, "w") as f:
        for i in range(users):
            f.write(token({"role": "authenticated", "sub": f"user-{i}", "exp": exp}) + "\n")
    writer = token({"role": "service_role", "exp": exp})
    targets = [("rowgate (PostgreSQL, RLS)", lambda: rowgate_pg(ctx)),
               ("rowgate (SQLite, rules)", lambda: rowgate_sqlite(ctx, work))]
    if a.peers == "pocketbase":
        targets.append(("pocketbase", lambda: pocketbase(ctx, work, users)))
    else:
        schema.not_run(ctx.result, "pocketbase", "--peers none")
    middle = counts[len(counts) // 2] if counts else 0
    for label, start in targets:
        try:
            server, cluster, subscriber_tokens, writer_token, pb = start()
        except Exception as e:  # noqa: BLE001 - a peer that cannot start is reported, the run goes on
            if label == "pocketbase":
                schema.not_run(ctx.result, "pocketbase", f"could not be started: {type(e).__name__}: {str(e)[-300:]}")
                continue
            raise
        box = [server]  # the server in use: one still busy with a backlog is restarted
        subs, wtok = subscriber_tokens or tokens, writer_token or writer

        def load(n, rate, seconds):
            box[0] = settled(ctx, box[0])
            return fanout(ctx, box[0], cluster, pb, n, rate, seconds, subs, wtok)
        try:
            # First, on the fresh server: what idle subscribers cost.
            n = max(counts)
            schema.add(ctx.result, f"idle: {n:,} subscribers", label, load(n, 0, 0))
            for n in counts:
                for rate in rates(n, a.rate, a.budget):
                    schema.add(ctx.result, f"{n:,} subscribers, {rate:g} writes/s", label, load(n, rate, a.duration))
            for rate in ramp:
                figures = load(middle, rate, max(3.0, a.duration / 2))
                schema.add(ctx.result, f"saturation: {middle:,} subscribers, {rate:g} writes/s", label, figures)
                if not keeps_up(figures):
                    break
        finally:
            box[0].stop()
        if cluster is not None:
            cluster.stop()
    ratios(ctx, counts, middle, a.rate)
    # rowgate failing a subscriber or a write, or missing a delivery within the budget, fails the
    # run (the CI smoke test relies on it); a peer's trouble, or falling behind in the
    # saturation steps or past the budget, is a figure.
    def within(e, f):
        extra = f.get("extra") or {}
        return not e["case"].startswith("saturation") and extra.get("expected", 0) <= a.budget * a.duration
    bad = [f"{e['case']} / {server}: {f.get('error') or f.get('extra')}"
           for e in ctx.result["cases"] for server, f in e["servers"].items()
           if server.startswith("rowgate") and within(e, f)
           and (f.get("error") or f.get("failed") or (f.get("extra") or {}).get("missing"))]
    if bad:
        raise RuntimeError("rowgate failed: " + "; ".join(bad))


def rates(n, rate, budget):
    """The rate asked for, and where n subscribers at it pass the budget, the rate within it."""
    fits = budget / n
    return [rate] if rate <= fits else [rate, float(f"{fits:.3g}")]


def keeps_up(figures):
    extra = figures.get("extra") or {}
    return (not figures.get("error") and extra.get("expected") and extra.get("missing", 1) <= 0.001 * extra["expected"]
            and (figures.get("p99_ms") or 1e9) <= 1000)


def rowgate_pg(ctx):
    cluster = ctx.cluster(DATA)
    cluster.ensure_roles("anon", "authenticated", "service_role")
    cluster.psql(SCHEMA)
    # The change feed connects as a role of its own with REPLICATION, not as the authenticator.
    cluster.psql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'replicator') THEN "
                 "CREATE ROLE replicator LOGIN; END IF; END $$")
    procs.run([ctx.rowgate, "realtime", "install", "--db-uri", cluster.uri(), "--replication-role", "replicator"],
              timeout=60)
    cluster.psql("ALTER PUBLICATION supabase_realtime ADD TABLE public.messages")
    server = start_rowgate(ctx, "rowgate (PostgreSQL, RLS)", cluster.uri("authenticator"), "--db-pool", "10",
                           "--db-uri-replication", cluster.uri("replicator"))
    return server, cluster, None, None, False


def rowgate_sqlite(ctx, work):
    db = os.path.join(work, "realtime.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE messages (id integer PRIMARY KEY, body text NOT NULL, sent_at integer NOT NULL, "
              "created_at text NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ')))")
    c.commit()
    c.close()
    rules = os.path.join(work, "rules.toml")
    with open(rules, "w") as f:
        f.write(RULES)
    server = start_rowgate(ctx, "rowgate (SQLite, rules)", f"sqlite:{db}", "--db-rules", rules,
                           "--realtime-tables", "messages", "--db-sqlite-synchronous", "normal")
    return server, None, None, None, False


def pocketbase(ctx, work, users):
    """PocketBase with the collection, `users` users and a token for each (impersonated by the
    superuser: no password hashing per user)."""
    binary = pocketbase_binary()
    ctx.result["versions"]["pocketbase"] = procs.run([binary, "--version"], timeout=30).stdout.strip()
    pbdir = os.path.join(work, "pb_data")
    # A fresh pb_data, and no migration files: PocketBase writes one for every collection made
    # through its API (beside pb_data) and would replay it on the next run's fresh data.
    for old in (pbdir, os.path.join(work, "pb_migrations")):
        if os.path.exists(old):
            subprocess.run(["rm", "-rf", old], check=True)
    procs.run([binary, "superuser", "upsert", "admin@example.com", "adminpass1234", "--dir", pbdir], timeout=60)
    port = free_port()
    pb = ctx.server("pocketbase", [binary, "serve", "--http", f"127.0.0.1:{port}", "--dir", pbdir,
                                   "--automigrate=false"], port, ready="/api/health")
    try:
        admin = call(pb.base, "POST", "/api/collections/_superusers/auth-with-password",
                     {"identity": "admin@example.com", "password": "adminpass1234"})["token"]
        auth = {"Authorization": admin}
        call(pb.base, "PATCH", "/api/settings", {"logs": {"maxDays": 0}}, auth)
        signed_in = '@request.auth.id != ""'
        call(pb.base, "POST", "/api/collections", {
            "name": "messages", "type": "base", "listRule": signed_in, "viewRule": signed_in, "createRule": None,
            "fields": [{"name": "body", "type": "text"}, {"name": "sent_at", "type": "number"},
                       {"name": "created", "type": "autodate", "onCreate": True}]}, auth)
        # The users straight into PocketBase's file (as s004 seeds it), then a token for each.
        call(pb.base, "POST", "/api/collections/users/records",
             {"email": "seed@example.com", "password": "seedpass1234", "passwordConfirm": "seedpass1234"})
        db = os.path.join(pbdir, "data.db")
        c = sqlite3.connect(db)
        hashed = c.execute("SELECT password FROM users WHERE email = 'seed@example.com'").fetchone()[0]
        stamp = "2026-01-01 00:00:00.000Z"
        c.executemany("INSERT INTO users (id, email, name, password, tokenKey, verified, emailVisibility, created, "
                      "updated) VALUES (?, ?, '', ?, ?, 1, 0, ?, ?)",
                      [(f"u{i:013d}", f"u{i}@example.com", hashed, f"key{i:040d}", stamp, stamp)
                       for i in range(users)])
        c.commit()
        c.close()
        tokens = os.path.join(work, "pb-tokens.txt")
        impersonated = [None] * users

        def fetch(lo, hi):
            for i in range(lo, hi):
                impersonated[i] = call(pb.base, "POST", f"/api/collections/users/impersonate/u{i:013d}",
                                       {"duration": 6 * 3600}, auth)["token"]
        threads = [threading.Thread(target=fetch, args=(k * users // 8, (k + 1) * users // 8)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with open(tokens, "w") as f:
            f.write("\n".join(impersonated) + "\n")
        return pb, None, tokens, admin, True
    except Exception:
        pb.stop()
        raise


def cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def quiet(server, timeout=60):
    """Whether the server goes idle (under 5 % of a core for half a second) within `timeout`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        before = cpu_s(server.pid)
        time.sleep(0.5)
        if cpu_s(server.pid) - before < 0.025:
            return True
    return False


def settled(ctx, server):
    """The server, idle: a server that fell behind is not measured again while it still works
    through the last load's backlog; after a minute it is restarted (same data, same port)."""
    if quiet(server):
        return server
    ctx.log(f"{server.name} still busy a minute after the load: restarting it")
    argv, ready = server.proc.args, server.ready
    server.stop()
    return ctx.server(server.name, argv, server.port, ready=ready)


def fanout(ctx, server, cluster, pb, n, rate, seconds, tokens, writer):
    """One load: n subscribers, `rate` writes/s for `seconds`; LOAD figures."""
    host = f"127.0.0.1:{server.port}"
    argv = [os.path.join(ctx.bins.example_dir, "realtime_load"), "--target", "pocketbase" if pb else "rowgate",
            "--addr", host, "--subscribers", str(n), "--rate", f"{rate:g}", "--seconds", f"{seconds:g}",
            "--tokens", tokens, "--writer-token", writer, "--hold", "2"]
    time.sleep(0.5)  # the previous load's connections gone
    before = rss_mb(server.pid)
    idle = {}

    errors = os.path.join(ctx.logs, "realtime_load.err")

    def load():
        # Its complaints to a file: a pipe nobody reads would stall it once full.
        with open(errors, "w") as err:
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
        out = []
        for line in p.stdout:
            if line.startswith("subscribed"):
                time.sleep(1)  # inside the loader's idle hold
                idle["rss"] = rss_mb(server.pid)
            out.append(line)
        p.wait(timeout=600)
        if p.returncode != 0:
            with open(errors, errors="replace") as f:
                raise RuntimeError(f"realtime_load exited {p.returncode}: {f.read()[-500:]}")
        return json.loads(out[-1])

    label = f"{server.name} {n:,} subscribers, {rate:g} writes/s" if rate else f"{server.name} {n:,} idle subscribers"
    try:
        r = {}
        figures = ctx.measure(lambda: r.update(load()) or {}, server, cluster)
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        ctx.log(f"{label}: {e}")
        return schema.load(error=f"{type(e).__name__}: {e}", command=" ".join(argv))
    lat = r["latency_ms"]
    per_conn = None
    if before is not None and idle.get("rss") is not None and r["subscribed"]:
        per_conn = round((idle["rss"] - before) * 1024 / r["subscribed"], 1)
    figures.update(req_s=round(r["delivered_per_s"], 1), p50_ms=lat["p50"], p99_ms=lat["p99"], max_ms=lat["max"],
                   requests=r["delivered"], failed=r["write_errors"] + r["subscribe_failures"],
                   command=" ".join(argv[:-4] + ["--writer-token", "…", "--hold", "2"]))
    figures["extra"] = {"subscribers": n, "subscribed": r["subscribed"], "writes": r["writes"],
                        "write_errors": r["write_errors"], "expected": r["expected"], "delivered": r["delivered"],
                        "missing": r["missing"], "rss_before_mb": before, "rss_idle_mb": idle.get("rss"),
                        "kb_per_idle_connection": per_conn, "connect_s": round(r["connect_s"], 2)}
    if not server.alive():
        figures["error"] = f"{server.name} exited during the load: {server.log_tail()}"
    ctx.log(f"{label}: {r['delivered_per_s']:,.0f} msg/s delivered ({r['missing']} missing), p50 {lat['p50']:.1f} "
            f"ms, p99 {lat['p99']:.1f} ms, {per_conn} KB per idle connection")
    return schema.load(**figures)


def ratios(ctx, counts, middle, rate):
    r = ctx.result
    pg, lite, pb = "rowgate (PostgreSQL, RLS)", "rowgate (SQLite, rules)", "pocketbase"
    headline = f"{1000:,} subscribers, {rate:g} writes/s"
    got = schema.get(r, headline, pg)
    if got.get("p99_ms") is not None:
        schema.ratio(r, f"p99 at 1,000 subscribers and {rate:g} writes/s, PostgreSQL with RLS (ms)",
                     f"{got['p99_ms']:.1f}", "< 100", "met" if got["p99_ms"] < 100 and keeps_up(got) else "NOT met")

    def best(server, p99_at_most=None):
        """The saturation load delivering the most messages/s that kept up (and, if given, with a
        p99 no worse)."""
        top = None
        for e in r["cases"]:
            f = e["servers"].get(server)
            if (e["case"].startswith("saturation:") and f and keeps_up(f)
                    and (p99_at_most is None or f["p99_ms"] <= p99_at_most)
                    and (top is None or f["req_s"] > top["req_s"])):
                top = f
        return top
    theirs = best(pb)
    for ours in (pg, lite):
        mine = best(ours, theirs["p99_ms"]) if theirs else None
        if theirs and mine:
            value = mine["req_s"] / theirs["req_s"]
            schema.ratio(r, f"most messages/s delivered with all delivered, {ours} / PocketBase at equal or better "
                            f"p99 ({middle:,} subscribers; {mine['req_s']:,.0f} vs {theirs['req_s']:,.0f} msg/s, "
                            f"p99 {mine['p99_ms']:.0f} vs {theirs['p99_ms']:.0f} ms)",
                         f"{value:.1f}×", "≥ 3×", "met" if value >= 3 else "NOT met")
        elif theirs is None and best(ours):
            schema.ratio(r, f"most messages/s delivered with all delivered and p99 ≤ 1 s, {ours} ({middle:,} "
                            "subscribers); PocketBase kept up at no rate tried", f"{best(ours)['req_s']:,.0f}")
    idle = f"idle: {max(counts):,} subscribers"
    for server in (pg, lite, pb):
        kb = (schema.get(r, idle, server).get("extra") or {}).get("kb_per_idle_connection")
        if kb is not None:
            target, verdict = ("< 20", "met" if kb < 20 else "NOT met") if server != pb else ("", "")
            schema.ratio(r, f"RSS per idle connection, {server}, {max(counts):,} subscribers (KB)", f"{kb:.1f}",
                         target, verdict)
