"""s003-image (bench/WORKLOADS.md): seed 003's heavy test, an image service. A logo-sized PNG
(1,000 × 1,000 RGBA, drawn here) is resized on every request, 16 connections, rowgate on its
SQLite default with storage on. In one run, one load at a time:

  uncached     rowgate's /storage/v1/render/image/public/... at a new width × height per request
               (--images requests, each once, through examples/loadgen), and PocketBase 0.40.6
               generating the same number of thumbnails (one record per image, each thumb asked
               for once: PocketBase makes a thumb on its first request)
  cached       the same transform asked again and again (rowgate's transform cache, PocketBase's
               thumbnail on disk), beside the static ceiling (`rowgate ceiling` answering the
               rendered bytes)
  compute      examples/transform_ceiling: rowgate's resize-and-encode of the decoded logo in a
               loop on every core, no HTTP, no disk, no result cache (the compute ceiling)
  storage      s003-static's three small files from a public bucket, beside the static ceiling
  1 GB         a 1 GiB upload and download through storage: throughput and the server's peak RSS;
               with --s3-moto, again with the bytes in an S3 bucket of moto's server (moto is
               Python: its speed bounds the throughput; the figure that matters there is the RSS)

Targets (issue #21): uncached ≥ 3× PocketBase's thumbnails per CPU-second; uncached ≥ 80 % of
the compute ceiling; cached ≥ 80 % of the static ceiling.
"""

import base64
import hashlib
import hmac
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib

from .. import schema
from ..loadgen import run_loadgen
from ..peers import POCKETBASE_VERSION, pocketbase_binary
from .. import procs
from ..procs import free_port
from ..servers import call, ceiling, http
from .s003_static import FILES

NAME = "s003-image"
DATA = "s003"
TITLE = "s003-image: a PNG logo resized per request, beside PocketBase's thumbnails and the ceilings"
PUBLISHED = ("~19.4 req/s per vCPU (Shuttle, 2024-02-15, Salvo's image rescaler on the Shuttle logo, flat from 0.25 "
             "to 2 vCPUs; 14.6 per vCPU at 4), drill from the same AWS region.")
FAIL_ON_FAILED = True
USES_LOADGEN = True
USES_CEILING_EXAMPLE = True
JWT_SECRET = "s003-image-secret-of-at-least-32-bytes"
RULES = """["storage.buckets"]
select = { service_role = "true" }
insert = { service_role = "true" }
["storage.objects"]
select = { service_role = "true" }
insert = { service_role = "true" }
"""
SIZE = 1000
CACHED = "width=300&height=300"


def arguments(ap):
    ap.add_argument("--duration", type=int, default=10, help="seconds per timed load (default 10)")
    ap.add_argument("--connections", type=int, default=16, help="connections (default 16)")
    ap.add_argument("--images", type=int, default=2000, help="renders per uncached load (default 2000)")
    ap.add_argument("--big-mib", type=int, default=1024, help="the big file's size in MiB (default 1024)")
    ap.add_argument("--s3-moto", metavar="MOTO_SERVER",
                    help="moto_server's path (tests/py/.venv/bin/moto_server after scripts/test): the 1 GiB "
                         "cases again with the bytes in S3")
    ap.add_argument("--peers", choices=["pocketbase", "none"], default="pocketbase",
                    help="peers beside rowgate: pocketbase (the default) or none")
    ap.add_argument("--out", help="results file stem (default bench/results/<date>-s003-image)")


