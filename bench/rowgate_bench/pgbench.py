"""The database's own ceiling for a scenario's SQL: what PostgreSQL alone does on this machine.

`ceiling(cluster, label, script, ...)` writes the pgbench script into the cluster's directory,
runs `pgbench -n -c C -j 2 -M prepared -T SECONDS` with the cluster's own pgbench, and returns the
schema's ceiling entry: label, SQL, tps (without the initial connection time when pgbench gives
it), the command and, when pgbench failed, why.
"""

import os
import re
import subprocess

from . import procs


def ceiling(cluster, label, script, connections, duration, user="postgres", defines=()):
    """`defines` are pgbench variables ("name=value", its -D)."""
    name = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:40]
    path = os.path.join(cluster.dir, "pgbench", f"{name}.sql")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(script)
    argv = [cluster.program("pgbench"), "-n", "-c", str(connections), "-j", "2", "-M", "prepared", "-T",
            str(duration), "-h", "127.0.0.1", "-p", str(cluster.port), "-U", user]
    for d in defines:
        argv += ["-D", d]
    argv += ["-f", path, "postgres"]
    entry = {"label": label, "sql": script.strip(), "tps": None, "command": " ".join(argv), "error": None}
    procs.log(f"pgbench ceiling: {label}, {duration} s")
    try:
        r = procs.run(argv, timeout=duration + 120, check=False)
    except subprocess.TimeoutExpired:
        entry["error"] = "pgbench timed out"
        return entry
    entry["tps"] = tps(r.stdout)
    if r.returncode != 0 or entry["tps"] is None:
        entry["error"] = f"pgbench exit {r.returncode}: {r.stderr.strip()[-400:]}"
    else:
        procs.log(f"  {entry['tps']:,.0f} tps")
    return entry


def tps(output):
    """pgbench's tps, preferring the figure without the initial connection time."""
    found = None
    for line in output.splitlines():
        if line.startswith("tps =") and (found is None or "without initial connection" in line):
            found = float(line.split()[2])
    return found
