"""s004's data and servers: the same rows in PocketBase's SQLite file and in rowgate's.

`make_data(quick)` draws the rows from a fixed seed: 100 organizations, 50 permissions, 500
users, posts10k and posts100k (a tenth with quick) with a 480-character description and
15-character random ids as PocketBase makes them. `start_pocketbase` makes PocketBase's
collections through its API (every rule public, request logs off) and bulk-loads the rows into
its file; `start_rowgate` makes the same tables in an SQLite file (real foreign keys with
ON DELETE CASCADE, JSON arrays) with rules giving everyone every operation, and one account.
`Requests` gives each scenario's requests in each server's own API. Also used by s004_cache.py.
"""

import json
import os
import random
import sqlite3

from ..peers import pocketbase_binary
from ..procs import free_port, run
from ..progress import Progress
from ..servers import call

PASSWORD = "1234567890"
JWT_SECRET = "s004-bench-secret-that-is-at-least-32-chars"
POSTS = {"posts10k": 10_000, "posts100k": 100_000}
TABLES = ("organizations", "permissions", "users", *POSTS, "posts_create")
LOREM = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et "
         "dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex "
         "ea commodo consequat. Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu "
         "fugiat nulla pariatur. Excepteur sint occaecat cupidatat non proident, sunt in culpa qui officia deserunt "
         "mollit anim id est laborum. Sed ut perspiciatis unde omnis iste natus")[:480]
ID = "id TEXT PRIMARY KEY NOT NULL DEFAULT ('r'||lower(hex(randomblob(7))))"
STAMPS = ("created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%fZ','now')), "
          "updated TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%fZ','now'))")
POST = (f"{ID}, title TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '', "
        "public BOOLEAN NOT NULL DEFAULT FALSE, type JSON NOT NULL DEFAULT '[]', "
        f"author TEXT REFERENCES users(id) ON DELETE CASCADE, {STAMPS}")
ROWGATE_SCHEMA = f"""
CREATE TABLE organizations ({ID}, name TEXT NOT NULL DEFAULT '', {STAMPS});
CREATE TABLE permissions ({ID}, name TEXT NOT NULL DEFAULT '', active BOOLEAN NOT NULL DEFAULT FALSE, {STAMPS});
CREATE TABLE users ({ID}, email TEXT NOT NULL DEFAULT '', emailVisibility BOOLEAN NOT NULL DEFAULT FALSE,
  verified BOOLEAN NOT NULL DEFAULT FALSE, name TEXT NOT NULL DEFAULT '', avatar TEXT NOT NULL DEFAULT '',
  organization TEXT REFERENCES organizations(id) ON DELETE CASCADE, permissions JSON NOT NULL DEFAULT '[]', {STAMPS});
CREATE TABLE posts10k ({POST});
CREATE TABLE posts100k ({POST});
CREATE TABLE posts_create ({POST});
"""


