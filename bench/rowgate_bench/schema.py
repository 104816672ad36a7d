"""The one result shape every scenario writes and bench/suite reads.

A result is a JSON object, built as a plain dict by the helpers below:

  schema       "rowgate-bench/1"
  scenario     the suite's name for it (s000, s000-jwt, s000-sweep, s001, s002, cache, s003-static, s003-image,
               s003-customers, s004; the tools write-cost and s004-cache)
  title        one line: what was measured
  about        a paragraph: how (durations, connections, pools, data), shown above the tables
  date         YYYY-MM-DD the run started; started, finished: ISO times
  command      the command line that produced it
  commit       the repository's HEAD; dirty: whether tracked files differed from it
  machine      cores, cpu, memory_gib, kernel, loadavg_at_start
  versions     {tool: version}: rowgate, rowgate_bin, postgresql, oha, postgrest, pocketbase, ...
  config       the runner's options that shape the figures (duration, connections, pools, ...)
  partial      true when the run was interrupted or failed part-way
  notes        [text]
  cases        [{"case": name, "connections": N, "servers": {server: LOAD}}] in the order measured;
               "connections" only where the case is one step of a sweep over connection counts
  ceilings     [{"label", "sql", "tps", "command", "error"}]: pgbench with the scenario's SQL
  ratios       [{"what", "value", "target", "verdict"}], each measured within this run: value as
               shown ("6.9×", "84 %"), verdict "met", "NOT met" or "" when there is no target
  checks       {what: value}: answers compared, stale reads, tokens refused, ...
  not_run      [{"peer", "reason"}]: peers that were not measured, and why
  published    the published figures to compare with, with their hardware (Markdown)

LOAD, one server under one case's load (figures it does not have are absent or null):
  req_s, mib_s, p50_ms, p95_ms, p99_ms, max_ms      from the load generator
  requests     answers received
  failed       transport errors plus answers with another status than the case expects
  statuses     {status: count}; errors: {message: count}
  completed_s  wall time to complete a fixed list of requests (examples/loadgen)
  server_cpu_s, db_cpu_s, loadgen_cpu_s, other_cpu_s    CPU seconds spent during the load
  peak_rss_mb  the server's peak resident memory
  rounds       [{"req_s", "completed_s"}]: every round, when this load is the median of several
  extra        {name: value}: figures only this scenario has (hit ratio, look-ups, write share)
  command      the load generator's command line
  error        why the load did not run or did not finish
"""

import datetime
import json
import os

VERSION = "rowgate-bench/1"
TOP = ("schema", "scenario", "title", "about", "date", "started", "finished", "command", "commit", "dirty",
       "machine", "versions", "config", "partial", "notes", "cases", "ceilings", "ratios", "checks", "not_run",
       "published")
LOAD = ("req_s", "mib_s", "p50_ms", "p95_ms", "p99_ms", "max_ms", "requests", "failed", "statuses", "errors",
        "completed_s", "server_cpu_s", "db_cpu_s", "loadgen_cpu_s", "other_cpu_s", "peak_rss_mb", "rounds",
        "extra", "command", "error")


def new(scenario, title, command):
    now = datetime.datetime.now()
    return {"schema": VERSION, "scenario": scenario, "title": title, "about": "",
            "date": now.strftime("%Y-%m-%d"), "started": now.isoformat(timespec="seconds"), "finished": None,
            "command": command, "commit": None, "dirty": None, "machine": {}, "versions": {}, "config": {},
            "partial": False, "notes": [], "cases": [], "ceilings": [], "ratios": [], "checks": {},
            "not_run": [], "published": ""}


def load(**figures):
    """A LOAD from keyword figures; an unknown name is a bug in the caller."""
    unknown = set(figures) - set(LOAD)
    if unknown:
        raise ValueError(f"not in the schema's LOAD: {', '.join(sorted(unknown))}")
    return figures


