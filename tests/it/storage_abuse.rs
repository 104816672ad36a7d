//! Storage as a stranger tries it, on both backends: signing an upload URL for someone else's
//! object, uploading where one may not, learning which objects exist, and what such attempts
//! cost the server (bytes taken, files written).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::storage::{call_on, files_in, setup, token, RULES};
use crate::support::send_to;

const ALICE: &str = "6f1d6c6e-1111-4c49-9c47-5e5d3b2a1a11";
const BOB: &str = "7e2d6c6e-2222-4c49-9c47-5e5d3b2a1a22";

/// A storage server on PostgreSQL and its `storage-dir`.
fn postgres() -> &'static (String, PathBuf) {
    static SERVER: OnceLock<(String, PathBuf)> = OnceLock::new();
    SERVER.get_or_init(|| {
        setup();
        let dir = tempfile::tempdir().unwrap().keep().join("storage");
        (crate::storage::serve(&dir), dir)
    })
}

/// A storage server on a fresh SQLite file under the access rules of [`RULES`], and its
/// `storage-dir`.
fn sqlite() -> &'static (String, PathBuf) {
    static SERVER: OnceLock<(String, PathBuf)> = OnceLock::new();
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let args = rowgate::config::ServeArgs {
            storage_enabled: Some(true),
            storage_dir: Some(dir.join("storage")),
            ..Default::default()
        };
        let base = crate::sqlite::serve_sqlite(
            &dir.join("abuse.db"),
            "CREATE TABLE t (id INTEGER PRIMARY KEY);",
            RULES,
            args,
        );
        (base, dir.join("storage"))
    })
}

/// A test on each backend.
macro_rules! on_both {
    ($name:ident) => {
        mod $name {
            #[test]
            fn on_postgres() {
                let (base, dir) = super::postgres();
                super::$name(base, dir);
            }
            #[test]
            fn on_sqlite() {
                let (base, dir) = super::sqlite();
                super::$name(base, dir);
            }
        }
    };
}

on_both!(signing_an_upload_url_takes_the_right_to_make_that_upload);
on_both!(an_upload_one_may_not_make_is_refused_before_its_bytes_are_taken);
on_both!(deleting_an_object_one_cannot_see_answers_as_a_missing_one_does);
on_both!(a_multipart_text_field_past_its_bound_is_refused_before_the_rest_is_read);
on_both!(nothing_uploaded_runs_as_the_api_s_origin);
on_both!(a_thumbnail_s_signed_url_opens_the_thumbnail_only);
on_both!(a_move_into_another_bucket_keeps_within_its_limits);

/// A private bucket of a name no other test uses, made by the service role.
fn bucket(base: &str, name: &str) -> String {
    bucket_with(base, name, json!({}))
}

/// [`bucket`], with `settings` (`public`, limits).
fn bucket_with(base: &str, name: &str, settings: Value) -> String {
    let id = format!("{name}-{}", std::process::id());
    let mut body = json!({"name": id});
    body.as_object_mut().unwrap().extend(settings.as_object().unwrap().clone());
    let service = token(json!({"role": "service_role"}));
    let (status, answer) = call_on(base, "POST", "/bucket", Some(&service), Some(&body.to_string()));
    assert_eq!(status, 200, "{answer}");
    id
}

/// Uploads `text` as the holder of `token` (raw body, as storage-js sends a string).
fn upload(base: &str, method: &str, path: &str, token: Option<&str>, text: &str) -> (u16, Value) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "text/plain")];
    if let Some(b) = &bearer {
        headers.push(("authorization", b));
    }
    let r = send_to(base, method, &format!("/storage/v1{path}"), &headers, Some(text));
    (r.status, serde_json::from_str(&r.body).unwrap_or(Value::String(r.body)))
}

/// The text of `bucket/key` as the service role reads it.
fn content(base: &str, bucket: &str, key: &str) -> (u16, String) {
    let service = token(json!({"role": "service_role"}));
    let r = send_to(
        base,
        "GET",
        &format!("/storage/v1/object/{bucket}/{key}"),
        &[("authorization", &format!("Bearer {service}"))],
        None,
    );
    (r.status, r.body)
}

