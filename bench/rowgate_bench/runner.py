"""The life of one scenario run, the same for every scenario.

`main(module)` is what bench/<scenario>/run calls. It parses the scenario's options plus the
common ones (--no-build, --rowgate-bin), starts rowgate's release build in the background (and
oha's install on a fresh machine), hands a `Context` to `module.run(ctx)`, stops everything the
run started — also on an error, Ctrl-C or SIGTERM — and writes the result (schema.py) with its
Markdown report to bench/results/ (or where ROWGATE_BENCH_RESULTS points), as
<date>-<name>[-partial].{json,md}. It returns the exit status: 0, 1 after an error (or, where the
scenario asks for it, a failed request), 130 when interrupted.

A scenario module defines NAME, TITLE and PUBLISHED, `arguments(ap)` and `run(ctx)`, and may
define DATA (its directory under bench/.data, default NAME), USES_OHA (default True),
USES_LOADGEN, USES_CEILING_EXAMPLE (examples/transform_ceiling), FAIL_ON_FAILED,
`result_name(args)` and `result_stem(args)`.

Binaries: --rowgate-bin PATH, else $ROWGATE_BENCH_BIN_DIR/rowgate, else target/release/rowgate
(built first unless --no-build). examples/loadgen likewise: --loadgen-bin, else
$ROWGATE_BENCH_BIN_DIR/loadgen, else beside the rowgate binary, else
target/release/examples/loadgen; examples/transform_ceiling is looked for beside loadgen.
"""

import argparse
import datetime
import os
import shlex
import subprocess
import sys
import traceback

from . import DATA, REPO, machine, peers, procs, results_dir, schema
from .cluster import Cluster
from .loadgen import OhaInstall
from .sampling import measure
from .servers import Server


class Binaries:
    """rowgate's binaries, built in the background when asked."""

    def __init__(self, args, examples):
        bin_dir = os.environ.get("ROWGATE_BENCH_BIN_DIR")
        release = os.path.join(REPO, "target", "release")
        if args.rowgate_bin:
            self.rowgate = os.path.abspath(args.rowgate_bin)
        elif bin_dir:
            self.rowgate = os.path.join(bin_dir, "rowgate")
        else:
            self.rowgate = os.path.join(release, "rowgate")
        near = os.path.dirname(self.rowgate)
        candidates = [getattr(args, "loadgen_bin", None), bin_dir and os.path.join(bin_dir, "loadgen"),
                      os.path.join(near, "examples", "loadgen"), os.path.join(near, "loadgen"),
                      os.path.join(release, "examples", "loadgen")]
        self.loadgen = next((os.path.abspath(c) for c in candidates if c and os.path.exists(c)), candidates[-1])
        self.transform_ceiling = os.path.join(os.path.dirname(self.loadgen), "transform_ceiling")
        # Other examples a scenario names (EXAMPLES) are looked for beside loadgen.
        self.example_dir = os.path.dirname(self.loadgen)
        self.build = None
        if not (args.no_build or args.rowgate_bin or bin_dir):
            argv = ["cargo", "build", "--release", "--locked", "--bin", "rowgate"]
            for example in examples:
                argv += ["--example", example]
            self.log = os.path.join(DATA, "rowgate-build.log")
            os.makedirs(DATA, exist_ok=True)
            procs.log(f"{' '.join(argv)} (in the background, log {self.log})")
            self.build = procs.start(argv, self.log, cwd=REPO)

    def wait(self):
        if self.build is not None:
            procs.log("waiting for the release build")
            code = self.build.wait(timeout=3600)
            procs.stop(self.build)
            self.build = None
            if code != 0:
                with open(self.log, errors="replace") as f:
                    raise RuntimeError(f"cargo build failed (exit {code}):\n{''.join(f.readlines()[-15:])}")
        if not os.path.exists(self.rowgate):
            raise RuntimeError(f"{self.rowgate} missing: build it, or point --rowgate-bin at a binary")


