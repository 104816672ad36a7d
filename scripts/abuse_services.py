"""scripts/abuse's attacks on the services beside the REST API, on either backend: storage
(names, multipart bodies, ranges, signed URLs, transforms, strangers' writes), realtime (frames,
joins, filters, presence, a reader that stops reading) and every /auth/v1 endpoint. Each attack
must get a 4xx (or a refusal the protocol allows) within HANG seconds, never a 5xx, and leave
the server serving others."""

import base64
import json
import os
import socket
import struct
import time
import zlib

from abuse_common import HANG, fail, healthy, raw, request, token

ALICE = "6f1d6c6e-1111-4c49-9c47-5e5d3b2a1a11"

# What the PostgreSQL run adds to the REST API's schema: Supabase's roles, storage's policies
# (each user owns a folder named by its id), the change feed's own role, a published table.
PG_SETUP = """
DO $$ BEGIN CREATE ROLE authenticated NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE service_role NOLOGIN BYPASSRLS; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE abuse_replicator LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
GRANT authenticated, service_role TO authenticator;
GRANT USAGE ON SCHEMA api TO authenticated, service_role;
GRANT SELECT ON api.items TO authenticated, service_role;
"""

PG_POLICIES = """
DROP POLICY IF EXISTS own ON storage.objects;
CREATE POLICY own ON storage.objects TO authenticated
  USING ((storage.foldername(name))[1] = auth.uid()::text)
  WITH CHECK ((storage.foldername(name))[1] = auth.uid()::text);
ALTER PUBLICATION supabase_realtime ADD TABLE api.items;
"""

SQLITE_RULES = """
["storage.buckets"]
select = { service_role = "true" }
insert = { service_role = "true" }
delete = { service_role = "true" }
["storage.objects"]
select = { service_role = "true", authenticated = "folder=eq.@jwt.sub" }
insert = { service_role = "true", authenticated = "folder=eq.@jwt.sub" }
update = { service_role = "true", authenticated = "folder=eq.@jwt.sub" }
delete = { service_role = "true", authenticated = "folder=eq.@jwt.sub" }
"""


