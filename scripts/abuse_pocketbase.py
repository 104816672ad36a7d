"""PocketBase's API at /api/ attacked (scripts/abuse runs it on both backends): filters nested,
wide, escaping and of every operator at once, sorts, pages, fields and expands past any
sense, bodies that are not objects, ids that are paths, forged and bare tokens, and the
`users` collection's sign-in and sign-up with absurd values, superusers' sign-in guessed and
their refresh forged, realtime subscriptions past every bound, collections made by strangers
or with names, fields and rules that inject. Each answer must be the status
listed, in PocketBase's error body `{status, message, data}` when it is an error, in time,
with the server serving others after."""

import json
import urllib.parse

from abuse_common import fail, healthy, request, token
from abuse_services import body_of, send


def q(**params):
    return "/api/collections/items/records?" + urllib.parse.urlencode(params)


def attack_pocketbase(name, port):
    json_h = {"content-type": "application/json"}
    forged = {"authorization": token({"role": "service_role"})[:-4] + "abcd"}
    deep = "(" * 70 + "id = 1" + ")" * 70
    wide = " && ".join(f"n > {i}" for i in range(800))
    cases = [
        ("a filter 70 groups deep", request("GET", q(filter=deep)), {400}),
        ("a filter of 800 terms", request("GET", q(filter=wide, perPage=1)), {200}),
        ("a filter that does not parse", request("GET", q(filter="(id = 1 && ")), {400}),
        ("a filter of an unknown field", request("GET", q(filter="nosuch = 1")), {400}),
        ("a filter with quotes and a NUL", request("GET", q(filter="body = 'a\\'b\x00c' || body ~ '%%_\\\\'")), {200, 400}),
        ("a filter that injects", request("GET", q(filter="body = '1' ; DROP TABLE items; --'")), {400}),
        ("a filter naming @request as a visitor", request("GET", q(filter="@request.auth.id = ''")), {403}),
        ("a filter of every operator", request("GET", q(filter="n ?= 1 || n ?!~ 'x' || body !~ 'a' || n >= '2'")), {200, 400}),
        ("a function in a filter", request("GET", q(filter="geoDistance(1, 2, 3, 4) < 5")), {400}),
        ("a number past f64", request("GET", q(filter="n > 1" + "0" * 400)), {200, 400}),
        ("a sort of 2,000 terms", request("GET", q(sort=",".join(["-n"] * 2000), perPage=1)), {200, 400}),
        ("a sort of nothing", request("GET", q(sort=",,,")), {400}),
        ("a page past i64", request("GET", q(page="9" * 30)), {400}),
        ("a page at i64's end", request("GET", q(page=str(2**63 - 1), perPage=1000)), {200}),
        ("fields of 500 excerpts", request("GET", q(fields=",".join(["body:excerpt(99999999)"] * 500), perPage=1)), {200, 400}),
        ("an excerpt past usize", request("GET", q(fields="body:excerpt(" + "9" * 40 + ")")), {400}),
        ("expand of 1,000 names", request("GET", q(expand=",".join(f"x{i}.y.z" for i in range(1000)), perPage=1)), {200}),
        ("an id that climbs", request("GET", "/api/collections/items/records/..%2f..%2fetc%2fpasswd"), {404}),
        ("an id with a NUL", request("GET", "/api/collections/items/records/1%00"), {404}),
        ("an id not UTF-8", request("GET", "/api/collections/items/records/%ff%fe"), {404}),
        ("a collection that climbs", request("GET", "/api/collections/..%2fitems/records"), {404}),
        ("a body that is an array", request("POST", "/api/collections/items/records", json_h, b"[1, 2]"), {400}),
        ("a body that is not JSON", request("POST", "/api/collections/items/records", json_h, b"{nope"), {400}),
        ("a body 100,000 deep", request("POST", "/api/collections/items/records", json_h, b"[" * 100_000 + b"]" * 100_000), {400}),
        ("a body of 200,000 keys", request("POST", "/api/collections/items/records", json_h,
                                           b"{" + b",".join(b'"k%d":%d' % (i, i) for i in range(200_000)) + b"}"), {200, 400}),
        ("an update of a missing record", request("PATCH", "/api/collections/items/records/999999999", json_h, b'{"n": 1}'), {404}),
        ("a forged token", request("GET", q(perPage=1), forged), {200}),
        ("a bare token of garbage", request("GET", q(perPage=1), {"authorization": "a.b.c"}), {200}),
        ("a refresh with a forged token", request("POST", "/api/collections/users/auth-refresh", forged), {401}),
        ("a refresh with a service key", request("POST", "/api/collections/users/auth-refresh",
                                                 {"authorization": token({"role": "service_role"})}), {401}),
        ("a sign-in of 1 MB", request("POST", "/api/collections/users/auth-with-password", json_h,
                                      json.dumps({"identity": "a" * (1 << 20), "password": "x"}).encode()), {400, 413}),
        ("a sign-in that is not JSON", request("POST", "/api/collections/users/auth-with-password", json_h, b"\xff"), {400}),
        ("a sign-up with a password of 100 KB", request("POST", "/api/collections/users/records", json_h,
                                                        json.dumps({"email": "x@example.com", "password": "p" * 100_000,
                                                                    "passwordConfirm": "p" * 100_000}).encode()), {400}),
        ("another user's record", request("GET", "/api/collections/users/records/" + "0" * 36), {404}),
        ("a superuser refresh with a service key", request("POST", "/api/collections/_superusers/auth-refresh",
                                                           {"authorization": token({"role": "service_role"})}), {401}),
        ("a superuser refresh with claims made up", request("POST", "/api/collections/_superusers/auth-refresh",
                                                            {"authorization": token({"role": "service_role", "type": "auth",
                                                             "collectionId": "pbc_3142635823", "id": "x",
                                                             "email": "nobody@example.com"})}), {401}),
        ("a superuser refresh with a forged token", request("POST", "/api/collections/_superusers/auth-refresh", forged), {401}),
        ("a superuser sign-in of 1 MB", request("POST", "/api/collections/_superusers/auth-with-password", json_h,
                                                json.dumps({"identity": "a@b", "password": "p" * (1 << 20)}).encode()), {400, 413, 429}),
    ] + [
        # Guessing is held off after 10 failures from one address (the dashboard's own limit).
        (f"a superuser's password guessed ({n})", request("POST", "/api/collections/_superusers/auth-with-password", json_h,
                                                         json.dumps({"identity": "admin@example.com", "password": f"guess-{n}"}).encode()),
         {400, 429} if n < 11 else {429})
        for n in range(12)
    ] + [
        ("an unknown route", request("DELETE", "/api/collections"), {404}),
        ("realtime subscriptions of a client made up", request("POST", "/api/realtime", json_h,
                                                              json.dumps({"clientId": "x" * 40, "subscriptions": ["items/*"]}).encode()), {404}),
        ("realtime subscriptions, 1,001 of them", request("POST", "/api/realtime", json_h,
                                                         json.dumps({"clientId": "x", "subscriptions": ["items/*"] * 1001}).encode()), {400}),
        ("a realtime subscription of 1 MB", request("POST", "/api/realtime", json_h,
                                                   json.dumps({"clientId": "x", "subscriptions": ["i" * (1 << 20)]}).encode()), {400, 413}),
        ("realtime subscriptions that are no list", request("POST", "/api/realtime", json_h, b'{"clientId": "x", "subscriptions": {"a": 1}}'), {400}),
        ("a realtime subscription of two lines", request("POST", "/api/realtime", json_h,
                                                        json.dumps({"clientId": "x", "subscriptions": ["items/*\ndata:{}"]}).encode()), {400, 404}),
        ("realtime subscriptions that are not JSON", request("POST", "/api/realtime", json_h, b"\xff\xfe"), {400}),
    ] + collections_attacked(json_h)
    for case, data, allowed in cases:
        label = f"{name} pocketbase: {case}"
        status, text = send(port, label, data, allowed=allowed)
        if status is not None and status >= 400:
            try:
                body = json.loads(body_of(text))
                if set(body) != {"status", "message", "data"} or body["status"] != status:
                    fail(f"{label}: not PocketBase's error body: {body_of(text)[:200]}")
            except ValueError:
                fail(f"{label}: not JSON: {body_of(text)[:200]}")
        healthy(name, port, f"after pocketbase: {case}")


