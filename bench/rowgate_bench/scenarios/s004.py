"""s004 (bench/WORKLOADS.md): PocketBase's own benchmark, PocketBase 0.40.6 and rowgate on SQLite
side by side: same data (s004_data.py), same machine, same run, one load at a time.

Each scenario sends N requests at concurrency C through examples/loadgen, each once, and is
measured by the time to complete them all, as the seed's runner does; once with a new TCP
connection per request (the seed's way) and once kept alive, in --rounds rounds alternating which
server goes first, each server reported by its median round. Every request carries a user token.

  list      page of 20 of posts10k / posts100k, with the total at c=1 and c=1000, without at c=1000
  getone    one user by id, 1000 at c=100
  filter    posts100k by author: no index, index, index without the total; 100 at c=10
  create    5,000 posts at c=500
  delete    100 posts of posts10k by id at c=10
  login     password login, 250 at c=10
  refresh   token refresh, 1000 at c=100 (rowgate's refresh tokens rotate: 1000 sessions made first)

Target (issue #7): rowgate's time ≤ ⅓ of PocketBase's.
"""

import json
import os
import shutil
import sqlite3
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from .. import schema
from ..loadgen import run_loadgen
from ..peers import POCKETBASE_VERSION
from ..runner import comma_list
from ..servers import call
from .s004_data import PASSWORD, POSTS, Requests, make_data, start_pocketbase, start_rowgate

NAME = "s004"
TITLE = f"s004: rowgate on SQLite beside PocketBase {POCKETBASE_VERSION}"
PUBLISHED = ("PocketBase (about v0.16) on 2 ARM vCPUs (Hetzner CAX11): posts10k list c=1 3.76 s, posts100k 16.8 s, "
             "create 5,000 6.54 s, author filter 4.73 / 0.139 s, getOne 0.672 s, delete 0.150 s; PocketBase "
             f"{POCKETBASE_VERSION} measured on this machine is in the table.")
USES_OHA = False
USES_LOADGEN = True
SCENARIOS = ["list", "getone", "filter", "create", "delete", "login", "refresh"]


def arguments(ap):
    ap.add_argument("--quick", action="store_true", help="a tenth of the posts and of most request counts")
    ap.add_argument("--only", type=comma_list(set(SCENARIOS)), default=SCENARIOS,
                    help=f"comma list from {','.join(SCENARIOS)}")
    ap.add_argument("--sqlite-synchronous", choices=["full", "normal"], default="normal",
                    help="rowgate's db-sqlite-synchronous; default normal, the durability PocketBase commits with")
    ap.add_argument("--cooldown", type=float, default=1.0, help="seconds between loads (default 1)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per scenario, servers alternating (default 3)")
    ap.add_argument("--out", help="results file stem (default bench/results/<date>-s004)")
    ap.add_argument("--peers", choices=["pocketbase", "none"], default="pocketbase",
                    help="peers beside rowgate: pocketbase (the default) or none")


def result_stem(args):
    return "s004" + ("-quick" if args.quick else "") + ("-sync-full" if args.sqlite_synchronous == "full" else "")


def rowgate_sessions(server, n):
    """n fresh refresh tokens (each may be spent once), made by logging in n times, 4 at a time."""
    body = {"email": "users0@example.com", "password": PASSWORD}
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda _: call(server.base, "POST", "/auth/v1/token?grant_type=password", body)
                             ["refresh_token"], range(n)))


class Bench:
    """Runs each scenario on every server, in rounds, into the result."""

    def __init__(self, ctx, servers, work):
        self.ctx, self.servers, self.work = ctx, servers, work

    def measure(self, name, n, c, make):
        """make(server name, keep_alive, round) -> request lines; one case per connection mode."""
        a = self.ctx.args
        for keep_alive in (False, True):
            case = f"{name} ({'keep-alive' if keep_alive else 'new connection per request'})"
            rounds = {}
            for rnd in range(a.rounds):
                # Alternate who goes first, so that neither always runs on the warmer machine.
                order = ("pocketbase", "rowgate") if rnd % 2 == 0 else ("rowgate", "pocketbase")
                for who in (w for w in order if w in self.servers):
                    lines = make(who, keep_alive, rnd)
                    time.sleep(a.cooldown)  # the seed's cool-down between loads, shortened
                    server = self.servers[who]
                    figures = self.ctx.measure(lambda: run_loadgen(
                        self.ctx.loadgen, server.port, lines, c, keep_alive, os.path.join(self.work, "requests.jsonl")),
                        server)
                    figures["command"] = f"loadgen: {n} requests, concurrency {c}"
                    rounds.setdefault(who, []).append(figures)
                    self.ctx.log(f"{case:<60} {who:<10} round {rnd + 1} {figures['completed_s']:7.3f} s "
                                 f"statuses {figures['statuses']} errors {figures['errors']}"
                                 + (" <-- NOT 2xx" if figures["failed"] else ""))
            for who, runs in rounds.items():
                schema.add(self.ctx.result, case, who, schema.median_round(runs, by="completed_s"))
            schema.compare(self.ctx.result, f"{case}: rowgate / PocketBase time",
                           schema.get(self.ctx.result, case, "rowgate").get("completed_s"),
                           schema.get(self.ctx.result, case, "pocketbase").get("completed_s"), 1 / 3, at_most=True)