/// `POST /object/upload/sign/...` as the holder of `token`, with `x-upsert`.
fn sign_upload(base: &str, bucket: &str, key: &str, token: Option<&str>, upsert: bool) -> (u16, Value) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers =
        vec![("content-type", "application/json"), ("x-upsert", if upsert { "true" } else { "false" })];
    if let Some(b) = &bearer {
        headers.push(("authorization", b));
    }
    let r = send_to(
        base,
        "POST",
        &format!("/storage/v1/object/upload/sign/{bucket}/{key}"),
        &headers,
        Some("{}"),
    );
    (r.status, serde_json::from_str(&r.body).unwrap_or(Value::String(r.body)))
}

fn signing_an_upload_url_takes_the_right_to_make_that_upload(base: &str, _: &Path) {
    let (alice, bob) = (
        token(json!({"role": "authenticated", "sub": ALICE})),
        token(json!({"role": "authenticated", "sub": BOB})),
    );
    let bucket = bucket(base, "sign-upload");
    let mine = format!("{ALICE}/avatar.txt");
    assert_eq!(upload(base, "POST", &format!("/object/{bucket}/{mine}"), Some(&alice), "alice's").0, 200);

    // Neither a stranger nor another user may sign a replacement of Alice's object, or a new
    // object in her folder.
    let anon = token(json!({"role": "anon"}));
    let (status, body) = sign_upload(base, &bucket, &mine, None, true);
    assert_eq!((status, &body["statusCode"]), (400, &json!("400")), "no credentials: {body}");
    for who in [Some(anon.as_str()), Some(bob.as_str())] {
        for (key, upsert) in [(mine.clone(), true), (format!("{ALICE}/planted.txt"), false)] {
            let (status, body) = sign_upload(base, &bucket, &key, who, upsert);
            assert_eq!((status, &body["statusCode"]), (400, &json!("403")), "{who:?} signed {key}: {body}");
            assert_eq!(body["error"], "Unauthorized", "{body}");
        }
    }
    assert_eq!(content(base, &bucket, &mine), (200, "alice's".to_owned()));
    assert_eq!(content(base, &bucket, &format!("{ALICE}/planted.txt")).0, 400);

    // Without upsert, an existing object is a conflict, as before.
    let (status, body) = sign_upload(base, &bucket, &mine, Some(&alice), false);
    assert_eq!((status, &body["statusCode"]), (400, &json!("409")), "{body}");

    // Bob signs in his own folder, Alice a replacement of her own: both URLs work.
    for (who, key, text) in
        [(&bob, format!("{BOB}/b.txt"), "bob's"), (&alice, mine.clone(), "alice's, again")]
    {
        let (status, signed) = sign_upload(base, &bucket, &key, Some(who), true);
        assert_eq!(status, 200, "{signed}");
        let (status, body) = upload(
            base,
            "PUT",
            &format!("/object/upload/sign/{bucket}/{key}?token={}", signed["token"].as_str().unwrap()),
            None,
            text,
        );
        assert_eq!((status, body), (200, json!({"Key": format!("{bucket}/{key}")})));
        assert_eq!(content(base, &bucket, &key), (200, text.to_owned()));
    }
}