def png(width, height):
    """A grey PNG of `width` x `height`: a few hundred bytes that decode to many megabytes."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    row = b"\x00" + b"\x80" * width
    pixels = zlib.compressobj(9)
    body = b"".join(pixels.compress(row) for _ in range(height)) + pixels.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", body) + chunk(b"IEND", b""))


def expect(label, status, elapsed, text, allowed=None, may_close=False):
    """Records a failure unless the answer came in time and is no 5xx (or is in `allowed`)."""
    if elapsed > HANG:
        fail(f"{label}: {elapsed:.1f} s")
    elif status is None and not may_close:
        fail(f"{label}: no answer")
    elif status is not None and ((allowed and status not in allowed) or (not allowed and status >= 500)):
        fail(f"{label}: {status} {text.splitlines()[-1][:200] if text else ''}")
    else:
        print(f"ok   {label}: {status} in {elapsed * 1000:.0f} ms", flush=True)


def send(port, label, data, allowed=None, may_close=False):
    status, elapsed, text = raw(port, data)
    expect(label, status, elapsed, text, allowed, may_close)
    return status, text


def body_of(text):
    return text.partition("\r\n\r\n")[2]


# Storage.

def attack_storage(name, port, storage_dir, quick):
    service = {"authorization": "Bearer " + token({"role": "service_role"})}
    alice = {"authorization": "Bearer " + token({"role": "authenticated", "sub": ALICE})}
    bob = {"authorization": "Bearer " + token({"role": "authenticated", "sub": "7e2d6c6e-2222-4c49-9c47-5e5d3b2a1a22"})}
    json_h = {"content-type": "application/json"}
    bucket = "abuse-" + name
    status, _ = send(port, f"{name} storage: make a bucket", request(
        "POST", "/storage/v1/bucket", {**service, **json_h}, json.dumps({"name": bucket, "public": True}).encode()),
        allowed={200})
    send(port, f"{name} storage: an object", request(
        "POST", f"/storage/v1/object/{bucket}/{ALICE}/a.txt", {**alice, "content-type": "text/plain"}, b"0123456789"),
        allowed={200})
    # 49 megapixels (9 in quick mode, which runs a debug build): decoded once, kept reduced.
    side = 3000 if quick else 7000
    bomb = png(side, side)
    send(port, f"{name} storage: an image of {side * side // 1_000_000} megapixels", request(
        "POST", f"/storage/v1/object/{bucket}/bomb.png", {**service, "content-type": "image/png"}, bomb),
        allowed={200})
    obj = f"/storage/v1/object/{bucket}/{ALICE}/a.txt"
    files_before = count_files(storage_dir)
    mp = "multipart/form-data; boundary=XX"
    cases = [
        ("dot segments", request("GET", f"/storage/v1/object/{bucket}/../../etc/passwd", alice)),
        ("encoded dot segments", request("GET", f"/storage/v1/object/{bucket}/%2e%2e/%2e%2e/x", alice)),
        ("a key of 2 KB", request("POST", f"/storage/v1/object/{bucket}/{'k' * 2048}", alice, b"x")),
        ("a key with a NUL", request("POST", f"/storage/v1/object/{bucket}/a%00b", alice, b"x")),
        ("a key not UTF-8", request("GET", f"/storage/v1/object/{bucket}/%ff%fe", alice)),
        ("a bucket name of 200", request("POST", "/storage/v1/bucket", {**service, **json_h}, json.dumps({"name": "b" * 200}).encode())),
        ("a bucket body of 2 MB", request("POST", "/storage/v1/bucket", {**service, **json_h}, b'{"name":"' + b"b" * (2 << 20) + b'"}')),
        ("a stranger's upload", request("POST", f"/storage/v1/object/{bucket}/{ALICE}/planted.txt", bob, b"x" * 100_000)),
        ("an upload with no credentials", request("POST", f"/storage/v1/object/{bucket}/{ALICE}/x.txt", {}, b"x")),
        ("a multipart field of 1 MB", request("POST", obj + "1", {**alice, "content-type": mp},
                                               b'--XX\r\ncontent-disposition: form-data; name="cacheControl"\r\n\r\n' + b"9" * (1 << 20) + b"\r\n--XX--\r\n")),
        ("a multipart of 40 fields", request("POST", obj + "2", {**alice, "content-type": mp},
                                             b"".join(b'--XX\r\ncontent-disposition: form-data; name="f%d"\r\n\r\nv\r\n' % i for i in range(40)) + b"--XX--\r\n")),
        ("a multipart without a file", request("POST", obj + "3", {**alice, "content-type": mp},
                                               b'--XX\r\ncontent-disposition: form-data; name="cacheControl"\r\n\r\n60\r\n--XX--\r\n')),
        ("a multipart cut short", request("POST", obj + "4", {**alice, "content-type": mp},
                                          b'--XX\r\ncontent-disposition: form-data; name="file"; filename="a"\r\n\r\nabc')),
        ("a multipart of no boundary", request("POST", obj + "5", {**alice, "content-type": "multipart/form-data"}, b"--XX--")),
        ("a media type with a control character", request("POST", obj + "6", {**alice, "content-type": mp},
                                                          b'--XX\r\ncontent-disposition: form-data; name="contentType"\r\n\r\ntext/\x01\r\n'
                                                          b'--XX\r\ncontent-disposition: form-data; name="file"; filename="a"\r\n\r\nx\r\n--XX--\r\n')),
        ("range garbage", request("GET", obj, {**alice, "range": "bytes=abc"})),
        ("range backwards", request("GET", obj, {**alice, "range": "bytes=9-2"})),
        ("range past the end", request("GET", obj, {**alice, "range": "bytes=100-200"})),
        ("1,000 ranges", request("GET", obj, {**alice, "range": "bytes=" + ",".join(f"{i}-{i}" for i in range(1000))})),
        ("a forged signed URL", request("GET", f"/storage/v1/object/sign/{bucket}/{ALICE}/a.txt?token=" + token({"url": f"{bucket}/{ALICE}/a.txt", "exp": 9999999999})[:-4] + "AAAA")),
        ("an expired signed URL", request("GET", f"/storage/v1/object/sign/{bucket}/{ALICE}/a.txt?token=" + token({"url": f"{bucket}/{ALICE}/a.txt", "scope": "download", "exp": 1000}))),
        ("another object's signed URL", request("GET", f"/storage/v1/object/sign/{bucket}/{ALICE}/a.txt?token=" + token({"url": f"{bucket}/other", "scope": "download", "exp": 9999999999}))),
        ("an upload token to download", request("GET", f"/storage/v1/object/sign/{bucket}/{ALICE}/a.txt?token=" + token({"url": f"{bucket}/{ALICE}/a.txt", "scope": "upload", "upsert": True, "exp": 9999999999}))),
        ("a signed URL token of 20 KB", request("GET", f"/storage/v1/object/sign/{bucket}/{ALICE}/a.txt?token=" + "a" * 20_000)),
        ("signing for -1 s", request("POST", f"/storage/v1/object/sign/{bucket}/{ALICE}/a.txt", {**alice, **json_h}, b'{"expiresIn": -1}')),
        ("signing for 1e30 s", request("POST", f"/storage/v1/object/sign/{bucket}/{ALICE}/a.txt", {**alice, **json_h}, b'{"expiresIn": 1e30}')),
        ("signing 5,000 paths", request("POST", f"/storage/v1/object/sign/{bucket}", {**alice, **json_h}, json.dumps({"expiresIn": 60, "paths": ["p"] * 5000}).encode())),
        ("a stranger signs an upload", request("POST", f"/storage/v1/object/upload/sign/{bucket}/{ALICE}/a.txt", {**bob, "x-upsert": "true"})),
        ("deleting 5,000 prefixes", request("DELETE", f"/storage/v1/object/{bucket}", {**alice, **json_h}, json.dumps({"prefixes": ["p"] * 5000}).encode())),
        ("a transform of width -1", request("GET", f"/storage/v1/render/image/public/{bucket}/bomb.png?width=-1")),
        ("a transform of width 99999", request("GET", f"/storage/v1/render/image/public/{bucket}/bomb.png?width=99999&height=abc")),
        ("a transform of bogus parameters", request("GET", f"/storage/v1/render/image/public/{bucket}/bomb.png?resize=bogus&format=bogus&quality=0")),
        ("a transform of no image", request("GET", f"/storage/v1/render/image/authenticated/{bucket}/{ALICE}/a.txt?width=10", alice)),
    ]
    for width in (100, 101, 102, 103):
        cases.append((f"the {side * side // 1_000_000}-megapixel image at width {width}", request("GET", f"/storage/v1/render/image/public/{bucket}/bomb.png?width={width}")))
    for case, data in cases:
        send(port, f"{name} storage: {case}", data, may_close=case.startswith("a bucket body") or case.startswith("a multipart field"))
        healthy(name, port, f"after storage: {case}")
    status, _, text = raw(port, request("GET", obj, alice))
    if status != 200 or body_of(text) != "0123456789":
        fail(f"{name} storage: alice's object changed: {status} {body_of(text)[:100]}")
    if count_files(storage_dir) != files_before:
        fail(f"{name} storage: refused uploads left files ({files_before} before, {count_files(storage_dir)} after)")


def count_files(directory):
    n = 0
    for _, _, files in os.walk(directory):
        n += sum(1 for f in files if "tmp" not in f)
    return n


# Realtime.

class Socket:
    """A WebSocket client of the least it takes: the handshake, masked frames out, frames in."""

    def __init__(self, port, path):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=HANG)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f"GET {path} HTTP/1.1\r\nhost: abuse\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                        f"sec-websocket-key: {key}\r\nsec-websocket-version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.s.recv(4096)
            if not chunk:
                raise OSError("closed during the handshake")
            head += chunk
        head, _, self.buf = head.partition(b"\r\n\r\n")
        self.status = int(head[9:12])

    def send(self, data, opcode=1):
        if isinstance(data, str):
            data = data.encode()
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        mask = os.urandom(4)
        masked = (int.from_bytes(data, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big") if n else b""
        self.s.sendall(head + mask + masked)

    def frame(self, seconds=HANG):
        """The next frame: (opcode, payload), or None when the socket closed or went quiet."""
        self.s.settimeout(seconds)
        try:
            head = self._read(2)
            n = head[1] & 0x7F
            if n == 126:
                n = int.from_bytes(self._read(2), "big")
            elif n == 127:
                n = int.from_bytes(self._read(8), "big")
            return head[0] & 0x0F, self._read(n)
        except (OSError, ValueError):
            return None

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ValueError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def json(self, seconds=HANG):
        """The next text frame as JSON (pings skipped), or None."""
        while True:
            f = self.frame(seconds)
            if f is None or f[0] == 8:
                return None
            if f[0] == 1:
                return json.loads(f[1])

    def close(self):
        self.s.close()


def push(topic, event, payload, ref="1"):
    return json.dumps({"topic": topic, "event": event, "payload": payload, "ref": ref, "join_ref": ref})


def socket_alive(name, port, when):
    """A new socket's heartbeat is answered at once."""
    try:
        ws = Socket(port, "/realtime/v1/websocket?vsn=1.0.0&apikey=" + token({"role": "abuse_anon"}))
        started = time.monotonic()
        ws.send(push("phoenix", "heartbeat", {}, "hb"))
        reply = ws.json(2)
        ws.close()
        if not reply or reply.get("ref") != "hb" or time.monotonic() - started > 1:
            fail(f"{name} realtime: a heartbeat went unanswered {when}: {reply}")
    except OSError as e:
        fail(f"{name} realtime: no socket {when}: {e}")


