#!/usr/bin/env python3
"""Accounts on a PostgreSQL with many users: a `rowgate cluster` (started by the first binary) gets
100,000 other users, each with its email identity, a session and its amr claim; then, for each
further binary, its `accounts install`, a server, a sign-up and, one request after another,
300 `grant_type=refresh_token`, 300 `GET /user` and 100 `PUT /user` (new metadata).

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
 SELECT gen_random_uuid(), 'authenticated', 'authenticated', 'filler' || n || '@x.io', now(), now(),
        '{"provider":"email","providers":["email"]}', '{}' FROM generate_series(1, 100000) n;
INSERT INTO auth.identities (id, provider_id, user_id, identity_data, provider, created_at, updated_at)
 SELECT gen_random_uuid(), u.id::text, u.id, jsonb_build_object('sub', u.id::text, 'email', u.email), 'email', now(), now()
 FROM auth.users u;
INSERT INTO auth.sessions (id, user_id, created_at, updated_at, aal)
 SELECT gen_random_uuid(), u.id, now(), now(), 'aal1' FROM auth.users u;
INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method, id)
 SELECT id, now(), now(), 'password', gen_random_uuid() FROM auth.sessions; ANALYZE;"""
subprocess.run(["psql", uri, "-q", "-c", filler], check=True)
def call(port, method, path, body, token=None):
    headers = {"content-type": "application/json", "apikey": anon}
    if token: headers["authorization"] = "Bearer " + token
    data = None if body is None else json.dumps(body).encode()
    r = urllib.request.Request(f"http://127.0.0.1:{port}/auth/v1{path}", data, headers, method=method)
    return json.load(urllib.request.urlopen(r))
def timed(label, n, step):
    start = time.time()
    for i in range(n): step(i)
    el = time.time() - start
    print(f"{label}: {n} sequential {el:.3f} s ({el/n*1000:.2f} ms each)", flush=True)
for round_, b in enumerate(bins[1:]):
    subprocess.run([b, "accounts", "install", "--db-uri", uri, "--role", "postgres"], check=True, capture_output=True)
    port = 47300 + round_
    proc = subprocess.Popen([b, "serve", "--db-uri", uri, "--server-host", "127.0.0.1", "--server-port", str(port), "--jwt-secret", secret,
                             "--accounts-enabled", "true", "--db-anon-role", "postgres", "--accounts-signup-rate-limit", "off"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try: urllib.request.urlopen(f"http://127.0.0.1:{port}/ready"); break
        except OSError: time.sleep(0.1)
    name = os.path.basename(os.path.dirname(b))
    s = call(port, "POST", "/signup", {"email": f"r{round_}@x.io", "password": "secret-refresh"})
    state = {"refresh": s["refresh_token"], "access": s["access_token"]}
    def refresh(_):
        t = call(port, "POST", "/token?grant_type=refresh_token", {"refresh_token": state["refresh"]})
        state["refresh"], state["access"] = t["refresh_token"], t["access_token"]
    timed(f"{name} refresh", 300, refresh)
    timed(f"{name} GET /user", 300, lambda _: call(port, "GET", "/user", None, state["access"]))
    timed(f"{name} PUT /user", 100, lambda i: call(port, "PUT", "/user", {"data": {"n": i}}, state["access"]))
    proc.terminate(); proc.wait()
subprocess.run([bins[0], "cluster", "stop", "--dir", work + "/pg"], capture_output=True)
