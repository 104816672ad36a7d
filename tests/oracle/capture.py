#!/usr/bin/env python3
"""Send every request of requests.txt to a server and write a JSONL transcript.

Usage:
    capture.py [--base http://127.0.0.1:3100] [--requests requests.txt] [--out FILE]

requests.txt format, one request per line:
    METHOD<TAB>PATH?QUERY[<TAB>Header: value]...[<TAB><BODY]
A part starting with '<' is the request body (the rest of that part, UTF-8); with '<<',
each two-character sequence backslash-n in it stands for a newline (for CSV bodies).
Blank lines and lines starting with '#' are ignored.  The path is sent
verbatim except that spaces, control characters and non-ASCII characters are
percent-encoded (UTF-8).  A header may be repeated (e.g. two Prefer headers);
they are sent in the order given.  No Accept header is sent unless listed.

Each output line is a JSON object:
    n, line            request number / line number in requests.txt
    method, path       as in requests.txt
    sent_path          the exact request target sent
    request_headers    list of [name, value]
    request_body       the body sent, if any
    status, reason
    headers            all response headers except Date, names lower-cased,
                       repeated headers joined with ", "
    body               response body decoded as UTF-8 (or null if invalid)
    body_b64           base64 of the body, only when it is not valid UTF-8

Python 3 standard library only.
"""

import argparse
import base64
import http.client
import json
import os
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))


def encode_target(path):
    out = []
    for ch in path:
        if ch == " " or ord(ch) < 0x21 or ord(ch) >= 0x7F:
            out.append(urllib.parse.quote(ch, safe=""))
        else:
            out.append(ch)
    return "".join(out)


def parse_requests(fname):
    reqs = []
    with open(fname, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split("\t")
            method, path = parts[0].strip(), parts[1]
            headers = []
            body = None
            for h in parts[2:]:
                if h.startswith("<<"):
                    body = h[2:].replace("\\n", "\n")
                    continue
                if h.startswith("<"):
                    body = h[1:]
                    continue
                name, _, value = h.partition(":")
                headers.append([name.strip(), value.strip()])
            req = {"line": lineno, "method": method, "path": path,
                   "request_headers": headers}
            if body is not None:
                req["request_body"] = body
            reqs.append(req)
    return reqs


def send(base, req, timeout):
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    prefix = u.path.rstrip("/")
    target = prefix + encode_target(req["path"])
    try:
        conn.putrequest(req["method"], target, skip_accept_encoding=True)
        for name, value in req["request_headers"]:
            conn.putheader(name, value)
        body = req.get("request_body")
        data = body.encode("utf-8") if body is not None else None
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        resp = conn.getresponse()
        body = resp.read()
        headers = {}
        for name, value in resp.getheaders():
            k = name.lower()
            if k == "date":
                continue
            headers[k] = headers[k] + ", " + value if k in headers else value
        rec = {"sent_path": target, "status": resp.status, "reason": resp.reason,
               "headers": headers}
        try:
            rec["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            rec["body"] = None
            rec["body_b64"] = base64.b64encode(body).decode("ascii")
        return rec
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="http://127.0.0.1:3100")
    ap.add_argument("--requests", default=os.path.join(HERE, "requests.txt"))
    ap.add_argument("--out", default="-")
    ap.add_argument("--timeout", type=float, default=30)
    args = ap.parse_args()

    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    for n, req in enumerate(parse_requests(args.requests), 1):
        rec = {"n": n, "line": req["line"], "method": req["method"],
               "path": req["path"], "request_headers": req["request_headers"]}
        if "request_body" in req:
            rec["request_body"] = req["request_body"]
        try:
            rec.update(send(args.base, req, args.timeout))
        except Exception as e:  # keep going; record the failure
            rec["error"] = "%s: %s" % (type(e).__name__, e)
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