def collections_attacked(json_h):
    """The collections API: made by a visitor or a user, and by a superuser with names, fields and
    rules that would be SQL or the rules' language if they were not checked, quoted and bound."""
    root = {"authorization": token({"role": "service_role"}), **json_h}
    user = {"authorization": token({"role": "authenticated", "sub": "u1"}), **json_h}

    def make(body, headers=root):
        return request("POST", "/api/collections", headers, json.dumps(body).encode())

    injected = "body = '1\"); DROP TABLE items; --' || body = \"x',y.eq.z)\""
    return [
        ("a collection made by a visitor", make({"name": "v"}, json_h), {401}),
        ("a collection made by a user", make({"name": "v"}, user), {403}),
        ("the collections listed by a user", request("GET", "/api/collections", user), {403}),
        ("a collection named to inject", make({"name": 'x"; DROP TABLE items; --'}), {400}),
        ("a field named to inject", make({"name": "f1", "fields": [{"name": 'a" text); DROP TABLE items; --', "type": "text"}]}), {400}),
        ("a collection of 3,000 fields", make({"name": "wide", "fields": [{"name": f"f{i}", "type": "text"} for i in range(3000)]}), {400}),
        ("a collection named as a table", make({"name": "ITEMS"}), {400}),
        ("a relation to no collection", make({"name": "r1", "fields": [{"name": "r", "type": "relation", "collectionId": "../items"}]}), {400}),
        ("a rule whose values inject", make({"name": "ruled_injection", "fields": [{"name": "body", "type": "text"}],
                                              "listRule": injected, "viewRule": injected}), {200}),
        ("that collection dropped", request("DELETE", "/api/collections/ruled_injection", root), {204}),
        ("a rule matching a claim as a pattern", make({"name": "r2", "fields": [{"name": "body", "type": "text"}],
                                                      "listRule": "body ~ @request.auth.id"}), {400}),
        ("a rule with a text read as a claim", make({"name": "r3", "fields": [{"name": "body", "type": "text"}],
                                                    "listRule": "body = '@jwt.sub'"}), {400}),
        ("a rule with a time in it", make({"name": "r4", "fields": [{"name": "body", "type": "text"}],
                                          "listRule": "body > @now"}), {400}),
        ("a rule 70 groups deep", make({"name": "r5", "fields": [{"name": "body", "type": "text"}],
                                        "listRule": "(" * 70 + "body = 'x'" + ")" * 70}), {400}),
        ("a table made in SQL changed", request("PATCH", "/api/collections/items", root, b'{"listRule": ""}'), {400}),
        ("a table made in SQL dropped", request("DELETE", "/api/collections/items", root), {400}),
        ("collections filtered by nonsense", request("GET", "/api/collections?filter=" + urllib.parse.quote("nope > 1 ||"), root), {400}),
        ("a collection body that is a list", request("POST", "/api/collections", root, b"[]"), {400}),
    ]