def attack_realtime(name, port, table):
    apikey = token({"role": "abuse_anon"})
    path = "/realtime/v1/websocket?vsn=1.0.0&apikey=" + apikey
    changes = lambda f: {"config": {"postgres_changes": [{"event": "*", "schema": table[0], "table": table[1], "filter": f}]}}

    def on_one_socket(case, frames, until=None, may_close=False):
        """Sends `frames` on a new socket and reads what comes back for a second (or until a
        frame satisfies `until`); the socket must neither hang the server nor take it down.
        With `may_close`, the server closing the socket while the frames are still being sent
        (a reset, for a frame past its size limit) is its answer, not a failure."""
        started = time.monotonic()
        try:
            ws = Socket(port, path)
            for f in frames:
                if isinstance(f, tuple):
                    ws.send(*f)
                else:
                    ws.send(f)
            seen = []
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                m = ws.json(0.5)
                if m is None:
                    break
                seen.append(m)
                if until and until(m):
                    break
            ws.close()
            print(f"ok   {name} realtime: {case}: {len(seen)} frames back in {(time.monotonic() - started) * 1000:.0f} ms", flush=True)
            return seen
        except (ConnectionResetError, BrokenPipeError) as e:
            if not may_close:
                fail(f"{name} realtime: {case}: {e}")
            else:
                print(f"ok   {name} realtime: {case}: closed by the server ({e.strerror}) in {(time.monotonic() - started) * 1000:.0f} ms", flush=True)
            return []
        except OSError as e:
            fail(f"{name} realtime: {case}: {e}")
            return []
        finally:
            healthy(name, port, f"after realtime: {case}")
            socket_alive(name, port, f"after {case}")

    on_one_socket("a frame that is not JSON", ["{{{{ not json"])
    on_one_socket("binary garbage", [(os.urandom(512), 2)])
    on_one_socket("a frame of 2 MB", ["x" * (2 << 20)], may_close=True)
    on_one_socket("an unknown event", [push("realtime:x", "bogus", {})])
    on_one_socket("200 channels", [push(f"realtime:c{i}", "phx_join", {}, str(i)) for i in range(200)])
    seen = on_one_socket("101 bindings in a channel", [push("realtime:many", "phx_join", {"config": {"postgres_changes": [
        {"event": "*", "schema": table[0], "table": table[1]}] * 101}})], until=lambda m: m.get("event") == "system")
    if not any(m.get("event") == "system" and m["payload"].get("status") == "error" for m in seen):
        fail(f"{name} realtime: 101 bindings were not refused: {seen[-2:]}")
    seen = on_one_socket("a filter of 20,000 characters", [push("realtime:long", "phx_join", changes("body=like.%" + "a" * 20_000 + "b"))],
                         until=lambda m: m.get("event") == "system")
    if not any(m.get("event") == "system" and m["payload"].get("status") == "error" for m in seen):
        fail(f"{name} realtime: a 20,000-character filter was not refused")
    on_one_socket("a regular expression too complex", [push("realtime:re", "phx_join", changes("body=match.(a{1,1000}){1,1000}"))])
    on_one_socket("a filter on no column", [push("realtime:col", "phx_join", changes("nothing=eq.1"))])
    on_one_socket("a presence of 100 KB", [push("realtime:p", "phx_join", {"config": {"presence": {"key": "k"}}}),
                                            push("realtime:p", "presence", {"type": "presence", "event": "track", "payload": {"pad": "x" * 100_000}}, "2")])
    on_one_socket("a presence that is no map", [push("realtime:p", "phx_join", {}),
                                                push("realtime:p", "presence", {"type": "presence", "event": "track", "payload": [1, 2]}, "2")])
    on_one_socket("a join with a forged token", [push("realtime:t", "phx_join", {"access_token": token({"role": "x"})[:-3] + "abc"})])
    # A reader that stops reading while broadcasts flood its channel: the others are served.
    try:
        stalled = Socket(port, path)
        stalled.send(push("realtime:flood", "phx_join", {"config": {"broadcast": {"self": False}}}))
        body = json.dumps({"messages": [{"topic": "flood", "event": "e", "payload": {"pad": "x" * 60_000}}]}).encode()
        worst = 0.0
        for _ in range(60):
            status, elapsed, text = raw(port, request("POST", "/realtime/v1/api/broadcast",
                                                      {"content-type": "application/json", "apikey": apikey}, body))
            worst = max(worst, elapsed)
            if status is None or status >= 500:
                fail(f"{name} realtime: a broadcast beside a stalled reader got {status}")
                break
        stalled.close()
        expect(f"{name} realtime: 60 broadcasts of 60 KB to a reader that stopped reading (slowest)", 202, worst, "")
    except OSError as e:
        fail(f"{name} realtime: the stalled reader: {e}")
    socket_alive(name, port, "after the stalled reader")


