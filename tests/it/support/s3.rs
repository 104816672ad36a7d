//! A real S3-compatible server for the storage tests: moto's (`moto_server`, from PyPI, in the
//! git-ignored tests/py/.venv that scripts/test makes), one per test binary, stopped with it.
//! Missing, it fails the tests that need it, loudly.

use std::net::TcpListener;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// The server's URL (`http://127.0.0.1:PORT`), started on first use.
pub fn endpoint() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/.venv/bin/moto_server");
        assert!(
            program.is_file(),
            "moto_server is not installed: scripts/test makes tests/py/.venv from tests/py/requirements.txt"
        );
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = std::process::Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("moto_server starts");
        super::stop_child_with_this_process(child, ":");
        let endpoint = format!("http://127.0.0.1:{port}");
        let client = reqwest::blocking::Client::new();
        for _ in 0..200 {
            if client.get(format!("{endpoint}/")).send().is_ok_and(|r| r.status().is_success()) {
                return endpoint;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("moto_server did not answer on {endpoint}");
    })
}

/// A new, empty bucket named `name`.
pub fn bucket(name: &str) -> String {
    let r = reqwest::blocking::Client::new()
        .put(format!("{}/{name}", endpoint()))
        .send()
        .expect("create a bucket");
    assert!(r.status().is_success(), "creating bucket {name}: {}", r.status());
    name.to_owned()
}

/// The keys under `prefix` in `bucket`, in order.
pub fn keys(bucket: &str, prefix: &str) -> Vec<String> {
    let url = format!("{}/{bucket}?list-type=2&prefix={prefix}", endpoint());
    let text = reqwest::blocking::get(url).expect("list a bucket").text().expect("a listing");
    text.split("<Key>").skip(1).filter_map(|k| k.split("</Key>").next()).map(str::to_owned).collect()
}

/// The multipart uploads begun in `bucket` and neither finished nor aborted.
pub fn unfinished_uploads(bucket: &str) -> usize {
    let url = format!("{}/{bucket}?uploads", endpoint());
    reqwest::blocking::get(url)
        .expect("list uploads")
        .text()
        .expect("a listing")
        .matches("<UploadId>")
        .count()
}

/// `args`, with the bytes going to `bucket` under `prefix`.
pub fn args(bucket: &str, prefix: &str, args: rowgate::config::ServeArgs) -> rowgate::config::ServeArgs {
    rowgate::config::ServeArgs {
        storage_s3_url: Some(format!("s3://{bucket}/{prefix}")),
        storage_s3_endpoint: Some(endpoint().to_owned()),
        storage_s3_region: Some("us-east-1".into()),
        storage_s3_access_key_id: Some("rowgate-test".into()),
        storage_s3_secret_access_key: Some("rowgate-test-secret".into()),
        ..args
    }
}