def make_data(quick):
    rnd = random.Random(4)

    def new_id():
        return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(15))

    orgs = [(new_id(), f"organizations{i}") for i in range(100)]
    perms = [(new_id(), f"permissions{i}", i % 2 == 0) for i in range(50)]
    users = [(new_id(), f"users{i}@example.com", f"users{i}", rnd.choice(orgs)[0],
              json.dumps([p[0] for p in rnd.sample(perms, 3)])) for i in range(500)]
    posts = {table: [(new_id(), f"{table}{i}", LOREM, i % 2 == 0, json.dumps(sorted(rnd.sample("abcd", 2))),
                      rnd.choice(users)[0]) for i in range(n // 10 if quick else n)] for table, n in POSTS.items()}
    return {"stamp": "2026-11-24 00:00:00.000Z", "orgs": orgs, "perms": perms, "users": users, "posts": posts}


def fill(db, data, who, user_cols="", user_values=lambda k: ()):
    """Bulk-loads the rows into an SQLite file whose tables exist (either server's); user_cols
    (", a, b") and user_values(k) add columns only one server's users have."""
    s = data["stamp"]
    c = sqlite3.connect(db)
    c.executemany("INSERT INTO organizations (id, name, created, updated) VALUES (?,?,?,?)",
                  [(i, n, s, s) for i, n in data["orgs"]])
    c.executemany("INSERT INTO permissions (id, name, active, created, updated) VALUES (?,?,?,?,?)",
                  [(i, n, a, s, s) for i, n, a in data["perms"]])
    extra = ",?" * len(user_values(0))
    c.executemany(f"INSERT INTO users (id, email, name, organization, permissions, created, updated{user_cols}) "
                  f"VALUES (?,?,?,?,?,?,?{extra})",
                  [(i, e, n, o, p, s, s, *user_values(k)) for k, (i, e, n, o, p) in enumerate(data["users"])])
    for table, rows in data["posts"].items():
        bar = Progress(f"data: {who} {table}", len(rows))
        for at in range(0, len(rows), 10_000):
            c.executemany(f"INSERT INTO {table} (id, title, description, public, type, author, created, updated) "
                          "VALUES (?,?,?,?,?,?,?,?)", [(*r, s, s) for r in rows[at:at + 10_000]])
            bar.update(min(at + 10_000, len(rows)))
    c.commit()
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()


def start_pocketbase(ctx, work, data):
    """PocketBase in a fresh pb_data with the collections and rows: (Server, its data file)."""
    binary = pocketbase_binary()
    ctx.result["versions"]["pocketbase"] = run([binary, "--version"], timeout=30).stdout.strip()
    pbdir = os.path.join(work, "pb_data")
    run([binary, "superuser", "upsert", "admin@example.com", "adminpass1234", "--dir", pbdir], timeout=60)
    port = free_port()
    pb = ctx.server("pocketbase", [binary, "serve", "--http", f"127.0.0.1:{port}", "--dir", pbdir], port)
    try:
        return pb, setup_pocketbase(pb, pbdir, data)
    except Exception:
        pb.stop()  # not left running beside rowgate's loads
        raise


def setup_pocketbase(pb, pbdir, data):
    """The collections through PocketBase's API, then the rows into its file; returns the file."""
    admin = {"Authorization": call(pb.base, "POST", "/api/collections/_superusers/auth-with-password",
                                   {"identity": "admin@example.com", "password": "adminpass1234"})["token"]}
    call(pb.base, "PATCH", "/api/settings", {"logs": {"maxDays": 0}}, admin)  # the seed ran with request logs off
    public = {r: "" for r in ("listRule", "viewRule", "createRule", "updateRule", "deleteRule")}
    stamps = [{"name": "created", "type": "autodate", "onCreate": True},
              {"name": "updated", "type": "autodate", "onCreate": True, "onUpdate": True}]

    def collection(name, fields):
        return call(pb.base, "POST", "/api/collections", {"name": name, "type": "base", **public,
                                                          "fields": [*fields, *stamps]}, admin)

    org = collection("organizations", [{"name": "name", "type": "text"}])
    perm = collection("permissions", [{"name": "name", "type": "text"}, {"name": "active", "type": "bool"}])
    users = call(pb.base, "GET", "/api/collections/users", None, admin)
    users["fields"] += [
        {"name": "organization", "type": "relation", "collectionId": org["id"], "maxSelect": 1, "cascadeDelete": True},
        {"name": "permissions", "type": "relation", "collectionId": perm["id"], "maxSelect": 99, "cascadeDelete": True}]
    call(pb.base, "PATCH", "/api/collections/users", {"fields": users["fields"], **public}, admin)
    for name in (*POSTS, "posts_create"):
        collection(name, [{"name": "title", "type": "text"}, {"name": "description", "type": "editor"},
                          {"name": "public", "type": "bool"},
                          {"name": "type", "type": "select", "maxSelect": 3, "values": ["a", "b", "c", "d"]},
                          {"name": "author", "type": "relation", "collectionId": "_pb_users_auth_", "maxSelect": 1,
                           "cascadeDelete": True}])
    # One account made through the API gives the bcrypt hash every seeded user shares (as the
    # seed proposes: hashing 500 passwords would only measure the set-up).
    call(pb.base, "POST", "/api/collections/users/records",
         {"email": "hash@example.com", "password": PASSWORD, "passwordConfirm": PASSWORD})
    db = os.path.join(pbdir, "data.db")
    c = sqlite3.connect(db)
    hashed = c.execute("SELECT password FROM users WHERE email = 'hash@example.com'").fetchone()[0]
    c.execute("DELETE FROM users")
    c.commit()
    c.close()
    rnd = random.Random(5)
    alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    fill(db, data, "PocketBase", ", password, tokenKey",
         lambda k: (hashed, "".join(rnd.choice(alnum) for _ in range(50))))
    return db


def rowgate_db(work, data, name="rowgate.db"):
    db = os.path.join(work, name)
    c = sqlite3.connect(db)
    c.executescript(ROWGATE_SCHEMA)
    c.close()
    fill(db, data, "rowgate")
    return db


def start_rowgate(ctx, work, data, synchronous):
    """rowgate on its SQLite file, every operation open to everyone, one account: (Server, its file)."""
    db, rules = rowgate_db(work, data), os.path.join(work, "rules.toml")
    with open(rules, "w") as f:
        for table in TABLES:
            f.write(f"[{table}]\n")
            for op in ("select", "insert", "update", "delete"):
                f.write(f'{op} = {{ anon = "true", authenticated = "true" }}\n')
    port = free_port()
    argv = [ctx.rowgate, "serve", "--db-uri", f"sqlite:{db}", "--db-rules", rules, "--accounts-enabled", "true",
            "--jwt-secret", JWT_SECRET, "--db-sqlite-synchronous", synchronous, "--server-host", "127.0.0.1",
            "--server-port", str(port)]
    rg = ctx.server("rowgate", argv, port)
    call(rg.base, "POST", "/auth/v1/signup", {"email": "users0@example.com", "password": PASSWORD})
    return rg, db


class Requests:
    """The requests of each scenario, in each server's own API (request-file lines for loadgen)."""

    def __init__(self, data, pb_token, rg_token):
        self.data, self.me = data, data["users"][0][0]
        self.auth = {"pocketbase": [["Authorization", pb_token]], "rowgate": [["Authorization", f"Bearer {rg_token}"]]}

    def list(self, who, table, count, n):
        if who == "pocketbase":
            q = "perPage=20" + ("" if count else "&skipTotal=1")
            return [{"method": "GET", "path": f"/api/collections/{table}/records?{q}", "headers": self.auth[who]}] * n
        h = self.auth[who] + ([["Prefer", "count=exact"]] if count else [])
        return [{"method": "GET", "path": f"/{table}?limit=20", "headers": h}] * n

    def getone(self, who, n):
        rnd = random.Random(6)
        ids = [rnd.choice(self.data["users"])[0] for _ in range(n)]
        if who == "pocketbase":
            return [{"method": "GET", "path": f"/api/collections/users/records/{i}", "headers": self.auth[who]}
                    for i in ids]
        h = self.auth[who] + [["Accept", "application/vnd.pgrst.object+json"]]
        return [{"method": "GET", "path": f"/users?id=eq.{i}", "headers": h} for i in ids]

    def filter(self, who, count, n):
        # PocketBase's default page is 30 rows; the same page on both.
        if who == "pocketbase":
            q = f"filter=author%3D%27{self.me}%27" + ("" if count else "&skipTotal=1")
            return [{"method": "GET", "path": f"/api/collections/posts100k/records?{q}", "headers": self.auth[who]}] * n
        h = self.auth[who] + ([["Prefer", "count=exact"]] if count else [])
        return [{"method": "GET", "path": f"/posts100k?author=eq.{self.me}&limit=30", "headers": h}] * n

    def create(self, who, n):
        rnd = random.Random(7)
        bodies = [json.dumps({"title": f"new{i}", "description": LOREM, "public": i % 2 == 0,
                              "type": sorted(rnd.sample("abcd", 2)), "author": rnd.choice(self.data["users"])[0]})
                  for i in range(n)]
        h = self.auth[who] + [["content-type", "application/json"]]
        if who == "pocketbase":
            return [{"method": "POST", "path": "/api/collections/posts_create/records", "headers": h, "body": b}
                    for b in bodies]
        # PocketBase answers a create with the record; so does this.
        h = h + [["Prefer", "return=representation"]]
        return [{"method": "POST", "path": "/posts_create", "headers": h, "body": b} for b in bodies]

    def delete(self, who, ids):
        if who == "pocketbase":
            return [{"method": "DELETE", "path": f"/api/collections/posts10k/records/{i}", "headers": self.auth[who]}
                    for i in ids]
        return [{"method": "DELETE", "path": f"/posts10k?id=eq.{i}", "headers": self.auth[who]} for i in ids]

    def login(self, who, n):
        h = [["content-type", "application/json"]]
        if who == "pocketbase":
            body = json.dumps({"identity": "users0@example.com", "password": PASSWORD})
            return [{"method": "POST", "path": "/api/collections/users/auth-with-password", "headers": h,
                     "body": body}] * n
        body = json.dumps({"email": "users0@example.com", "password": PASSWORD})
        return [{"method": "POST", "path": "/auth/v1/token?grant_type=password", "headers": h, "body": body}] * n