def add(result, case, server, figures, connections=None):
    """Puts one server's LOAD under `case` (made on first use); returns the LOAD."""
    entry = next((c for c in result["cases"] if c["case"] == case), None)
    if entry is None:
        entry = {"case": case, "servers": {}}
        if connections is not None:
            entry["connections"] = connections
        result["cases"].append(entry)
    entry["servers"][server] = figures
    return figures


def get(result, case, server):
    """The LOAD of server under case, or {}."""
    entry = next((c for c in result["cases"] if c["case"] == case), {})
    return entry.get("servers", {}).get(server) or {}


def req_s(result, case, server):
    return get(result, case, server).get("req_s")


def not_run(result, peer, reason):
    result["not_run"].append({"peer": peer, "reason": reason})


def ratio(result, what, value, target="", verdict=""):
    result["ratios"].append({"what": what, "value": value, "target": target, "verdict": verdict})


def compare(result, what, a, b, target=None, pct=False, at_most=False):
    """Adds the ratio a / b (when both are known) with a verdict against target: met when the
    ratio is at least target, or at most with at_most. Shown as "1.9×", or "84 %" with pct."""
    if not a or not b:
        return None
    v = a / b
    shown = f"{100 * v:.1f} %" if pct else f"{v:.2f}×"
    if target is None:
        ratio(result, what, shown)
        return v
    goal = f"{100 * target:g} %" if pct else f"{target:.2g}×"
    met = v <= target if at_most else v >= target
    ratio(result, what, shown, f"{'≤' if at_most else '≥'} {goal}", "met" if met else "NOT met")
    return v


def median_round(rounds, by="req_s"):
    """One LOAD for a case run in several rounds: the median round (for an even count the better
    of the middle two), with every round's figures in `rounds` and the failures, statuses and
    errors of all rounds summed."""
    done = [r for r in rounds if r.get(by) is not None]
    if not done:
        return rounds[0]
    # Worst first: lowest req/s, or longest completion time.
    done.sort(key=lambda r: r[by], reverse=(by == "completed_s"))
    chosen = dict(done[len(done) // 2])
    chosen["rounds"] = [{k: r.get(k) for k in ("req_s", "completed_s") if r.get(k) is not None} for r in rounds]
    chosen["failed"] = sum(r.get("failed") or 0 for r in rounds)
    for key in ("statuses", "errors"):
        merged = {}
        for r in rounds:
            for k, v in (r.get(key) or {}).items():
                merged[k] = merged.get(k, 0) + v
        chosen[key] = merged
    return chosen


def loads(result):
    """Every (case entry, server, LOAD) of a result, in order."""
    for entry in result["cases"]:
        for server, figures in entry["servers"].items():
            yield entry, server, figures


def validate(result):
    """What is wrong with a result's shape: [] when nothing."""
    problems = [f"missing {k}" for k in TOP if k not in result]
    if result.get("schema") != VERSION:
        problems.append(f"schema is {result.get('schema')!r}, not {VERSION!r}")
    for entry in result.get("cases", []):
        if not isinstance(entry.get("case"), str) or not isinstance(entry.get("servers"), dict):
            problems.append(f"case without a name or servers: {entry!r:.80}")
            continue
        for server, figures in entry["servers"].items():
            extra = set(figures) - set(LOAD)
            if extra:
                problems.append(f"{entry['case']} / {server}: not in LOAD: {', '.join(sorted(extra))}")
            if "error" not in figures and figures.get("req_s") is None and figures.get("completed_s") is None:
                problems.append(f"{entry['case']} / {server}: neither figures nor an error")
    for r in result.get("ratios", []):
        if set(r) != {"what", "value", "target", "verdict"}:
            problems.append(f"ratio of another shape: {r!r:.80}")
    return problems


def write(result, path):
    """Writes <path>.json and <path>.md (the report); returns the Markdown."""
    from . import report  # report reads this module's helpers

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".json", "w") as f:
        json.dump(result, f, indent=1, default=str)
    md = report.render(result)
    with open(path + ".md", "w") as f:
        f.write(md)
    return md


def read(path):
    """The result in a file, or None when it is not JSON of this schema (an older runner's
    result file, a suite report)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == VERSION else None