class Context:
    """What a scenario's run() is given: its options, its result, its directories, and the
    binaries, load generator, cluster, servers and peers it asks for."""

    def __init__(self, module, args, result):
        self.module, self.args, self.result = module, args, result
        self.data = os.path.join(DATA, getattr(module, "DATA", module.NAME))
        self.logs = os.path.join(self.data, "logs")
        os.makedirs(self.logs, exist_ok=True)
        examples = (["loadgen"] if getattr(module, "USES_LOADGEN", False) else []) + (
            ["transform_ceiling"] if getattr(module, "USES_CEILING_EXAMPLE", False) else []) + list(
            getattr(module, "EXAMPLES", []))
        self.bins = Binaries(args, examples)
        self._oha_install = OhaInstall() if getattr(module, "USES_OHA", True) else None
        self._oha = None
        self._postgrest = None
        self.log = procs.log

    @property
    def rowgate(self):
        self.bins.wait()
        v = self.result["versions"]
        if "rowgate" not in v:
            v["rowgate"] = machine.tool_version([self.bins.rowgate, "--version"])
            v["rowgate_bin"] = self.bins.rowgate
        return self.bins.rowgate

    @property
    def loadgen(self):
        self.bins.wait()
        if not os.path.exists(self.bins.loadgen):
            raise RuntimeError(f"{self.bins.loadgen} missing: build examples/loadgen, or pass --loadgen-bin")
        return self.bins.loadgen

    @property
    def transform_ceiling(self):
        self.bins.wait()
        if not os.path.exists(self.bins.transform_ceiling):
            raise RuntimeError(f"{self.bins.transform_ceiling} missing: build examples/transform_ceiling")
        return self.bins.transform_ceiling

    @property
    def oha(self):
        if self._oha is None:
            self._oha = self._oha_install.wait()
            self.result["versions"]["oha"] = self._oha.version
        return self._oha

    def cluster(self, name=None, settings=()):
        """The scenario's PostgreSQL cluster (bench/.data/<name>), started; stopped at the end."""
        c = Cluster.start(self.rowgate, os.path.join(DATA, name or getattr(self.module, "DATA", self.module.NAME)),
                          settings)
        self.result["versions"]["postgresql"] = c.version()
        return c

    def server(self, name, argv, port, **kw):
        return Server(name, argv, port, self.logs, **kw)

    def postgrest(self):
        """PostgREST's binary, or None with the reason recorded (the run goes on without it)."""
        if self._postgrest is None:
            try:
                self._postgrest = peers.postgrest_binary()
                self.result["versions"]["postgrest"] = machine.tool_version([self._postgrest, "--version"])
            except Exception as e:  # noqa: BLE001 - any failure to install is reported, not fatal
                self._postgrest = False
                schema.not_run(self.result, "postgrest", f"PostgREST {peers.POSTGREST_VERSION} could not be "
                                                         f"installed: {e}")
                self.log(f"PostgREST not in this run: {e}")
        return self._postgrest or None

    def measure(self, load_fn, server=None, cluster=None):
        """load_fn()'s figures with the CPU of the server, PostgreSQL and the load generator."""
        return measure(load_fn, server.pid if server else None, cluster.pid if cluster else None)

    def load(self, server, url, connections, duration=None, cluster=None, warmup=0, ok=("200",), redact=(),
             label="", **oha_options):
        """One oha load of url on server (after `warmup` seconds of the same load): a LOAD with
        the CPU and RSS figures, and an error when the server died meanwhile or oha failed (the
        run goes on with the next load)."""
        argv = self.oha.argv(url, connections, duration=duration, **oha_options)
        try:
            if warmup:
                self.oha.warm(url, warmup, connections, **oha_options)
            figures = self.measure(lambda: self.oha.run(argv, ok, redact), server, cluster)
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
            self.log(f"{server.name} {label or url}: {e}")
            return schema.load(error=f"{type(e).__name__}: {e}", command=" ".join(argv))
        if not server.alive():
            figures["error"] = f"{server.name} exited during the load: {server.log_tail()}"
        self.log(f"{server.name} {label or url}: {figures['req_s']:,.0f} req/s, p99 {figures['p99_ms'] or 0:.1f} ms, "
                 f"statuses {figures['statuses']}, failed {figures['failed']}")
        return figures


def comma_list(allowed=None):
    """An argparse type: a comma list of numbers, or of names from `allowed`."""
    def parse(text):
        items = [x.strip() for x in text.split(",") if x.strip()]
        if allowed is not None and set(items) <= allowed:
            return items
        if allowed is None and all(x.isdigit() for x in items):
            return [int(x) for x in items]
        raise argparse.ArgumentTypeError(f"{text!r}: a comma list of {sorted(allowed) if allowed else 'numbers'}")
    return parse


def main(module, argv=None):
    ap = argparse.ArgumentParser(description=module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    module.arguments(ap)
    ap.add_argument("--no-build", action="store_true", help="use target/release/rowgate as it is")
    ap.add_argument("--rowgate-bin", help="this rowgate binary instead of target/release/rowgate (implies --no-build)")
    if getattr(module, "USES_LOADGEN", False):
        ap.add_argument("--loadgen-bin", help="this examples/loadgen binary")
    args = ap.parse_args(argv)
    name = module.result_name(args) if hasattr(module, "result_name") else module.NAME
    procs.set_label(name)
    shown = os.path.relpath(os.path.abspath(sys.argv[0]), REPO)
    result = schema.new(name, module.TITLE, shlex.join([shown] + sys.argv[1:]))
    result["published"] = module.PUBLISHED
    result["commit"], result["dirty"] = machine.commit()
    result["machine"] = machine.describe()
    procs.handle_signals()
    status = 0
    try:
        module.run(Context(module, args, result))
    except KeyboardInterrupt as e:
        procs.log(f"interrupted ({e}); stopping everything")
        result["notes"].append(f"interrupted: {e}")
        result["partial"], status = True, 130
    except Exception as e:  # noqa: BLE001 - reported in the result, and by the exit status
        traceback.print_exc()
        result["notes"].append(f"failed: {type(e).__name__}: {e}")
        result["partial"], status = True, 1
    finally:
        procs.cleanup()
    result["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    for problem in schema.validate(result):
        result["notes"].append(f"result shape: {problem}")
        procs.log(f"warning: result shape: {problem}")
    stem = module.result_stem(args) if hasattr(module, "result_stem") else name
    # s004's --out names the file itself.
    path = getattr(args, "out", None) or os.path.join(results_dir(), f"{result['date']}-{stem}")
    path += "-partial" if result["partial"] else ""
    md = schema.write(result, path)
    procs.log(f"wrote {path}.{{json,md}}")
    print(md)
    if status == 0 and getattr(module, "FAIL_ON_FAILED", False):
        bad = [f"{e['case']} / {s}: {f.get('statuses')} {f.get('errors')}"
               for e, s, f in schema.loads(result) if f.get("failed") or f.get("error")]
        if bad:
            print("requests that failed: " + "; ".join(bad), file=sys.stderr)
            status = 1
    return status
