//! Edge Functions at `/functions/v1` (docs/functions.md): Supabase's template and functions
//! written for its runtime, run by Deno (tests/js installs it from npm), called as Supabase's
//! gateway is — verified callers, sub-paths, any method, streamed answers — and bounded: a
//! function that throws, loops, allocates without end, floods its log or will not start is
//! answered as Supabase answers it, and the others go on.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::accounts::token_of;
use crate::support::{send_to, start_server, JWT_SECRET};

/// The Deno that tests/js installs.
pub fn deno() -> PathBuf {
    let deno = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js/node_modules/@deno/linux-x64-glibc/deno");
    assert!(deno.is_file(), "Deno is not installed: run `npm ci` in tests/js (scripts/test does)");
    deno
}

/// A Supabase project directory holding tests/functions as `supabase/functions`, with
/// `config_toml` as `supabase/config.toml`; the functions' directory.
pub fn project(config_toml: &str) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let functions = root.path().join("supabase/functions");
    copy(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/functions"), &functions);
    std::fs::write(root.path().join("supabase/config.toml"), config_toml).unwrap();
    (root, functions)
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().map(Result::unwrap) {
        let target = to.join(entry.file_name());
        match entry.file_type().unwrap().is_dir() {
            true => copy(&entry.path(), &target),
            false => drop(std::fs::copy(entry.path(), target).unwrap()),
        }
    }
}

/// A server on an SQLite file serving `functions`.
fn serve(functions: &Path, dir: &Path, tune: impl FnOnce(&mut rowgate::config::ServeArgs)) -> String {
    let mut args = rowgate::config::ServeArgs {
        db_uri: Some(format!("sqlite:{}", dir.join("app.db").display())),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(0),
        jwt_secret: Some(JWT_SECRET.into()),
        ..Default::default()
    };
    args.platform.functions_dir = Some(functions.to_owned());
    args.platform.functions_deno = Some(deno());
    tune(&mut args);
    start_server(args)
}

fn bearer(role: &str) -> String {
    format!("Bearer {}", token_of(role))
}