# Auth.

def attack_auth(name, port):
    json_h = {"content-type": "application/json"}
    signup = lambda body: request("POST", "/auth/v1/signup", json_h, body)
    login = lambda body: request("POST", "/auth/v1/token?grant_type=password", json_h, body)
    cases = [
        ("sign-up not JSON", signup(b"{{{")),
        ("sign-up without an email", signup(b'{"password": "secret-12"}')),
        ("sign-up with an email of 60 KB", signup(json.dumps({"email": "a" * 60_000 + "@x.io", "password": "secret-12"}).encode())),
        ("sign-up with a body of 1 MB", signup(b'{"email":"a@x.io","password":"' + b"p" * (1 << 20) + b'"}')),
        ("sign-up with a password of 60 KB", signup(json.dumps({"email": "long@x.io", "password": "p" * 60_000}).encode())),
        ("sign-up with numbers for strings", signup(b'{"email": 5, "password": 6}')),
        ("login not JSON", login(b"\xff\xfe")),
        ("login of no one", login(b'{"email": "nobody@x.io", "password": "nothing-1"}')),
        ("an unknown grant", request("POST", "/auth/v1/token?grant_type=magic", json_h, b"{}")),
        ("no grant", request("POST", "/auth/v1/token", json_h, b"{}")),
        ("a refresh token of 10 KB", request("POST", "/auth/v1/token?grant_type=refresh_token", json_h, json.dumps({"refresh_token": "r" * 10_000}).encode())),
        ("a refresh token that is a number", request("POST", "/auth/v1/token?grant_type=refresh_token", json_h, b'{"refresh_token": 1}')),
        ("the user with a forged token", request("GET", "/auth/v1/user", {"authorization": "Bearer " + token({"role": "authenticated", "sub": "x"})[:-3] + "abc"})),
        ("the user of a token of no user", request("GET", "/auth/v1/user", {"authorization": "Bearer " + token({"role": "authenticated", "sub": "not-a-user"})})),
        ("the user with no token", request("GET", "/auth/v1/user")),
        ("logout with no token", request("POST", "/auth/v1/logout")),
        ("an unknown endpoint", request("GET", "/auth/v1/nothing")),
        ("a method not taken", request("DELETE", "/auth/v1/signup")),
        ("a change of one's account with no token", request("PUT", "/auth/v1/user", json_h, b'{"data": {}}')),
        ("a change of the user of a token of no user", request("PUT", "/auth/v1/user", {**json_h, "authorization": "Bearer " + token({"role": "authenticated", "sub": "00000000-0000-4000-8000-000000000000"})}, b'{"data": {"a": 1}}')),
        ("the admin API with a user's token", request("GET", "/auth/v1/admin/users", {"authorization": "Bearer " + token({"role": "authenticated", "sub": "x"})})),
        ("the admin API with a page of a billion", request("GET", "/auth/v1/admin/users?per_page=1000000000&page=99999999999999999999", {"authorization": "Bearer " + token({"role": "service_role"})})),
        ("an admin's user of a path id", request("GET", "/auth/v1/admin/users/..%2F..%2Fetc", {"authorization": "Bearer " + token({"role": "service_role"})})),
        ("an admin's user of metadata of 60 KB", request("POST", "/auth/v1/admin/users", {**json_h, "authorization": "Bearer " + token({"role": "service_role"})}, json.dumps({"email": "big@x.io", "user_metadata": {"a": "b" * 60_000}}).encode())),
        ("a ban of a duration no one can write", request("PUT", "/auth/v1/admin/users/00000000-0000-4000-8000-000000000000", {**json_h, "authorization": "Bearer " + token({"role": "service_role"})}, b'{"ban_duration": "99999999999999999999h"}')),
        ("a recovery with no mail server", request("POST", "/auth/v1/recover", json_h, b'{"email": "victim@x.io"}')),
        ("a verification of a code of 10 KB", request("POST", "/auth/v1/verify", json_h, json.dumps({"type": "email", "email": "a@x.io", "token": "1" * 10_000}).encode())),
        ("a verification with no type", request("POST", "/auth/v1/verify", json_h, b'{"token_hash": "x"}')),
        ("a link of no code", request("GET", "/auth/v1/verify?type=signup&token=nothing&redirect_to=https://evil.example/")),
        ("an anonymous sign-up where none are taken", signup(b"{}")),
        ("a provider's sign-in with no provider", request("GET", "/auth/v1/authorize")),
        ("a sign-in at a provider that does not answer", request("GET", "/auth/v1/authorize?provider=nowhere&redirect_to=https://evil.example/")),
        ("a provider's sign-in with a challenge of 10 KB", request("GET", "/auth/v1/authorize?provider=nowhere&code_challenge_method=s256&code_challenge=" + "c" * 10_000)),
        ("a callback with no state", request("GET", "/auth/v1/callback?code=x")),
        ("a callback with an unsigned state", request("GET", "/auth/v1/callback?code=x&state=eyJhbGciOiJub25lIn0.eyJwcm92aWRlciI6Im5vd2hlcmUifQ.")),
        ("a callback posted with a form of 60 KB", request("POST", "/auth/v1/callback", {"content-type": "application/x-www-form-urlencoded"}, b"state=" + b"s" * 60_000)),
        ("an ID token of no provider", request("POST", "/auth/v1/token?grant_type=id_token", json_h, b'{"id_token": "x"}')),
        ("an unsigned ID token", request("POST", "/auth/v1/token?grant_type=id_token", json_h, b'{"provider": "nowhere", "id_token": "eyJhbGciOiJub25lIn0.e30."}')),
        ("an ID token of a provider not configured", request("POST", "/auth/v1/token?grant_type=id_token", json_h, b'{"provider": "google", "id_token": "a.b.c"}')),
        ("a passkey sign-in begun", request("POST", "/auth/v1/passkeys/authentication/options", json_h, b"{}")),
        ("a passkey sign-in answered with garbage", request("POST", "/auth/v1/passkeys/authentication/verify", json_h, json.dumps({"challenge_id": "00000000-0000-4000-8000-000000000000", "credential": {"id": "AAAA", "rawId": "AAAA", "type": "public-key", "response": {"clientDataJSON": "!!!", "authenticatorData": "AAAA", "signature": "AAAA", "userHandle": "AAAA"}}}).encode())),
        ("a passkey sign-in with a credential of 60 KB", request("POST", "/auth/v1/passkeys/authentication/verify", json_h, json.dumps({"challenge_id": "00000000-0000-4000-8000-000000000000", "credential": "c" * 60_000}).encode())),
        ("a passkey sign-in with a challenge that is no UUID", request("POST", "/auth/v1/passkeys/authentication/verify", json_h, b'{"challenge_id": "../x", "credential": {}}')),
        ("a passkey's registration with no token", request("POST", "/auth/v1/passkeys/registration/options", json_h, b"{}")),
        ("a passkey renamed with no token", request("PATCH", "/auth/v1/passkeys/00000000-0000-4000-8000-000000000000", json_h, b'{"friendly_name": "x"}')),
        ("a security key's answer with no token", request("POST", "/auth/v1/factors/00000000-0000-4000-8000-000000000000/verify", json_h, b'{"challenge_id": "x", "webauthn": {"type": "request", "credential_response": {}}}')),
    ]
    for case, data in cases:
        send(port, f"{name} auth: {case}", data, may_close=case == "sign-up with a body of 1 MB")
        healthy(name, port, f"after auth: {case}")
    # Wrong passwords for one address, many at once: refused (400, then 429), never a 5xx.
    send(port, f"{name} auth: sign-up", signup(b'{"email": "victim@x.io", "password": "right-password"}'), allowed={200})
    statuses = {}
    for _ in range(30):
        status, _, _ = raw(port, login(b'{"email": "victim@x.io", "password": "wrong-password"}'))
        statuses[status] = statuses.get(status, 0) + 1
    if any(s is None or s >= 500 for s in statuses):
        fail(f"{name} auth: wrong passwords got {statuses}")
    else:
        print(f"ok   {name} auth: 30 wrong passwords: {statuses}", flush=True)


