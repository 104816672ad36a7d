//! Storage with its bytes in an S3-compatible bucket (`storage-s3-url`) rather than
//! `storage-dir`: moto's S3 server (tests/it/support/s3.rs), the real storage-js client on both
//! backends, and what must never be left in the bucket.

use std::time::Duration;

use serde_json::json;

use crate::storage::{call_on, setup, storage_js, token, RULES};
use crate::support::{default_args, harness, s3, send_to, start_server};

/// A storage server on the test database whose bytes go to `bucket` under `prefix`.
fn serve_postgres(bucket: &str, prefix: &str) -> String {
    setup();
    let args = rowgate::config::ServeArgs {
        storage_enabled: Some(true),
        db_anon_role: Some("anon".into()),
        ..default_args(&harness().superuser_uri)
    };
    start_server(s3::args(bucket, prefix, args))
}

#[test]
fn storage_js_against_rowgate_on_postgres_with_s3() {
    let bucket = s3::bucket(&format!("pg-{}", std::process::id()));
    storage_js(&serve_postgres(&bucket, "rowgate"), "s3");
    assert!(!s3::keys(&bucket, "rowgate/objects/").is_empty(), "the bytes went to the bucket");
}

#[test]
fn storage_js_against_rowgate_on_sqlite_with_s3() {
    let bucket = s3::bucket(&format!("lite-{}", std::process::id()));
    let dir = tempfile::tempdir().unwrap().keep();
    let base = crate::sqlite::serve_sqlite(
        &dir.join("storage.db"),
        "CREATE TABLE notes (id INTEGER PRIMARY KEY);",
        RULES,
        s3::args(
            &bucket,
            "",
            rowgate::config::ServeArgs { storage_enabled: Some(true), ..Default::default() },
        ),
    );
    storage_js(&base, "s3");
    assert!(!s3::keys(&bucket, "objects/").is_empty(), "the bytes went to the bucket");
}

/// A server of its own on the test database, and its own bucket in S3 (tests run in parallel, and
/// some look at everything in their bucket).
fn own(name: &str) -> (String, String) {
    let bucket = s3::bucket(&format!("{name}-{}", std::process::id()));
    (serve_postgres(&bucket, ""), bucket)
}

#[test]
fn an_interrupted_or_refused_upload_leaves_nothing_in_the_bucket() {
    use std::io::Write;
    let (base, s3_bucket) = &own("cut");
    let service = token(json!({"role": "service_role"}));
    let bucket = format!("s3cut-{}", std::process::id());
    let body = json!({"name": bucket, "file_size_limit": 20_000_000}).to_string();
    assert_eq!(call_on(base, "POST", "/bucket", Some(&service), Some(&body)).0, 200);
    // A body that stops after two multipart parts' worth: the client goes away.
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /storage/v1/object/{bucket}/half.bin HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {service}\r\n\
         content-type: application/octet-stream\r\ncontent-length: 19000000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&vec![b'h'; 18 * 1024 * 1024]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(stream);
    // Too large for the bucket (refused from its Content-Length, before a byte is stored).
    let big = "b".repeat(20_000_001);
    let r = send_to(
        base,
        "POST",
        &format!("/storage/v1/object/{bucket}/big.bin"),
        &[("authorization", &format!("Bearer {service}")), ("content-type", "application/octet-stream")],
        Some(&big),
    );
    assert_eq!((r.status, r.json()["statusCode"].as_str()), (400, Some("413")));
    // Too large, found out only after three parts went to S3: a form's file has no length of its own.
    let form = format!(
        "--B\r\ncontent-disposition: form-data; name=\"file\"; filename=\"form.bin\"\r\n\
         content-type: application/octet-stream\r\n\r\n{}\r\n--B--\r\n",
        "f".repeat(20_000_001)
    );
    let r = send_to(
        base,
        "POST",
        &format!("/storage/v1/object/{bucket}/form.bin"),
        &[
            ("authorization", &format!("Bearer {service}")),
            ("content-type", "multipart/form-data; boundary=B"),
        ],
        Some(&form),
    );
    assert_eq!((r.status, r.json()["statusCode"].as_str()), (400, Some("413")));
    for name in ["half.bin", "big.bin", "form.bin"] {
        let (status, body) =
            call_on(base, "GET", &format!("/object/info/{bucket}/{name}"), Some(&service), None);
        assert_eq!((status, body["message"].as_str()), (400, Some("Object not found")), "{name}");
    }
    // The aborts and removals run beside the answers.
    for _ in 0..50 {
        if s3::keys(s3_bucket, "objects/").is_empty() && s3::unfinished_uploads(s3_bucket) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s3::keys(s3_bucket, "objects/"), Vec::<String>::new());
    assert_eq!(s3::unfinished_uploads(s3_bucket), 0, "no parts are left behind");
}

