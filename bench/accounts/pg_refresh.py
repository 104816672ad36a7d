#!/usr/bin/env python3
"""PostgreSQL refreshes with many sessions in the database: a `rowgate cluster` (started by the first
binary) gets 100,000 other sessions and their amr claims; then, for each further binary, its
`accounts install`, a server, a sign-up and 300 `grant_type=refresh_token` one after another.

    bench/accounts/pg_refresh.py CLUSTER_BIN BIN [BIN ...]
"""
import json, os, subprocess, sys, time, urllib.request, hmac, hashlib, base64
bins = sys.argv[1:]
work = "/tmp/rowgate-pg-refresh"; subprocess.run(["rm", "-rf", work]); os.makedirs(work); os.chmod(work, 0o755)
out = subprocess.run([bins[0], "cluster", "start", "--dir", work + "/pg"], check=True, capture_output=True, text=True)
uri = json.loads(out.stdout.strip().splitlines()[-1])["uri"]
secret = "x" * 40
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
h = b64(b'{"alg":"HS256","typ":"JWT"}'); p = b64(b'{"role":"anon","exp":4102444800}')
anon = h + "." + p + "." + b64(hmac.new(secret.encode(), f"{h}.{p}".encode(), hashlib.sha256).digest())
subprocess.run([bins[0], "accounts", "install", "--db-uri", uri, "--role", "postgres"], check=True, capture_output=True)
filler = """INSERT INTO auth.users (id, aud, role, email, created_at, updated_at, raw_app_meta_data, raw_user_meta_data)
 VALUES ('00000000-0000-4000-8000-000000000001','authenticated','authenticated','filler@x.io',now(),now(),'{}','{}');
INSERT INTO auth.sessions (id, user_id, created_at, updated_at, aal)
 SELECT gen_random_uuid(), '00000000-0000-4000-8000-000000000001', now(), now(), 'aal1' FROM generate_series(1, 100000);
INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method, id)
 SELECT id, now(), now(), 'password', gen_random_uuid() FROM auth.sessions; ANALYZE;"""
subprocess.run(["psql", uri, "-q", "-c", filler], check=True)
def post(port, path, body):
    r = urllib.request.Request(f"http://127.0.0.1:{port}/auth/v1{path}", json.dumps(body).encode(), {"content-type": "application/json", "apikey": anon})
    return json.load(urllib.request.urlopen(r))
for round_, b in enumerate(bins[1:]):
    subprocess.run([b, "accounts", "install", "--db-uri", uri, "--role", "postgres"], check=True, capture_output=True)
    port = 47300 + round_
    proc = subprocess.Popen([b, "serve", "--db-uri", uri, "--server-host", "127.0.0.1", "--server-port", str(port), "--jwt-secret", secret,
                             "--accounts-enabled", "true", "--db-anon-role", "postgres", "--accounts-signup-rate-limit", "off"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try: urllib.request.urlopen(f"http://127.0.0.1:{port}/ready"); break
        except OSError: time.sleep(0.1)
    s = post(port, "/signup", {"email": f"r{round_}@x.io", "password": "secret-refresh"})
    t = s["refresh_token"]; n = 300; start = time.time()
    for _ in range(n):
        t = post(port, "/token?grant_type=refresh_token", {"refresh_token": t})["refresh_token"]
    el = time.time() - start
    print(f"{os.path.basename(os.path.dirname(b))}: {n} sequential refreshes in {el:.3f} s ({el/n*1000:.2f} ms each)", flush=True)
    proc.terminate(); proc.wait()
subprocess.run([bins[0], "cluster", "stop", "--dir", work + "/pg"], capture_output=True)