# Edge Functions and webhooks.

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DENO = os.path.join(ROOT, "tests/js/node_modules/@deno/linux-x64-glibc/deno")


def functions_dir(work):
    """A functions-dir of tests/functions' template and runaway, for `serve`."""
    import shutil
    target = os.path.join(work, "functions")
    if not os.path.exists(target):
        for name in ("hello", "spin", "alloc", "flood"):
            shutil.copytree(os.path.join(ROOT, "tests/functions", name), os.path.join(target, name))
    return target


def functions_args(work):
    if not os.path.exists(DENO):
        raise SystemExit(f"Deno is not installed at {DENO}: run `npm ci` in tests/js (scripts/test does)")
    return ["--functions-dir", functions_dir(work), "--functions-deno", DENO, "--functions-timeout", "3",
            "--functions-cpu", "1", "--functions-memory", "64"]


def attack_functions(name, port):
    """Strangers at /functions/v1: no credentials, forged ones, names that are paths, the deploy
    endpoints without the service role, oversized or escaping deploys, and functions that loop,
    allocate and flood — each a 4xx or Supabase's own 5xx for a bound (546), in time, with the
    server serving others after."""
    anon = {"authorization": "Bearer " + token({"role": "abuse_anon"}), "content-type": "application/json"}
    service = {"authorization": "Bearer " + token({"role": "service_role"})}
    forged = {"authorization": "Bearer " + token({"role": "service_role"})[:-4] + "abcd"}
    cases = [
        ("a function with no credentials", request("POST", "/functions/v1/hello", {}, b"{}"), {401}),
        ("a function with a forged token", request("POST", "/functions/v1/hello", forged, b"{}"), {401}),
        ("a name that climbs", request("POST", "/functions/v1/..%2f..%2fetc%2fpasswd", anon, b"{}"), {404}),
        ("a name of dots", request("GET", "/functions/v1/%2e%2e/hello", anon), {404}),
        ("a name with a NUL", request("GET", "/functions/v1/hel%00lo", anon), {404}),
        ("the shared folder as a function", request("GET", "/functions/v1/_shared", anon), {404}),
        ("a name of 10 KB", request("GET", "/functions/v1/" + "a" * 10_000, anon), {404, 414, 431}),
        ("the deploy list as a visitor", request("GET", "/functions/v1/_admin/functions", anon), {403}),
        ("a deploy as a visitor", request("PUT", "/functions/v1/_admin/functions/evil", anon, b"Deno.serve(() => new Response('x'))"), {403}),
        ("a deploy with a forged token", request("PUT", "/functions/v1/_admin/functions/evil", forged, b"x"), {401}),
        ("a deploy that climbs", request("PUT", "/functions/v1/_admin/functions/hello/..%2f..%2fescape.ts", service, b"x"), {400}),
        ("a deploy of a hidden file", request("PUT", "/functions/v1/_admin/functions/hello/.env", service, b"X=1"), {400}),
        ("a deploy of 11 MB", request("PUT", "/functions/v1/_admin/functions/big", service, b"x" * (11 << 20)), {413}),
        ("a removal of a function that is not", request("DELETE", "/functions/v1/_admin/functions/nothing", service), {404}),
        ("a function that loops for ever", request("GET", "/functions/v1/spin?spin=1", anon), {546}),
        ("a function that allocates without end", request("GET", "/functions/v1/alloc", anon), {546}),
        ("a function that floods its log", request("GET", "/functions/v1/flood", anon), {200}),
    ]
    for case, data, allowed in cases:
        send(port, f"{name} functions: {case}", data, allowed=allowed, may_close=case == "a deploy of 11 MB")
        healthy(name, port, f"after functions: {case}")
    send(port, f"{name} functions: the template after all that", request("POST", "/functions/v1/hello", anon, b'{"name": "x"}'), allowed={200})