#[test]
fn a_multipart_sized_object_round_trips_whole_and_by_range() {
    let (base, _) = &own("big");
    let service = token(json!({"role": "service_role"}));
    let auth = format!("Bearer {service}");
    let bucket = format!("s3big-{}", std::process::id());
    assert_eq!(
        call_on(base, "POST", "/bucket", Some(&service), Some(&json!({"name": bucket}).to_string())).0,
        200
    );
    // Past one 8 MiB part, with bytes that tell every offset apart.
    let bytes: String = (0..20_000_000u32).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let path = format!("/storage/v1/object/{bucket}/big.txt");
    let put = send_to(
        base,
        "POST",
        &path,
        &[("authorization", &auth), ("content-type", "text/plain")],
        Some(&bytes),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let whole = send_to(base, "GET", &path, &[("authorization", &auth)], None);
    assert_eq!((whole.status, whole.body.len()), (200, bytes.len()));
    assert!(whole.body == bytes, "the whole object comes back as sent");
    let range =
        send_to(base, "GET", &path, &[("authorization", &auth), ("range", "bytes=9999990-10000009")], None);
    assert_eq!(range.status, 206);
    assert_eq!(range.header("content-range"), Some("bytes 9999990-10000009/20000000"));
    assert_eq!(range.body, bytes[9_999_990..10_000_010]);
    // A copy is the store's, server-side; the original's removal leaves it whole.
    let copy = json!({"bucketId": bucket, "sourceKey": "big.txt", "destinationKey": "copy.txt"}).to_string();
    assert_eq!(call_on(base, "POST", "/object/copy", Some(&service), Some(&copy)).0, 200);
    let gone = send_to(base, "DELETE", &path, &[("authorization", &auth)], None);
    assert_eq!(gone.status, 200, "{}", gone.body);
    let copied = send_to(
        base,
        "GET",
        &format!("/storage/v1/object/{bucket}/copy.txt"),
        &[("authorization", &auth)],
        None,
    );
    assert!(copied.status == 200 && copied.body == bytes, "the copy is whole");
}

#[test]
fn the_sweep_removes_old_objects_no_row_names_from_the_bucket() {
    let bucket = s3::bucket(&format!("sweep-{}", std::process::id()));
    let settings =
        rowgate::config::Config::load(&s3::args(&bucket, "p", Default::default())).unwrap().storage.s3;
    let named = crate::support::block_on(async move {
        use rowgate::storage::files::{s3::S3, Files};
        let files = Files::new(std::sync::Arc::new(S3::open(&settings.unwrap()).unwrap()));
        let mut kept = Vec::new();
        for text in ["named", "orphan"] {
            let chunks = futures_util::stream::iter([Ok(bytes::Bytes::from(text))]);
            let received = files.receive(Box::pin(chunks), 100).await.unwrap();
            kept.push(received.version.clone());
            received.keep().await.unwrap();
        }
        // Last-modified times are in whole seconds.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let named = kept[0].clone();
        let removed = files
            .sweep(Duration::from_secs(1), |batch| {
                let named = named.clone();
                async move { Some(batch.into_iter().filter(|v| *v == named).collect()) }
            })
            .await
            .unwrap();
        assert_eq!(removed, 1);
        // The database unreachable: nothing is removed.
        assert_eq!(files.sweep(Duration::from_secs(1), |_| async { None }).await.unwrap(), 0);
        named
    });
    assert_eq!(s3::keys(&bucket, "p/objects/"), vec![format!("p/objects/{named}")]);
}