def logo_png(size=SIZE):
    """A flat-coloured logo on transparency: rings and bars, as a logo is (RGBA, 8-bit)."""
    c = size / 2
    rows = bytearray()
    for y in range(size):
        rows.append(0)
        for x in range(size):
            d = ((x - c) ** 2 + (y - c) ** 2) ** 0.5
            if 0.30 * size < d < 0.45 * size:
                px = (255, 136, 46, 255)
            elif abs(y - c) < 0.06 * size and abs(x - c) < 0.25 * size:
                px = (20, 20, 30, 255)
            elif d < 0.2 * size:
                px = (250, 250, 250, 255 if (x // 25 + y // 25) % 2 else 200)
            else:
                px = (0, 0, 0, 0)
            rows += bytes(px)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
            + chunk(b"IEND", b""))


def service_token():
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    now = int(time.time())
    parts = ({"alg": "HS256", "typ": "JWT"}, {"role": "service_role", "iat": now, "exp": now + 86400})
    signing = ".".join(b64(json.dumps(p, separators=(",", ":")).encode()) for p in parts)
    return signing + "." + b64(hmac.new(JWT_SECRET.encode(), signing.encode(), hashlib.sha256).digest())


def multipart(fields, files):
    """A multipart/form-data body: (content type, bytes)."""
    boundary = "rowgate-s003-" + os.urandom(8).hex()
    out = bytearray()
    for k, v in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    for k, (name, ctype, data) in files.items():
        out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"; filename="{name}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n").encode() + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return f"multipart/form-data; boundary={boundary}", bytes(out)


def sizes(n):
    """n distinct (width, height) pairs in 250-349 (around PocketBase's 300x300), in a fixed order."""
    seen, out, state = set(), [], 12345
    while len(out) < n:
        state = (state * 1103515245 + 12345) % 2**31
        w, h = 250 + state % 100, 250 + (state // 100) % 100
        if (w, h) not in seen:
            seen.add((w, h))
            out.append((w, h))
    return out


def start_rowgate(ctx, work, name, *extra):
    port = free_port()
    argv = [ctx.rowgate, "serve", "--db-uri", f"sqlite:{os.path.join(work, name + '.db')}", "--db-rules",
            os.path.join(work, "rules.toml"), "--jwt-secret", JWT_SECRET, "--storage-enabled", "true",
            "--storage-dir", os.path.join(work, name + "-files"), "--server-host", "127.0.0.1", "--server-port",
            str(port), *extra]
    return ctx.server(name, argv, port, ready="/live")


def per_cpu(figures):
    """Requests per server CPU-second."""
    if figures.get("requests") and figures.get("server_cpu_s"):
        return figures["requests"] / figures["server_cpu_s"]
    return None


def run(ctx):
    a = ctx.args
    ctx.result["config"].update(duration=a.duration, connections=a.connections, images=a.images, big_mib=a.big_mib)
    ctx.result["about"] = (
        f"A {SIZE}×{SIZE} RGBA PNG logo. Uncached: {a.images} requests, each a new size (width and height "
        f"250–349, resize cover), at {a.connections} connections through examples/loadgen (kept alive); PocketBase: "
        f"{a.images} records with the logo, each record's thumbnail asked for once (its first request makes it). "
        f"Cached: `oha -z {a.duration}s -c {a.connections}` on one transform. Compute ceiling: "
        "examples/transform_ceiling, rowgate's resize-encode of the decoded logo on every core, no HTTP. "
        "Per CPU-second: "
        "requests ÷ the server's CPU seconds during the load.")
    work = tempfile.mkdtemp(prefix="rowgate-s003-image-")
    try:
        logo = os.path.join(work, "logo.png")
        with open(logo, "wb") as f:
            f.write(logo_png())
        with open(os.path.join(work, "rules.toml"), "w") as f:
            f.write(RULES)
        token = {"Authorization": f"Bearer {service_token()}"}
        with start_rowgate(ctx, work, "rowgate") as rg:
            rowgate_cases(ctx, rg, logo, token, work)
        if a.peers == "pocketbase":
            pocketbase_cases(ctx, logo, work)
        else:
            schema.not_run(ctx.result, "pocketbase", "--peers none")
        compute_ceiling(ctx, logo)
        big_file(ctx, work, token)
        ratios(ctx)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def rowgate_cases(ctx, rg, logo, token, work):
    a = ctx.args
    call(rg.base, "POST", "/storage/v1/bucket", {"name": "images", "public": True}, token)
    with open(logo, "rb") as f:
        call(rg.base, "POST", "/storage/v1/object/images/logo.png", f.read(), {"Content-Type": "image/png", **token})
    render = "/storage/v1/render/image/public/images/logo.png"
    lines = [{"method": "GET", "path": f"{render}?width={w}&height={h}"} for w, h in sizes(a.images)]
    figures = ctx.measure(lambda: run_loadgen(ctx.loadgen, rg.port, lines, a.connections, True,
                                              os.path.join(work, "uncached.jsonl")), rg)
    ctx.log(f"rowgate uncached: {figures['req_s']:,.1f} req/s, server CPU {figures.get('server_cpu_s')} s")
    schema.add(ctx.result, "uncached: a new size per request", "rowgate", figures)
    status, _, rendered = http(rg.url(f"{render}?{CACHED}"))
    assert status == 200, status
    schema.add(ctx.result, "cached: one transform again", "rowgate",
               ctx.load(rg, rg.url(f"{render}?{CACHED}"), a.connections, a.duration, warmup=1, label="cached"))
    path = os.path.join(work, "rendered.png")
    with open(path, "wb") as f:
        f.write(rendered)
    port = free_port()
    with ctx.server("ceiling", ceiling(ctx.rowgate, port, path, "image/png"), port) as c:
        schema.add(ctx.result, "cached: one transform again", "ceiling",
                   ctx.load(c, c.url("/"), a.connections, a.duration, warmup=1, label="static ceiling"))
    # s003-static's files from a public bucket.
    call(rg.base, "POST", "/storage/v1/bucket", {"name": "site", "public": True}, token)
    for name, size, ctype in FILES:
        body = (("rowgate s003 static file " * 40)[: size - 1] + "\n").encode()
        call(rg.base, "POST", f"/storage/v1/object/site/{name}", body, {"Content-Type": ctype, **token})
        case = f"storage: {name} ({size} B)"
        schema.add(ctx.result, case, "rowgate", ctx.load(rg, rg.url(f"/storage/v1/object/public/site/{name}"),
                                                         a.connections, a.duration, warmup=1, label=name))
        path = os.path.join(work, name)
        with open(path, "wb") as f:
            f.write(body)
        port = free_port()
        with ctx.server("ceiling", ceiling(ctx.rowgate, port, path, ctype), port) as c:
            schema.add(ctx.result, case, "ceiling", ctx.load(c, c.url("/"), a.connections, a.duration, label=name))


def pocketbase_cases(ctx, logo, work):
    a = ctx.args
    binary = pocketbase_binary()
    ctx.result["versions"]["pocketbase"] = procs.run([binary, "--version"], timeout=30).stdout.strip()
    pbdir = os.path.join(work, "pb_data")
    procs.run([binary, "superuser", "upsert", "admin@example.com", "adminpass1234", "--dir", pbdir], timeout=60)
    port = free_port()
    with ctx.server("pocketbase", [binary, "serve", "--http", f"127.0.0.1:{port}", "--dir", pbdir], port) as pb:
        admin = {"Authorization": call(pb.base, "POST", "/api/collections/_superusers/auth-with-password",
                                       {"identity": "admin@example.com", "password": "adminpass1234"})["token"]}
        call(pb.base, "PATCH", "/api/settings", {"logs": {"maxDays": 0}}, admin)
        call(pb.base, "POST", "/api/collections", {
            "name": "images", "type": "base", "viewRule": "", "listRule": "",
            "fields": [{"name": "image", "type": "file", "maxSelect": 1, "maxSize": 50 * 2**20,
                        "mimeTypes": ["image/png"], "thumbs": ["300x300"]}]}, admin)
        with open(logo, "rb") as f:
            data = f.read()
        files = []
        for i in range(a.images):
            ctype, body = multipart({}, {"image": (f"logo{i}.png", "image/png", data)})
            rec = call(pb.base, "POST", "/api/collections/images/records", body, {"Content-Type": ctype, **admin})
            files.append(f"/api/files/images/{rec['id']}/{rec['image']}")
        lines = [{"method": "GET", "path": f"{p}?thumb=300x300"} for p in files]
        figures = ctx.measure(lambda: run_loadgen(ctx.loadgen, port, lines, a.connections, True,
                                                  os.path.join(work, "pb-uncached.jsonl")), pb)
        ctx.log(f"pocketbase thumbnails: {figures['req_s']:,.1f} req/s, server CPU {figures.get('server_cpu_s')} s")
        schema.add(ctx.result, "uncached: a new size per request", "pocketbase", figures)
        schema.add(ctx.result, "cached: one transform again", "pocketbase",
                   ctx.load(pb, pb.url(f"{files[0]}?thumb=300x300"), a.connections, a.duration, warmup=1,
                            label="cached thumb"))


def compute_ceiling(ctx, logo):
    a = ctx.args
    argv = [ctx.transform_ceiling, "--image", logo, "--seconds", str(a.duration)]
    out = json.loads(procs.run(argv, timeout=a.duration + 300).stdout)
    ctx.log(f"compute ceiling: {out['renders_per_s']:,.1f} renders/s on {out['threads']} threads")
    schema.add(ctx.result, "uncached: a new size per request", "compute ceiling",
               schema.load(req_s=out["renders_per_s"], requests=out["renders"], command=" ".join(argv),
                           extra={"threads": out["threads"]}))


def big_file(ctx, work, token):
    """A big file up and down through storage on a fresh server: MiB/s and the peak RSS; on
    local disk, and with --s3-moto in an S3 bucket of moto's server."""
    a = ctx.args
    path = os.path.join(work, "big.bin")
    with open(path, "wb") as f:
        chunk = os.urandom(2**20)
        for _ in range(a.big_mib):
            f.write(chunk)
    size = a.big_mib * 2**20
    limit = ("--storage-file-size-limit", str(size + 1))
    with start_rowgate(ctx, work, "rowgate-big", *limit) as rg:
        up_and_down(ctx, rg, path, token, "")
    if not a.s3_moto:
        return
    port = free_port()
    with ctx.server("moto", [a.s3_moto, "-H", "127.0.0.1", "-p", str(port)], port, ready="/"):
        endpoint = f"http://127.0.0.1:{port}"
        subprocess.run(["curl", "-sS", "-f", "-X", "PUT", f"{endpoint}/big"], check=True, timeout=60)
        s3 = ("--storage-s3-url", "s3://big/rowgate", "--storage-s3-endpoint", endpoint, "--storage-s3-access-key-id",
              "bench", "--storage-s3-secret-access-key", "bench-secret")
        with start_rowgate(ctx, work, "rowgate-big-s3", *limit, *s3) as rg:
            up_and_down(ctx, rg, path, token, " (S3, moto)")


def up_and_down(ctx, rg, path, token, where):
    a = ctx.args
    call(rg.base, "POST", "/storage/v1/bucket", {"name": "big"}, token)
    url = rg.url("/storage/v1/object/big/big.bin")
    auth = f"Authorization: {token['Authorization']}"
    for case, argv in (
            ("upload", ["curl", "-sS", "-f", "-o", "/dev/null", "-X", "POST", "-H", auth, "-H",
                        "Content-Type: application/octet-stream", "-T", path, url]),
            ("download", ["curl", "-sS", "-f", "-o", "/dev/null", "-H", auth, url])):
        started = time.monotonic()
        figures = ctx.measure(lambda: subprocess.run(argv, check=True, timeout=1800) and {}, rg)
        took = time.monotonic() - started
        figures.update(completed_s=took, mib_s=a.big_mib / took, requests=1, failed=0,
                       command=" ".join(argv).replace(token["Authorization"], "Bearer <secret>"))
        ctx.log(f"{a.big_mib} MiB {case}{where}: {a.big_mib / took:,.0f} MiB/s, peak RSS {figures.get('peak_rss_mb')} MB")
        schema.add(ctx.result, f"{a.big_mib} MiB {case}{where}", "rowgate", schema.load(**figures))


def ratios(ctx):
    r = ctx.result
    un, ca = "uncached: a new size per request", "cached: one transform again"
    rg, pb = schema.get(r, un, "rowgate"), schema.get(r, un, "pocketbase")
    schema.compare(r, "uncached per CPU-second / PocketBase's thumbnails per CPU-second", per_cpu(rg), per_cpu(pb),
                   3.0)
    schema.compare(r, "uncached / PocketBase's thumbnails (req/s)", rg.get("req_s"), pb.get("req_s"))
    schema.compare(r, "uncached / compute ceiling", rg.get("req_s"), schema.req_s(r, un, "compute ceiling"), 0.8,
                   pct=True)
    schema.compare(r, "cached / static ceiling", schema.req_s(r, ca, "rowgate"), schema.req_s(r, ca, "ceiling"), 0.8,
                   pct=True)
    schema.compare(r, "cached / PocketBase's cached thumbnail", schema.req_s(r, ca, "rowgate"),
                   schema.req_s(r, ca, "pocketbase"))
    for name, size, _ in FILES:
        case = f"storage: {name} ({size} B)"
        schema.compare(r, f"{case} / ceiling", schema.req_s(r, case, "rowgate"), schema.req_s(r, case, "ceiling"),
                       pct=True)
    cores = r["machine"].get("cores") or os.cpu_count()
    if rg.get("req_s"):
        schema.ratio(r, "uncached req/s per core (the seed: ~19.4 per vCPU)", f"{rg['req_s'] / cores:,.1f}")
