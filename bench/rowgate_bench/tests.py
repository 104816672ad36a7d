"""Unit tests of the pure parts: the result schema, the reports, result discovery, and the parsing
of oha's and pgbench's output. No process is started.

  cd bench && python3 -m unittest rowgate_bench.tests
"""

import argparse
import json
import os
import tempfile
import time
import unittest

from . import loadgen, pgbench, report, schema, suite
from .runner import comma_list


def result_with_loads():
    r = schema.new("s002", "s002 test", "bench/s002/run --quick")
    schema.add(r, "c100", "rowgate", schema.load(req_s=10_000.0, p50_ms=1.0, p99_ms=5.0, failed=0), connections=100)
    schema.add(r, "c100", "postgrest", schema.load(req_s=2_000.0, p50_ms=10.0, p99_ms=50.0, failed=0))
    schema.add(r, "insert", "postgrest", schema.load(error="postgrest did not start"))
    return r


class Schema(unittest.TestCase):
    def test_a_built_result_is_valid(self):
        r = result_with_loads()
        self.assertEqual(schema.validate(r), [])
        self.assertEqual([c["case"] for c in r["cases"]], ["c100", "insert"])
        self.assertEqual(r["cases"][0]["connections"], 100)
        self.assertEqual(schema.req_s(r, "c100", "postgrest"), 2_000.0)
        self.assertEqual(schema.get(r, "c1", "rowgate"), {})

    def test_unknown_figures_are_refused(self):
        with self.assertRaises(ValueError):
            schema.load(rps=1.0)

    def test_validate_names_what_is_wrong(self):
        r = result_with_loads()
        r["cases"][0]["servers"]["rowgate"] = {"p50_ms": 1.0}
        r["ratios"].append({"what": "x"})
        del r["published"]
        problems = schema.validate(r)
        self.assertIn("missing published", problems)
        self.assertTrue(any("neither figures nor an error" in p for p in problems))
        self.assertTrue(any("ratio of another shape" in p for p in problems))
        self.assertTrue(schema.validate({"schema": "other"}))

    def test_compare_gives_value_target_and_verdict(self):
        r = schema.new("x", "x", "x")
        schema.compare(r, "a / b", 10.0, 2.0, 5)
        schema.compare(r, "share", 1.0, 2.0, 0.8, pct=True)
        schema.compare(r, "time", 1.0, 4.0, 1 / 3, at_most=True)
        schema.compare(r, "no target", 3.0, 2.0)
        self.assertIsNone(schema.compare(r, "missing", None, 2.0, 5))
        self.assertEqual([(x["value"], x["target"], x["verdict"]) for x in r["ratios"]],
                         [("5.00×", "≥ 5×", "met"), ("50.0 %", "≥ 80 %", "NOT met"), ("0.25×", "≤ 0.33×", "met"),
                          ("1.50×", "", "")])

    def test_median_round_keeps_every_round_and_sums_failures(self):
        rounds = [schema.load(req_s=v, failed=f, statuses={"200": 10}) for v, f in ((3.0, 0), (1.0, 2), (2.0, 1))]
        m = schema.median_round(rounds)
        self.assertEqual(m["req_s"], 2.0)
        self.assertEqual(m["failed"], 3)
        self.assertEqual(m["statuses"], {"200": 30})
        self.assertEqual([x["req_s"] for x in m["rounds"]], [3.0, 1.0, 2.0])
        # An even count takes the better middle one: the higher req/s, the shorter time.
        self.assertEqual(schema.median_round(rounds[:2])["req_s"], 3.0)
        timed = [schema.load(completed_s=t, req_s=100 / t) for t in (2.0, 1.0)]
        self.assertEqual(schema.median_round(timed, by="completed_s")["completed_s"], 1.0)

    def test_write_then_read_and_older_shapes_are_skipped(self):
        with tempfile.TemporaryDirectory() as d:
            md = schema.write(result_with_loads(), os.path.join(d, "2026-01-01-s002"))
            self.assertIn("| c100 | rowgate | 10,000 |", md)
            self.assertEqual(schema.read(os.path.join(d, "2026-01-01-s002.json"))["scenario"], "s002")
            with open(os.path.join(d, "old.json"), "w") as f:
                json.dump({"scenario": "s002-master-detail", "servers": {}}, f)
            self.assertIsNone(schema.read(os.path.join(d, "old.json")))