#[test]
fn supabase_functions_run_as_its_gateway_calls_them() {
    let (root, functions) = project("[functions.echo]\nverify_jwt = false\n");
    std::fs::write(functions.join(".env"), "MY_SECRET=\"s3cr3t\"\n# a comment\n").unwrap();
    let base = serve(&functions, root.path(), |_| {});
    let anon = bearer("anon");
    // The template, as supabase-js's functions.invoke sends it.
    let r = send_to(
        &base,
        "POST",
        "/functions/v1/hello",
        &[
            ("authorization", &anon),
            ("content-type", "application/json"),
            ("x-client-info", "supabase-js/2.119.1"),
        ],
        Some(r#"{"name":"Functions"}"#),
    );
    assert_eq!((r.status, r.json()), (200, json!({"message": "Hello Functions!"})));
    assert_eq!(r.header("content-type"), Some("application/json"));
    // verify_jwt: no credentials, or a bad one, is refused before the function runs.
    let r = send_to(&base, "POST", "/functions/v1/hello", &[], Some(r#"{"name":"x"}"#));
    assert_eq!((r.status, r.json()), (401, json!({"msg": "Error: Missing authorization header"})));
    let r =
        send_to(&base, "POST", "/functions/v1/hello", &[("authorization", "Bearer not.a.jwt")], Some("{}"));
    assert_eq!((r.status, r.json()), (401, json!({"msg": "Invalid JWT"})));
    let forged = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"role": "service_role", "exp": 4_102_444_800u64}),
        &jsonwebtoken::EncodingKey::from_secret(b"another secret, not the server's, long enough"),
    )
    .unwrap();
    let r = send_to(
        &base,
        "POST",
        "/functions/v1/hello",
        &[("authorization", &format!("Bearer {forged}"))],
        Some("{}"),
    );
    assert_eq!((r.status, r.json()), (401, json!({"msg": "Invalid JWT"})));
    // An unknown function, and names that are none.
    for path in
        ["/functions/v1/nope", "/functions/v1/_shared/cors.ts", "/functions/v1/..%2Fhello", "/functions/v1/"]
    {
        let r = send_to(&base, "POST", path, &[("authorization", &anon)], Some("{}"));
        assert_eq!(
            (r.status, r.json()),
            (404, json!({"code": "NOT_FOUND", "message": "Requested function was not found"})),
            "{path}"
        );
    }
    // verify_jwt = false in config.toml; any method and sub-path; the path below /functions/v1.
    let r = send_to(&base, "PUT", "/functions/v1/echo/a/b?x=1&y=%20", &[("apikey", "k")], Some("sent"));
    assert_eq!(
        (r.status, r.json()),
        (
            200,
            json!({"method": "PUT", "path": "/echo/a/b", "search": "?x=1&y=%20", "authorization": null, "apikey": "k", "body": "sent"})
        )
    );
    let r = send_to(&base, "GET", "/functions/v1/echo", &[], None);
    assert_eq!(
        (r.status, r.json()["method"].clone(), r.json()["path"].clone()),
        (200, json!("GET"), json!("/echo"))
    );
    // The environment: the project's URL and keys, the .env's secrets, nothing of rowgate's.
    let r = send_to(&base, "GET", "/functions/v1/env", &[("authorization", &anon)], None);
    let env = r.json();
    assert_eq!(env["url"], json!(base));
    assert_eq!(env["secret"], json!("s3cr3t"));
    let claims = |key: &serde_json::Value| {
        let mut v = jsonwebtoken::Validation::default();
        v.required_spec_claims.clear();
        v.validate_exp = false;
        jsonwebtoken::decode::<serde_json::Value>(
            key.as_str().unwrap(),
            &jsonwebtoken::DecodingKey::from_secret(JWT_SECRET.as_bytes()),
            &v,
        )
        .unwrap()
        .claims["role"]
            .clone()
    };
    assert_eq!((claims(&env["anon"]), claims(&env["service"])), (json!("anon"), json!("service_role")));
    let names: Vec<&str> = env["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(names.iter().all(|n| !n.starts_with("ROWGATE_") && !n.starts_with("CARGO")), "{names:?}");
    // A body past server-max-body-size is refused before the function sees it.
    let big = "x".repeat(10 * 1024 * 1024 + 1);
    let r = send_to(&base, "PUT", "/functions/v1/echo", &[], Some(&big));
    assert_eq!(
        (r.status, r.json()),
        (413, json!({"code": "PAYLOAD_TOO_LARGE", "message": "The request body is too large"}))
    );
    // So is one sent in chunks, once it passes the limit; the function's process goes on.
    let chunked = std::thread::spawn({
        let base = base.clone();
        move || {
            let chunks = (0..11).map(|_| Ok::<_, std::io::Error>(vec![b'x'; 1 << 20]));
            reqwest::blocking::Client::new()
                .put(format!("{base}/functions/v1/echo"))
                .body(reqwest::blocking::Body::new(std::io::Cursor::new(
                    chunks.flat_map(|c| c.unwrap()).collect::<Vec<u8>>(),
                )))
                .header("transfer-encoding", "chunked")
                .send()
                .map(|r| r.status().as_u16())
        }
    });
    let status = chunked.join().unwrap();
    assert!(matches!(status, Ok(413) | Err(_)), "{status:?}");
    let r = send_to(&base, "GET", "/functions/v1/echo/again", &[], None);
    assert_eq!((r.status, r.json()["path"].clone()), (200, json!("/echo/again")));
    let metrics = send_to(&base, "GET", "/rowgate/metrics", &[], None).body;
    assert!(metrics.contains("rowgate_functions_boots_total{function=\"echo\"} 1\n"), "{metrics}");
    // A streamed answer arrives in its chunks.
    let started = Instant::now();
    let r = send_to(&base, "GET", "/functions/v1/stream", &[("authorization", &anon)], None);
    assert_eq!((r.status, r.body.as_str()), (200, "chunk 1\nchunk 2\nchunk 3\nchunk 4\nchunk 5\n"));
    assert!(started.elapsed() >= Duration::from_millis(450));
    // One whose process ends on every request: 500, and its process is not started again more
    // often than every quarter of a second however it is called.
    let started = Instant::now();
    let mut statuses = std::collections::BTreeSet::new();
    for _ in 0..20 {
        statuses
            .insert(send_to(&base, "GET", "/functions/v1/exits", &[("authorization", &anon)], None).status);
    }
    let metrics = send_to(&base, "GET", "/rowgate/metrics", &[], None).body;
    let boots: u128 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("rowgate_functions_boots_total{function=\"exits\"} "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(statuses.is_subset(&[500, 503].into()), "{statuses:?}");
    assert!(
        boots >= 1 && boots <= started.elapsed().as_millis() / 250 + 1,
        "{boots} processes in {:?}",
        started.elapsed()
    );
    // A function that throws answers Deno's 500.
    let r = send_to(&base, "GET", "/functions/v1/throws", &[("authorization", &anon)], None);
    assert_eq!((r.status, r.body.as_str()), (500, "Internal Server Error"));
    // One that cannot start: Supabase's BOOT_ERROR.
    for _ in 0..3 {
        let r = send_to(&base, "GET", "/functions/v1/broken", &[("authorization", &anon)], None);
        assert_eq!(
            (r.status, r.json()),
            (503, json!({"code": "BOOT_ERROR", "message": "Worker failed to boot (please check logs)"}))
        );
    }
    // Tried once: the calls after it within a few seconds start no process.
    let metrics = send_to(&base, "GET", "/rowgate/metrics", &[], None).body;
    assert!(
        metrics.contains("rowgate_functions_invocations_total{function=\"broken\",outcome=\"boot_error\"} 3"),
        "{metrics}"
    );
    assert!(metrics.contains("rowgate_functions_boot_failures_total{function=\"broken\"} 1"), "{metrics}");
    drop(root);
}

#[test]
fn a_runaway_function_is_stopped_without_slowing_the_others() {
    let (root, functions) = project("");
    let base = serve(&functions, root.path(), |a| {
        a.platform.functions_timeout = Some(3);
        a.platform.functions_cpu = Some(1.0);
        a.platform.functions_memory = Some(64);
    });
    let anon = bearer("anon");
    let limit = json!({"code": "WORKER_LIMIT", "message": "Worker failed to respond due to a resource limit (please check logs)"});
    let r = send_to(&base, "GET", "/functions/v1/spin", &[("authorization", &anon)], None);
    assert_eq!((r.status, r.body.as_str()), (200, "fine"));
    let spinning = {
        let (base, anon) = (base.clone(), anon.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let r = send_to(&base, "GET", "/functions/v1/spin?spin=1", &[("authorization", &anon)], None);
            (r.status, r.json(), started.elapsed())
        })
    };
    // Meanwhile another function answers as fast as ever.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        let started = Instant::now();
        let r = send_to(
            &base,
            "POST",
            "/functions/v1/hello",
            &[("authorization", &anon)],
            Some(r#"{"name":"x"}"#),
        );
        assert_eq!(r.status, 200);
        assert!(started.elapsed() < Duration::from_millis(1500), "{:?}", started.elapsed());
    }
    // Stopped by its CPU time, before its wall time.
    let (status, body, took) = spinning.join().unwrap();
    assert_eq!((status, body), (546, limit.clone()));
    assert!(took >= Duration::from_secs(1) && took < Duration::from_millis(2900), "{took:?}");
    // One that waits without using the CPU meets its wall time.
    let started = Instant::now();
    let r = send_to(&base, "GET", "/functions/v1/slow", &[("authorization", &anon)], None);
    assert_eq!((r.status, r.json()), (546, limit.clone()));
    assert!(started.elapsed() >= Duration::from_secs(3) && started.elapsed() < Duration::from_secs(6));
    // The next invocation gets a new process.
    let r = send_to(&base, "GET", "/functions/v1/spin", &[("authorization", &anon)], None);
    assert_eq!((r.status, r.body.as_str()), (200, "fine"));
    // A heap past functions-memory.
    let r = send_to(&base, "GET", "/functions/v1/alloc", &[("authorization", &anon)], None);
    assert_eq!((r.status, r.json()), (546, limit));
    // A flood of log lines costs a counter.
    let r = send_to(&base, "GET", "/functions/v1/flood", &[("authorization", &anon)], None);
    assert_eq!((r.status, r.body.as_str()), (200, "flooded"));
    let metrics = send_to(&base, "GET", "/rowgate/metrics", &[], None).body;
    let dropped = metrics
        .lines()
        .find_map(|l| l.strip_prefix("rowgate_functions_log_lines_dropped_total{function=\"flood\"} "))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    // Past the first second's hundred lines, the rest are dropped (the host may take a few seconds).
    assert!(dropped > 15_000, "{dropped} lines dropped");
    assert!(
        metrics.contains("rowgate_functions_invocations_total{function=\"spin\",outcome=\"limit\"} 1"),
        "{metrics}"
    );
    drop(root);
}

#[test]
fn functions_are_deployed_over_http_without_a_restart() {
    let (root, functions) = project("");
    let base = serve(&functions, root.path(), |_| {});
    let service = bearer("service_role");
    let anon = bearer("anon");
    let deploy = |auth: &str, path: &str, source: &str| {
        send_to(
            &base,
            "PUT",
            &format!("/functions/v1/_admin/functions/{path}"),
            &[("authorization", auth)],
            Some(source),
        )
    };
    let greet = r#"import { greeting } from "../_shared/greeting.ts"
Deno.serve(() => new Response(greeting))"#;
    assert_eq!(deploy(&anon, "greet", greet).status, 403);
    let r = deploy(&service, "_shared/greeting.ts", r#"export const greeting = "hello""#);
    assert_eq!((r.status, r.json()), (201, json!({"slug": "_shared", "path": "_shared/greeting.ts"})));
    let r = deploy(&service, "greet", greet);
    assert_eq!((r.status, r.json()), (201, json!({"slug": "greet", "path": "greet/index.ts"})));
    let call = || send_to(&base, "GET", "/functions/v1/greet", &[("authorization", &anon)], None);
    assert_eq!(call().body, "hello");
    // A new version runs from the next invocation on (a shared file's change too).
    assert_eq!(
        deploy(&service, "_shared/greeting.ts", r#"export const greeting = "hello again""#).status,
        201
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while call().body != "hello again" {
        assert!(Instant::now() < deadline, "the new version did not run");
        std::thread::sleep(Duration::from_millis(200));
    }
    let r = send_to(&base, "GET", "/functions/v1/_admin/functions", &[("authorization", &service)], None);
    let listed = r.json();
    assert!(
        listed.as_array().unwrap().iter().any(|f| f["slug"] == "greet" && f["verify_jwt"] == true),
        "{listed}"
    );
    for bad in ["a.b", "_private", "_shared/.hidden", "greet/a%2Fb", &"x".repeat(65)] {
        assert_eq!(deploy(&service, bad, "x").status, 400, "{bad}");
    }
    let r = send_to(
        &base,
        "DELETE",
        "/functions/v1/_admin/functions/greet",
        &[("authorization", &service)],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(call().status, 404);
    assert!(!functions.join("greet").exists());
    drop(root);
}

#[test]
fn supabase_js_invokes_functions_that_read_the_database_as_their_caller() {
    let (superuser, authenticator) = crate::webhooks::installed_database("functions_rls");
    crate::support::sql_at(
        &superuser,
        "CREATE TABLE public.todos (id serial PRIMARY KEY, owner uuid NOT NULL DEFAULT auth.uid(), task text NOT NULL);
         ALTER TABLE public.todos ENABLE ROW LEVEL SECURITY;
         CREATE POLICY own ON public.todos FOR ALL TO authenticated USING (owner = auth.uid());
         INSERT INTO public.todos (owner, task) VALUES
           ('00000000-0000-0000-0000-00000000000a', 'alice: write docs'),
           ('00000000-0000-0000-0000-00000000000a', 'alice: buy tea'),
           ('00000000-0000-0000-0000-00000000000b', 'bob: fix bike');",
    );
    let (root, functions) = project("");
    let mut args = rowgate::config::ServeArgs {
        db_uri: Some(authenticator),
        db_schemas: Some("public".into()),
        db_anon_role: Some("anon".into()),
        server_host: Some("127.0.0.1".into()),
        server_port: Some(0),
        jwt_secret: Some(JWT_SECRET.into()),
        ..Default::default()
    };
    args.platform.functions_dir = Some(functions);
    args.platform.functions_deno = Some(deno());
    let base = start_server(args);
    let user = |sub: &str| {
        crate::storage::token(
            json!({"role": "authenticated", "sub": sub, "aud": "authenticated", "exp": 4_102_444_800u64}),
        )
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    let out = std::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", "functions.test.mjs"])
        .current_dir(&dir)
        .env("ROWGATE_URL", &base)
        .env("ANON_KEY", token_of("anon"))
        .env("ALICE_TOKEN", user("00000000-0000-0000-0000-00000000000a"))
        .env("BOB_TOKEN", user("00000000-0000-0000-0000-00000000000b"))
        .output()
        .expect("node is needed for the supabase-js tests");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "supabase-js's functions tests failed:\n{report}");
    drop(root);
}