fn an_upload_one_may_not_make_is_refused_before_its_bytes_are_taken(base: &str, dir: &Path) {
    let bucket = bucket(base, "refused");
    let before = files_in(dir).len();
    // 100 MB announced, 1 KB sent: the refusal must come without waiting for the rest.
    let bob = token(json!({"role": "authenticated", "sub": BOB}));
    let head = format!(
        "POST /storage/v1/object/{bucket}/{ALICE}/big.bin HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {bob}\r\n\
         content-type: application/octet-stream\r\ncontent-length: 100000000\r\n\r\n"
    );
    let answer = answer_before_the_end(base, &head, &[b'x'; 1024]);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains(r#""statusCode":"403""#), "{answer}");
    assert_eq!(files_in(dir).len(), before, "a refused upload was written");
    assert_eq!(content(base, &bucket, &format!("{ALICE}/big.bin")).0, 400);
}

fn deleting_an_object_one_cannot_see_answers_as_a_missing_one_does(base: &str, _: &Path) {
    let (alice, bob) = (
        token(json!({"role": "authenticated", "sub": ALICE})),
        token(json!({"role": "authenticated", "sub": BOB})),
    );
    let bucket = bucket(base, "oracle");
    let mine = format!("{ALICE}/secret.txt");
    assert_eq!(upload(base, "POST", &format!("/object/{bucket}/{mine}"), Some(&alice), "x").0, 200);
    let not_found = json!({"statusCode": "404", "code": "NoSuchKey", "error": "not_found", "message": "Object not found"});
    for key in [mine.clone(), format!("{ALICE}/nothing.txt")] {
        let answer = call_on(base, "DELETE", &format!("/object/{bucket}/{key}"), Some(&bob), None);
        assert_eq!(answer, (400, not_found.clone()), "{key}");
        let answer = call_on(
            base,
            "POST",
            &format!("/object/sign/{bucket}/{key}"),
            Some(&bob),
            Some(r#"{"expiresIn": 60}"#),
        );
        assert_eq!(answer, (400, not_found.clone()), "{key}");
    }
    assert_eq!(content(base, &bucket, &mine), (200, "x".to_owned()));
}

/// Sends `head` and then `body` on a new connection, without ending the request; the answer's
/// first bytes, which must come within 5 s.
fn answer_before_the_end(base: &str, head: &str, body: &[u8]) -> String {
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = [0u8; 2048];
    let n = stream.read(&mut answer).expect("an answer before the body is sent");
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

fn a_multipart_text_field_past_its_bound_is_refused_before_the_rest_is_read(base: &str, _: &Path) {
    let alice = token(json!({"role": "authenticated", "sub": ALICE}));
    let bucket = bucket(base, "fields");
    let path = format!("/storage/v1/object/{bucket}/{ALICE}/f.txt");
    // A body of unknown length whose `cacheControl` field goes on and on: refused once it
    // passes its bound, not read whole.
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {alice}\r\n\
         content-type: multipart/form-data; boundary=XX\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    let part = format!(
        "--XX\r\ncontent-disposition: form-data; name=\"cacheControl\"\r\n\r\n{}",
        "9".repeat(64 * 1024)
    );
    let chunk = format!("{:x}\r\n{part}\r\n", part.len());
    let answer = answer_before_the_end(base, &head, chunk.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains(r#""statusCode":"413""#), "{answer}");
    // A declared length past the bucket's limit and what a form may add: refused at once.
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {alice}\r\n\
         content-type: multipart/form-data; boundary=XX\r\ncontent-length: 1000000000\r\n\r\n"
    );
    let answer = answer_before_the_end(base, &head, b"--XX\r\n");
    assert!(answer.contains(r#""statusCode":"413""#), "{answer}");
    assert_eq!(content(base, &bucket, &format!("{ALICE}/f.txt")).0, 400);
}

fn nothing_uploaded_runs_as_the_api_s_origin(base: &str, _: &Path) {
    let service = token(json!({"role": "service_role"}));
    let bucket = bucket_with(base, "pages", json!({"public": true}));
    let bearer = format!("Bearer {service}");
    let script = "<svg xmlns='http://www.w3.org/2000/svg' onload='alert(document.cookie)'/>";
    // (name, type uploaded, type served, a download)
    let cases = [
        ("a.svg", "image/svg+xml", "image/svg+xml", true),
        ("b.xhtml", "application/xhtml+xml", "application/xhtml+xml", true),
        ("c.html", "text/html", "text/plain", false),
        ("d.pdf", "application/pdf", "application/pdf", true),
        ("e.png", "image/png", "image/png", false),
        ("f.txt", "text/plain;charset=UTF-8", "text/plain;charset=UTF-8", false),
    ];
    for (name, uploaded, served, download) in cases {
        let path = format!("/storage/v1/object/{bucket}/{name}");
        let r = send_to(
            base,
            "POST",
            &path,
            &[("authorization", &bearer), ("content-type", uploaded)],
            Some(script),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let r = send_to(base, "GET", &format!("/storage/v1/object/public/{bucket}/{name}"), &[], None);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some(served), "{name}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{name}");
        assert_eq!(
            r.header("content-security-policy"),
            Some("default-src 'none'; style-src 'unsafe-inline'; sandbox"),
            "{name}"
        );
        assert_eq!(r.header("content-disposition"), download.then_some("attachment"), "{name}");
    }
    // A download's name is encoded as encodeURIComponent does it, as Supabase's is.
    let r = send_to(
        base,
        "GET",
        &format!("/storage/v1/object/public/{bucket}/e.png?download=my_file.v1%20(1)%C3%A9.png"),
        &[],
        None,
    );
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=my_file.v1%20(1)%C3%A9.png; filename*=UTF-8''my_file.v1%20(1)%C3%A9.png")
    );
    // A media type with a control character is no media type: refused, not stored.
    let form = "--XX\r\ncontent-disposition: form-data; name=\"contentType\"\r\n\r\ntext/plain\u{1}\r\n\
                --XX\r\ncontent-disposition: form-data; name=\"file\"; filename=\"g\"\r\n\r\nx\r\n--XX--\r\n";
    let r = send_to(
        base,
        "POST",
        &format!("/storage/v1/object/{bucket}/g.txt"),
        &[("authorization", &bearer), ("content-type", "multipart/form-data; boundary=XX")],
        Some(form),
    );
    assert_eq!((r.status, r.json()["statusCode"].as_str()), (400, Some("415")), "{}", r.body);
}

/// A PNG of `side`×`side` pixels of one colour: a few hundred KB that decode to many MB.
fn bomb(side: u32, shade: u8) -> Vec<u8> {
    let mut bytes = Vec::new();
    let image =
        image::DynamicImage::ImageRgb8(image::RgbImage::from_pixel(side, side, image::Rgb([shade, 0, 0])));
    image.write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png).unwrap();
    bytes
}

/// `rowgate_storage_image_decodes_total` of the server at `base`.
fn decodes(base: &str) -> u64 {
    let metrics = send_to(base, "GET", "/rowgate/metrics", &[], None).body;
    let line =
        metrics.lines().find(|l| l.starts_with("rowgate_storage_image_decodes_total ")).expect("the metric");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// A GET of `path` from the loopback address `from`: status and when it answered.
fn get_from(from: [u8; 4], base: &str, path: &str) -> (u16, std::time::Instant) {
    let client =
        reqwest::blocking::Client::builder().local_address(std::net::IpAddr::from(from)).build().unwrap();
    let r = client.get(format!("{base}{path}")).send().unwrap();
    let status = r.status().as_u16();
    let _ = r.bytes();
    (status, std::time::Instant::now())
}

#[test]
fn an_image_is_decoded_once_for_every_size_and_a_client_waits_for_its_own_turns() {
    // Caches of 32 MiB: a 16-megapixel source decoded (48 MB) does not fit, kept reduced it does.
    let dir = tempfile::tempdir().unwrap().keep();
    let args = rowgate::config::ServeArgs {
        storage_enabled: Some(true),
        storage_dir: Some(dir.join("storage")),
        storage_transform_cache_size: Some(32 * 1024 * 1024),
        ..Default::default()
    };
    let base = &crate::sqlite::serve_sqlite(
        &dir.join("bombs.db"),
        "CREATE TABLE t (id INTEGER PRIMARY KEY);",
        RULES,
        args,
    );
    let service = token(json!({"role": "service_role"}));
    let bucket = bucket_with(base, "bombs", json!({"public": true}));
    let upload = |name: &str, bytes: Vec<u8>| {
        let client = reqwest::blocking::Client::new();
        let r = client
            .post(format!("{base}/storage/v1/object/{bucket}/{name}"))
            .header("authorization", format!("Bearer {service}"))
            .header("content-type", "image/png")
            .body(bytes)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
    };
    // 16 megapixels in a small file, asked for at many widths: decoded once, kept reduced.
    upload("a.png", bomb(4000, 1));
    let before = decodes(base);
    for width in 100..104 {
        let (status, _) = get_from(
            [127, 0, 0, 1],
            base,
            &format!("/storage/v1/render/image/public/{bucket}/a.png?width={width}"),
        );
        assert_eq!(status, 200);
    }
    assert_eq!(decodes(base) - before, 1);

    // One client asking for two new large images at once has one image thread: another
    // client's small image is not kept waiting behind both.
    upload("b.png", bomb(4000, 2));
    upload("c.png", bomb(4000, 3));
    upload("small.png", bomb(64, 4));
    let heavy: Vec<_> = ["b.png", "c.png"]
        .map(|name| {
            let (base, path) =
                (base.clone(), format!("/storage/v1/render/image/public/{bucket}/{name}?width=300"));
            std::thread::spawn(move || get_from([127, 0, 0, 5], &base, &path))
        })
        .into_iter()
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let (status, small_at) = get_from(
        [127, 0, 0, 6],
        base,
        &format!("/storage/v1/render/image/public/{bucket}/small.png?width=32"),
    );
    assert_eq!(status, 200);
    let heavy: Vec<(u16, std::time::Instant)> = heavy.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(heavy.iter().all(|(status, _)| *status == 200));
    let last = heavy.iter().map(|(_, at)| *at).max().unwrap();
    assert!(small_at < last, "the small image waited for both of another client's large ones");
}

fn a_thumbnail_s_signed_url_opens_the_thumbnail_only(base: &str, _: &Path) {
    let alice = token(json!({"role": "authenticated", "sub": ALICE}));
    let bucket = bucket(base, "thumbs");
    let path = format!("{ALICE}/photo.png");
    let bearer = format!("Bearer {alice}");
    let r = reqwest::blocking::Client::new()
        .post(format!("{base}/storage/v1/object/{bucket}/{path}"))
        .header("authorization", &bearer)
        .header("content-type", "image/png")
        .body(bomb(64, 9))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let sign = json!({"expiresIn": "60", "transform": {"width": 16}}).to_string();
    let (status, signed) =
        call_on(base, "POST", &format!("/object/sign/{bucket}/{path}"), Some(&alice), Some(&sign));
    assert_eq!(status, 200, "{signed}");
    let url = signed["signedURL"].as_str().unwrap();
    assert!(url.starts_with("/render/image/sign/"), "{url}");
    assert_eq!(send_to(base, "GET", &format!("/storage/v1{url}"), &[], None).status, 200);
    // The same token on the original's route: refused.
    let original = url.replacen("/render/image/sign/", "/object/sign/", 1);
    let (status, body) = call_on(base, "GET", &original, None, None);
    assert_eq!((status, &body["message"]), (400, &json!("Invalid signature")), "{body}");
}

fn a_move_into_another_bucket_keeps_within_its_limits(base: &str, _: &Path) {
    let service = token(json!({"role": "service_role"}));
    let from = bucket(base, "move-from");
    let images = bucket_with(base, "move-images", json!({"allowed_mime_types": ["image/*"]}));
    let tiny = bucket_with(base, "move-tiny", json!({"file_size_limit": 10}));
    let any = bucket(base, "move-any");
    assert_eq!(
        upload(base, "POST", &format!("/object/{from}/a.txt"), Some(&service), &"x".repeat(100)).0,
        200
    );
    let moving = |to: &str| {
        let body = json!({"bucketId": from, "sourceKey": "a.txt", "destinationBucket": to, "destinationKey": "a.txt"});
        call_on(base, "POST", "/object/move", Some(&service), Some(&body.to_string()))
    };
    let (status, body) = moving(&images);
    assert_eq!((status, &body["statusCode"]), (400, &json!("415")), "{body}");
    let (status, body) = moving(&tiny);
    assert_eq!((status, &body["statusCode"]), (400, &json!("413")), "{body}");
    assert_eq!(moving(&any), (200, json!({"message": "Successfully moved"})));
}

#[test]
fn installs_refuse_functions_someone_else_made_first() {
    // In a database of its own: another role made the functions rowgate would replace.
    crate::support::sql("DROP DATABASE IF EXISTS squatted_functions");
    crate::support::sql("CREATE DATABASE squatted_functions");
    let base = &crate::support::harness().superuser_uri;
    let superuser = format!("{}/squatted_functions", &base[..base.rfind('/').unwrap()]);
    crate::support::sql_at(
        &superuser,
        "DO $$ BEGIN CREATE ROLE squatter NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         CREATE SCHEMA storage; CREATE SCHEMA rowgate;
         GRANT CREATE, USAGE ON SCHEMA storage, rowgate TO squatter;
         SET ROLE squatter;
         CREATE FUNCTION storage.rowgate_put() RETURNS int LANGUAGE sql AS 'SELECT 1';
         CREATE FUNCTION rowgate.realtime_ddl() RETURNS int LANGUAGE sql AS 'SELECT 1';
         CREATE FUNCTION rowgate.cache_notify() RETURNS int LANGUAGE sql AS 'SELECT 1';
         RESET ROLE;",
    );
    let install = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rowgate"))
            .args(args)
            .args(["--db-uri", &superuser])
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for (args, function) in [
        (&["storage", "install", "--role", "Authenticator"][..], "storage.rowgate_put"),
        (&["realtime", "install"][..], "rowgate.realtime_ddl"),
        (&["cache", "install"][..], "rowgate.cache_notify"),
    ] {
        let (ok, said) = install(args);
        assert!(!ok, "{args:?} installed over someone else's function");
        assert!(said.contains(&format!("{function} belongs to squatter")), "{args:?}: {said}");
    }
}