class Report(unittest.TestCase):
    def test_render_has_every_part(self):
        r = result_with_loads()
        schema.compare(r, "c100: rowgate / PostgREST", 10_000.0, 2_000.0, 5)
        schema.not_run(r, "pocketbase", "left out with --peers")
        r["ceilings"].append({"label": "two SELECTs", "sql": "SELECT 1", "tps": 20_000.0, "command": "", "error": None})
        r["checks"]["answers equal across servers"] = True
        r["published"] = "5,354–6,978 req/s"
        md = report.render(r)
        for part in ("# s002 test", "| c100: rowgate / PostgREST | **5.00×** | ≥ 5× | met |",
                     "| insert | postgrest | not run: postgrest did not start |", "| two SELECTs | 20,000 |",
                     "**Not in this run: pocketbase** — left out with --peers", "- answers equal across servers: true",
                     "Published (bench/WORKLOADS.md): 5,354–6,978 req/s"):
            self.assertIn(part, md)

    def test_rounds_and_extra_figures_are_shown(self):
        r = schema.new("x", "x", "x")
        figures = schema.median_round([schema.load(req_s=v) for v in (1000.0, 3000.0, 2000.0)])
        figures["extra"] = {"hit ratio": 0.9861, "checker errors": [], "look-ups": 3}
        schema.add(r, "c", "rowgate", figures)
        row = report.loads_table(r)[2]
        self.assertIn("2,000 (rounds 1,000 / 3,000 / 2,000)", row)
        self.assertIn("hit ratio 0.986; look-ups 3", row)
        self.assertNotIn("checker errors", row)


class Discovery(unittest.TestCase):
    def test_latest_complete_result_of_the_scenario(self):
        with tempfile.TemporaryDirectory() as d:
            def put(stem, scenario, started, partial=False):
                r = schema.new(scenario, "t", "c")
                r.update(started=started, partial=partial)
                schema.write(r, os.path.join(d, stem))

            put("2026-01-01-s000", "s000", "2026-01-01T10:00:00")
            put("2026-01-02-s000", "s000", "2026-01-02T10:00:00")
            put("2026-01-03-s000-partial", "s000", "2026-01-03T10:00:00", partial=True)
            put("2026-01-04-s000-jwt", "s000-jwt", "2026-01-04T10:00:00")
            path, r = suite.latest_result(d, "s000")
            self.assertTrue(path.endswith("2026-01-02-s000.json"))
            path, r = suite.latest_result(d, "s000", complete=False)
            self.assertTrue(r["partial"])
            self.assertEqual(suite.latest_result(d, "s001"), (None, None))
            self.assertEqual(suite.latest_result(d, "s000", since=time.time() + 60), (None, None))


class Parsing(unittest.TestCase):
    def test_oha_deadline_aborts_are_not_failures(self):
        raw = {"summary": {"requestsPerSec": 100.0, "sizePerSec": 2**20, "slowest": 0.5},
               "latencyPercentiles": {"p50": 0.001, "p99": 0.01},
               "statusCodeDistribution": {"200": 90, "500": 2},
               "errorDistribution": {"aborted due to deadline": 5, "connection reset": 1}}
        figures = loadgen.summarize(raw)
        self.assertEqual((figures["failed"], figures["requests"], figures["mib_s"]), (3, 92, 1.0))
        self.assertEqual((figures["p50_ms"], figures["max_ms"]), (1.0, 500.0))
        self.assertEqual(loadgen.summarize(raw, ok=("200", "500"))["failed"], 1)

    def test_pgbench_tps_without_connection_time(self):
        out = "tps = 900.5 (including connections establishing)\ntps = 1000.25 (without initial connection time)\n"
        self.assertEqual(pgbench.tps(out), 1000.25)
        self.assertEqual(pgbench.tps("tps = 12.0 (without initial connection time)\n"), 12.0)
        self.assertIsNone(pgbench.tps("error"))

    def test_comma_lists(self):
        self.assertEqual(comma_list()("10, 50"), [10, 50])
        self.assertEqual(comma_list({"a", "b"})("b,a"), ["b", "a"])
        for bad, allowed in (("10,x", None), ("a,c", {"a"})):
            with self.assertRaises(argparse.ArgumentTypeError):
                comma_list(allowed)(bad)


if __name__ == "__main__":
    unittest.main()
