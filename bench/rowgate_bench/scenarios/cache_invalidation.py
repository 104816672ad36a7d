"""s002-invalidation, part of the cache runner (cache.py): reads under writes, and stale reads.

`mixes(ctx, server, pg, mode, read_rate)` runs, for 1 % and 10 % writes, the master-detail reads
at 100 connections while `oha -c 128 -q RATE` sends `PATCH /dept?deptno=eq.<random>` beside them
and a checker thread writes markers and reads them back: through rowgate (the read right after an
acknowledged write must show it) and every fifth time through psql (rowgate must show it a second
after the commit). The write rate starts at the share of the plain read rate; the writes slow the
reads down, so the mix runs again (at most three runs) nearer the share of the reads it achieved.
Each mix is the schema's LOAD of its reads, with the writes, hit ratio and stale reads in extra.
"""

import json
import os
import random
import threading
import time
from http.client import HTTPConnection

from .. import procs, schema
from ..loadgen import summarize
from ..servers import metrics
from . import s002

WRITE_PATH = r"/dept\?deptno=eq[.]10[0-9]{5}"
WRITE_BODY = '{"dname":"Dname - written"}'


def hit_ratio(before, after):
    hits = after.get("rowgate_cache_hits_total", 0) - before.get("rowgate_cache_hits_total", 0)
    misses = after.get("rowgate_cache_misses_total", 0) - before.get("rowgate_cache_misses_total", 0)
    return hits / (hits + misses) if hits + misses else None


class Checker(threading.Thread):
    """Writes a marker into a random dept's `loc` and reads the dept back: through rowgate (it
    must show at once) and through SQL (it must show within one second)."""

    def __init__(self, server, pg):
        super().__init__(daemon=True)
        self.host, self.pg, self.stop = f"127.0.0.1:{server.port}", pg, threading.Event()
        self.checks = self.stale = self.sql_checks = self.sql_stale = 0
        self.errors = []

    def read_loc(self, conn, dept):
        conn.request("GET", s002.PATH.format(dept))
        return json.loads(conn.getresponse().read())[0]["loc"]

    def random_dept(self):
        return s002.FIRST_DEPT + random.randrange(s002.DEPTS)

    def round(self, conn, n, pending_sql):
        dept = self.random_dept()
        self.read_loc(conn, dept)  # an answer in the cache to go stale
        marker = f"m{n}-{random.randrange(1 << 30)}"
        conn.request("PATCH", f"/dept?deptno=eq.{dept}", body=json.dumps({"loc": marker}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        if r.status != 204:
            self.errors.append(f"PATCH status {r.status}")
            return
        self.checks += 1
        self.stale += self.read_loc(conn, dept) != marker
        if n % 5 == 0:
            dept = self.random_dept()
            self.read_loc(conn, dept)
            marker = f"s{n}-{random.randrange(1 << 30)}"
            self.pg.psql(f"UPDATE dept SET loc = '{marker}' WHERE deptno = {dept}")
            pending_sql.append((time.time() + 1.0, dept, marker))
        while pending_sql and pending_sql[0][0] <= time.time():
            _, dept, marker = pending_sql.pop(0)
            self.sql_checks += 1
            self.sql_stale += self.read_loc(conn, dept) != marker

    def run(self):
        conn, n, pending_sql = HTTPConnection(self.host, timeout=30), 0, []
        while not self.stop.is_set():
            n += 1
            try:
                self.round(conn, n, pending_sql)
            except Exception as e:  # noqa: BLE001 - counted, and the checker goes on
                self.errors.append(f"{type(e).__name__}: {e}")
                conn.close()
                conn = HTTPConnection(self.host, timeout=30)
                time.sleep(0.05)
            time.sleep(0.01)


def mix(ctx, server, pg, rate, pct, mode):
    """One run of reads with writes at `rate`/s beside them, and the checker."""
    d = ctx.args.duration
    writes = ctx.oha.argv(server.url(WRITE_PATH), 128, duration=d, rand=True, method="PATCH",
                          content_type="application/json", body=WRITE_BODY, rate=rate)
    out = os.path.join(ctx.logs, f"writes-{mode}-{pct}pct.json")
    checker, m0 = Checker(server, pg), metrics(server)
    writer = procs.start(writes, out, stderr=False)
    checker.start()
    try:
        reads = ctx.load(server, server.url(s002.RAND_PATH), 100, d, pg, rand=True, label=f"reads, {pct} % writes")
    finally:
        checker.stop.set()
        writer.wait(timeout=d + 120)
        procs.stop(writer)
        checker.join(timeout=60)
    with open(out) as f:
        w = summarize(json.load(f), ok=("204",)) if writer.returncode == 0 else {"req_s": 0, "statuses": {}}
    stale = checker.stale + checker.sql_stale
    reads["extra"] = {"writes/s": w["req_s"], "write share %": 100 * (w["req_s"] or 0) / (reads.get("req_s") or 1),
                      "writes asked/s": rate, "write statuses": w["statuses"],
                      "hit ratio": hit_ratio(m0, metrics(server)),
                      "stale reads": stale, "checks through rowgate": checker.checks,
                      "checks through SQL": checker.sql_checks, "checker errors": checker.errors[:5]}
    ctx.log(f"  writes {w['req_s'] or 0:,.0f}/s, {reads['extra']['write share %']:.1f} % of reads, "
            f"stale reads {stale}")
    return reads


def mixes(ctx, server, pg, mode, read_rate):
    for pct in (1, 10):
        rate = max(1, int(read_rate * pct / 100))
        for runs in range(1, 4):
            reads = mix(ctx, server, pg, rate, pct, mode)
            time.sleep(2)
            share, writes = reads["extra"]["write share %"], reads["extra"]["writes/s"] or 0
            if abs(share - pct) <= 0.2 * pct:
                break
            # Damped: the geometric mean of this rate and the share of these reads.
            rate = max(1, int((min(rate, writes * 1.1 + 1) * (reads.get("req_s") or 1) * pct / 100) ** 0.5))
        reads["extra"]["runs"] = runs
        schema.add(ctx.result, f"s002-invalidation, {pct} % writes", f"rowgate-{mode}", reads)


def ratios(result):
    """Cached reads / uncached reads at each write share, and the stale reads of every mix."""
    for pct in (1, 10):
        case = f"s002-invalidation, {pct} % writes"
        cached, uncached = schema.get(result, case, "rowgate-cached"), schema.get(result, case, "rowgate-uncached")
        if cached.get("extra") and uncached.get("extra"):
            cs, us = cached["extra"]["write share %"], uncached["extra"]["write share %"]
            before = len(result["ratios"])
            schema.compare(result, f"{case}: cached reads / uncached reads (writes at {cs:.1f} % / {us:.1f} % of "
                                   "reads)", cached.get("req_s"), uncached.get("req_s"), 3 if pct == 10 else None)
            # The ratio means something only if both mixes carried (about) the asked write share.
            if len(result["ratios"]) > before and result["ratios"][-1]["verdict"] == "met" and min(cs, us) < 0.9 * pct:
                result["ratios"][-1]["verdict"] = f"NOT met (a mix fell short of {pct} % writes)"
        for mode, m in (("cached", cached), ("uncached", uncached)):
            if m.get("extra"):
                e = m["extra"]
                schema.ratio(result, f"{case}, {mode}: stale reads ({e['checks through rowgate']} rowgate + "
                                     f"{e['checks through SQL']} SQL checks)", str(e["stale reads"]), "0",
                             "met" if e["stale reads"] == 0 else "NOT met")
