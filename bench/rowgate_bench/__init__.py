"""rowgate's benchmark tooling: one runner per scenario of bench/WORKLOADS.md and the suite that
runs them and reports on them. Python 3.11 standard library only (matplotlib, optional, for the
suite's charts).

Code map (bench/README.md has the longer version):
  runner      the life of one scenario run: options, binaries, signals, the result file
  schema      the one result shape every scenario writes and the suite reads
  report      a result as Markdown (each runner's report and the suite's sections)
  suite       every scenario in turn, then one report; charts in charts
  procs       processes started, and stopping them whatever happens
  cluster     the throwaway PostgreSQL cluster, from `rowgate cluster start|stop`
  servers     a server under test (start, ready, CPU, RSS, stop) and HTTP helpers
  peers       PostgREST (npm) and PocketBase (PyPI)
  loadgen     oha and examples/loadgen, their output as the schema's load figures
  sampling    CPU seconds and peak RSS from /proc
  pgbench     the database's own ceiling for a scenario's SQL
  machine     the machine, the commit and tool versions
  progress    progress bars for data generation
  scenarios/  one short module per scenario: its data, requests, cases and published figures

This module holds the paths everything shares.
"""

import os

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(BENCH)
# Clusters, data sets, logs and downloaded peers: kept between runs, ignored by git.
DATA = os.path.join(BENCH, ".data")
PEERS = os.path.join(BENCH, ".peers")


def results_dir():
    """Where a runner writes its result: bench/results, or where bench/suite points it (its --out,
    quick runs) through ROWGATE_BENCH_RESULTS."""
    return os.environ.get("ROWGATE_BENCH_RESULTS") or os.path.join(BENCH, "results")