def run(ctx):
    a = ctx.args
    ctx.result["config"].update(quick=a.quick, only=a.only, rounds=a.rounds, cooldown=a.cooldown,
                                rowgate_synchronous=a.sqlite_synchronous, peers=a.peers)
    ctx.result["about"] = (
        f"Completed seconds for N requests (lower is better), each server by its median of {a.rounds} round(s), the "
        f"servers alternating who goes first; rowgate commits with synchronous={a.sqlite_synchronous.upper()}, "
        "PocketBase with NORMAL" + (" (the same durability; rowgate's own default is FULL)"
                                    if a.sqlite_synchronous == "normal" else "") + ". Ratio = rowgate / PocketBase.")
    scale = 10 if a.quick else 1
    if a.peers == "none":
        schema.not_run(ctx.result, "pocketbase", "left out with --peers")
    work, servers, pb_token = tempfile.mkdtemp(prefix="rowgate-s004-"), {}, None
    try:
        ctx.log(f"work dir {work}; generating data")
        data = make_data(a.quick)
        if a.peers == "pocketbase":
            try:
                servers["pocketbase"], pb_db = start_pocketbase(ctx, work, data)
                pb_token = call(servers["pocketbase"].base, "POST", "/api/collections/users/auth-with-password",
                                {"identity": "users0@example.com", "password": PASSWORD})["token"]
            except Exception as e:  # noqa: BLE001 - any failure to install or start is reported
                schema.not_run(ctx.result, "pocketbase", f"could not be started: {type(e).__name__}: {str(e)[-300:]}")
                ctx.log(f"PocketBase not in this run ({e}); measuring rowgate alone")
                if "pocketbase" in servers:
                    servers.pop("pocketbase").stop()
        servers["rowgate"], rg_db = start_rowgate(ctx, work, data, a.sqlite_synchronous)
        rg_token = call(servers["rowgate"].base, "POST", "/auth/v1/token?grant_type=password",
                        {"email": "users0@example.com", "password": PASSWORD})["access_token"]
        req, bench = Requests(data, pb_token, rg_token), Bench(ctx, servers, work)
        posts = {t: f"{t} ({len(data['posts'][t])} rows)" if a.quick else t for t in POSTS}
        if "list" in a.only:
            for t in POSTS:
                bench.measure(f"{posts[t]} list page 20, c=1", 1000 // scale, 1,
                              lambda w, k, r, t=t: req.list(w, t, True, 1000 // scale))
                bench.measure(f"{posts[t]} list page 20, c=1000", 1000, 1000,
                              lambda w, k, r, t=t: req.list(w, t, True, 1000))
                bench.measure(f"{posts[t]} list, no total, c=1000", 1000, 1000,
                              lambda w, k, r, t=t: req.list(w, t, False, 1000))
        if "getone" in a.only:
            bench.measure("users get one, c=100", 1000, 100, lambda w, k, r: req.getone(w, 1000))
        if "filter" in a.only:
            big = posts["posts100k"]
            bench.measure(f"{big} filter author, no index, c=10", 100, 10, lambda w, k, r: req.filter(w, True, 100))
            for db in [rg_db] + ([pb_db] if "pocketbase" in servers else []):
                c = sqlite3.connect(db, timeout=30)
                c.execute("CREATE INDEX author_idx ON posts100k (author)")
                c.close()
            time.sleep(1.5)  # rowgate reloads its schema cache within 0.5 s of DDL
            bench.measure(f"{big} filter author, index, c=10", 100, 10, lambda w, k, r: req.filter(w, True, 100))
            bench.measure(f"{big} filter author, index, no total, c=10", 100, 10,
                          lambda w, k, r: req.filter(w, False, 100))
        if "create" in a.only:
            bench.measure("create post, c=500", 5000 // scale, 500, lambda w, k, r: req.create(w, 5000 // scale))
        if "delete" in a.only:
            ids = [p[0] for p in data["posts"]["posts10k"]]
            # Every round and connection mode deletes 100 posts no earlier one did.
            bench.measure(f"{posts['posts10k']} delete post, c=10", 100, 10,
                          lambda w, k, r: req.delete(w, ids[(2 * r + k) * 100:(2 * r + k + 1) * 100]))
        if "login" in a.only:
            n = 250 // (5 if a.quick else 1)
            bench.measure("auth login (password), c=10", n, 10, lambda w, k, r: req.login(w, n))
        if "refresh" in a.only:
            n = 1000 // scale

            def refresh(who, keep_alive, rnd):
                if who == "pocketbase":
                    return [{"method": "POST", "path": "/api/collections/users/auth-refresh",
                             "headers": req.auth[who]}] * n
                return [{"method": "POST", "path": "/auth/v1/token?grant_type=refresh_token",
                         "headers": [["content-type", "application/json"]], "body": json.dumps({"refresh_token": t})}
                        for t in rowgate_sessions(servers[who], n)]
            bench.measure("auth refresh, c=100", n, 100, refresh)
        met = sum(1 for r in ctx.result["ratios"] if r["verdict"] == "met")
        ctx.result["checks"]["rows at or under 1/3 of PocketBase's time"] = f"{met} of {len(ctx.result['ratios'])}"
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
