"""What scripts/abuse's attacks share: how a request is sent as raw bytes, how a token is
signed, how a failure is recorded."""

import json
import socket
import time

HANG = 5.0
SECRET = "abuse-run-secret-abuse-run-secret-0123"
FAILURES = []


def fail(what):
    FAILURES.append(what)
    print(f"FAIL {what}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raw(port, data, timeout=HANG + 1):
    """Sends `data` on a new connection and reads the answer: (status or None, seconds, text)."""
    started = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server answered (413, 431) and closed before reading everything
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                length = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if length and len(body) >= int(length[0].split(b":")[1]):
                    break
    finally:
        s.close()
    elapsed = time.monotonic() - started
    status = None
    if out.startswith(b"HTTP/1.1 "):
        status = int(out[9:12])
    return status, elapsed, out.decode("utf-8", "replace")


def request(method, path, headers=None, body=b""):
    head = f"{method} {path} HTTP/1.1\r\nhost: abuse\r\nconnection: close\r\n"
    for k, v in (headers or {}).items():
        head += f"{k}: {v}\r\n"
    if body or method in ("POST", "PATCH", "PUT"):
        head += f"content-length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def token(claims):
    """An HS256 token (built here so that the script needs nothing beyond Python)."""
    import base64
    import hashlib
    import hmac

    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=")

    signing = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + b"." + b64(json.dumps(claims).encode())
    sig = hmac.new(SECRET.encode(), signing, hashlib.sha256).digest()
    return (signing + b"." + b64(sig)).decode()


def healthy(name, port, when):
    status, elapsed, text = raw(port, request("GET", "/items?select=id&id=eq.1"))
    if status != 200 or elapsed > 1.0:
        fail(f"{name}: not serving {when}: {status} in {elapsed:.1f} s {text[-200:]}")
