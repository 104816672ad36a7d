"""The suite's charts of one result (schema.py), as SVG files.

`draw(result, directory, stem)` returns the paths of the charts it made: requests/s of every
case, one bar per server; the latency percentiles of every load; and, where a case is one step of
a sweep over connection counts, requests/s and p99 against connections, one line per server.
Returns [] when matplotlib cannot be imported (the suite installs it into bench/.venv).
"""

import os

from . import schema

COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d", "#bab0ac"]


def short(label, width=60):
    """A label cut to `width` from the left: labels of one scenario differ at their ends."""
    return label if len(label) <= width else "…" + label[-(width - 1):]


def _save(fig, plt, directory, name):
    path = os.path.join(directory, name)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _bars(ax, labels, series, xlabel):
    """Horizontal bars on a log scale: one group per label, one colour per series {name: values}."""
    height = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        ys = [y for y, v in enumerate(values) if v]
        ax.barh([y + i * height for y in ys], [values[y] for y in ys], height=height, label=name,
                color=COLOURS[i % len(COLOURS)])
    ax.set_yticks([y + height * (len(series) - 1) / 2 for y in range(len(labels))])
    ax.set_yticklabels([short(x) for x in labels], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def draw(result, directory, stem):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    os.makedirs(directory, exist_ok=True)
    name, date = result["scenario"], result["date"]
    measured = [(e, s, f) for e, s, f in schema.loads(result) if f.get("req_s")]
    if not measured:
        return []
    made = []
    cases = list(dict.fromkeys(e["case"] for e, _, _ in measured))
    servers = list(dict.fromkeys(s for _, s, _ in measured))
    rps = {s: [schema.req_s(result, c, s) for c in cases] for s in servers}
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(cases) * max(1, len(servers) * 0.6) + 1.6))
    _bars(ax, cases, rps, "requests/s (log scale)")
    ax.set_title(f"{name}: requests/s ({date})")
    made.append(_save(fig, plt, directory, f"{stem}-{name}-rps.svg"))

    lat = [(f"{e['case']} / {s}", f) for e, s, f in measured if f.get("p50_ms") is not None]
    marks = [(m, k) for m, k in (("p50", "p50_ms"), ("p95", "p95_ms"), ("p99", "p99_ms"), ("max", "max_ms"))
             if any(f.get(k) for _, f in lat)]
    if lat and marks:
        fig, ax = plt.subplots(figsize=(10, 0.28 * len(lat) * max(1, len(marks) * 0.5) + 1.6))
        _bars(ax, [x for x, _ in lat], {m: [f.get(k) for _, f in lat] for m, k in marks}, "latency, ms (log scale)")
        ax.set_title(f"{name}: latency distribution ({date})")
        made.append(_save(fig, plt, directory, f"{stem}-{name}-latency.svg"))

    sweep = {}
    for e, s, f in measured:
        if e.get("connections"):
            sweep.setdefault(s, []).append((e["connections"], f["req_s"], f.get("p99_ms")))
    sweep = {s: sorted(points) for s, points in sweep.items() if len(points) >= 3}
    if sweep:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        for s, points in sweep.items():
            a1.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=s)
            a2.plot([p[0] for p in points], [p[2] for p in points], marker="o", label=s)
        for a, y in ((a1, "requests/s"), (a2, "p99 latency, ms")):
            a.set_xscale("log")
            a.set_xlabel("connections")
            a.set_ylabel(y)
            a.grid(alpha=0.3)
        a2.set_yscale("log")
        a1.legend(fontsize=8)
        fig.suptitle(f"{name}: throughput and p99 against connections")
        made.append(_save(fig, plt, directory, f"{stem}-{name}-connections.svg"))
    return made
