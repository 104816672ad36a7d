"""A result (schema.py) as Markdown.

`render(result)` is a runner's own report: title, how it was measured, the ratios against their
targets, every load, the pgbench ceilings, the checks, the peers not in the run and the published
figures. The suite builds its sections from the same pieces (`loads_table`, `ceilings_table`,
`not_run_lines`, ...), so that one result reads the same everywhere.
"""

import json

from . import schema


def fmt(v, digits=0):
    """A figure for a table: thousands separated, `digits` decimals; empty when unknown."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def cell(text):
    return str(text).replace("|", "/").replace("\n", " ")


def _extra(figures):
    out = []
    for k, v in (figures.get("extra") or {}).items():
        if v is None or v == [] or v == {}:
            continue
        if isinstance(v, float):
            v = f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"
        out.append(f"{k} {v}")
    return "; ".join(out)


def _rounds(figures, key):
    values = [r.get(key) for r in figures.get("rounds") or [] if r.get(key) is not None]
    if len(values) < 2:
        return ""
    digits = 3 if key == "completed_s" else 0
    return " (rounds " + " / ".join(fmt(float(v), digits) for v in values) + ")"


def loads_table(result):
    """Every load of a result, one row per case and server."""
    rows = list(schema.loads(result))
    if not rows:
        return ["(No loads measured.)", ""]
    timed = any(f.get("completed_s") is not None for _, _, f in rows)
    other = any(f.get("extra") for _, _, f in rows)
    head = ["case", "server"] + (["completed s"] if timed else []) + [
        "req/s", "MiB/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "failed", "server CPU s", "DB CPU s",
        "load gen CPU s", "RSS MB"] + (["other"] if other else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for entry, server, f in rows:
        first = [cell(entry["case"]), cell(server)]
        if "error" in f and f.get("req_s") is None and f.get("completed_s") is None:
            lines.append("| " + " | ".join(first + [f"not run: {cell(f['error'])}"] + [""] * (len(head) - 3)) + " |")
            continue
        timed_cell = [fmt(f.get("completed_s"), 3) + _rounds(f, "completed_s")] if timed else []
        req = fmt(f.get("req_s")) + ("" if timed else _rounds(f, "req_s"))
        row = first + timed_cell + [
            req, fmt(f.get("mib_s"), 1), fmt(f.get("p50_ms"), 2), fmt(f.get("p95_ms"), 2), fmt(f.get("p99_ms"), 2),
            fmt(f.get("max_ms"), 1), fmt(f.get("failed")), fmt(f.get("server_cpu_s"), 1), fmt(f.get("db_cpu_s"), 1),
            fmt(f.get("loadgen_cpu_s"), 1), fmt(f.get("peak_rss_mb"))] + ([cell(_extra(f))] if other else [])
        if f.get("error"):
            row[-1] = (row[-1] + "; " if other else "") + f"error: {cell(f['error'])}"
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def ratios_table(result):
    if not result["ratios"]:
        return []
    lines = ["| ratio (same run) | value | target | |", "|---|---|---|---|"]
    lines += [f"| {cell(r['what'])} | **{r['value']}** | {r['target']} | {r['verdict']} |" for r in result["ratios"]]
    return lines + [""]


def ceilings_table(result):
    if not result["ceilings"]:
        return []
    lines = ["| pgbench ceiling (same SQL, same data) | tps |", "|---|---|"]
    for c in result["ceilings"]:
        tps = fmt(c.get("tps")) if c.get("tps") else f"failed: {cell(c.get('error') or '?')}"
        lines.append(f"| {cell(c['label'])} | {tps} |")
    return lines + [""]


def not_run_lines(result):
    return [f"**Not in this run: {p['peer']}** — {p['reason']}\n" for p in result["not_run"]]


def checks_lines(result):
    if not result["checks"]:
        return []
    lines = ["Checks:", ""]
    for what, v in result["checks"].items():
        lines.append(f"- {what}: {v if isinstance(v, str) else json.dumps(v, default=str)}")
    return lines + [""]


def context_line(result):
    """The command, commit, versions and machine in one paragraph."""
    m, v = result["machine"], result["versions"]
    # Most tools name themselves in their version line ("PostgREST 12.0.2"); PostgreSQL does not.
    tools = ", ".join(val if str(val).lower().startswith(k.lower()) else f"{k} {val}"
                      for k, val in v.items() if k != "rowgate_bin")
    commit = (result.get("commit") or "?")[:10] + (" (work tree dirty)" if result.get("dirty") else "")
    return (f"`{result['command']}` at commit {commit}; {tools}; {m.get('cores')} cores ({m.get('cpu')}), "
            f"{m.get('memory_gib')} GiB, Linux {m.get('kernel')}; load generator, servers and PostgreSQL on the "
            "same cores, one load at a time.")


def render(result):
    partial = " (partial)" if result["partial"] else ""
    lines = [f"# {result['title']} — {result['date']}{partial}", ""]
    if result["about"]:
        lines += [result["about"], ""]
    lines += [context_line(result), ""]
    lines += ratios_table(result) + loads_table(result) + ceilings_table(result) + checks_lines(result)
    lines += not_run_lines(result)
    if result["published"]:
        lines += [f"Published (bench/WORKLOADS.md): {result['published']}", ""]
    lines += [f"- note: {n}" for n in result["notes"]]
    return "\n".join(lines).rstrip() + "\n"
