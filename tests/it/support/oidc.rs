//! A real OpenID provider for the accounts' sign-in through providers: npm's `oidc-provider`
//! (tests/js/oidc_provider.mjs, installed by scripts/test with the other JS clients), one per
//! test binary, stopped with it. Any login name signs in at its development login page, which
//! tests/js/sign_in_at.mjs walks through as a browser would. The rowgate servers that use it
//! are given their ports in advance: the provider must know where it may send browsers back.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The provider, and the ports of the rowgate servers it sends browsers back to.
pub struct Idp {
    pub issuer: String,
    pub client_id: &'static str,
    pub secret: &'static str,
    /// For the SQLite server and the PostgreSQL one.
    pub rowgate_ports: [u16; 2],
}

/// A port free now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

fn js_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js")
}

/// The provider, started on first use.
pub fn idp() -> &'static Idp {
    static IDP: OnceLock<Idp> = OnceLock::new();
    IDP.get_or_init(|| {
        assert!(
            js_dir().join("node_modules/oidc-provider").is_dir(),
            "oidc-provider is not installed: run `npm ci` in tests/js (scripts/test does)"
        );
        let port = free_port();
        let rowgate_ports = [free_port(), free_port()];
        let callbacks: Vec<String> =
            rowgate_ports.iter().map(|p| format!("http://127.0.0.1:{p}/auth/v1/callback")).collect();
        let mut child = Command::new("node")
            .arg("oidc_provider.mjs")
            .current_dir(js_dir())
            .env("OIDC_PORT", port.to_string())
            .env("OIDC_CLIENT_ID", "rowgate-test")
            .env("OIDC_CLIENT_SECRET", "rowgate-test-secret")
            .env("OIDC_REDIRECT_URIS", callbacks.join(","))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts the OpenID provider");
        // It stops when its stdin closes: kept open for the life of the tests.
        std::mem::forget(child.stdin.take());
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout")).read_line(&mut line).expect("it speaks");
        assert_eq!(line.trim(), "ready", "the OpenID provider did not start");
        super::stop_child_with_this_process(child, ":");
        Idp {
            issuer: format!("http://127.0.0.1:{port}"),
            client_id: "rowgate-test",
            secret: "rowgate-test-secret",
            rowgate_ports,
        }
    })
}

/// The node script's one line of output.
fn run(args: &[&str]) -> String {
    let out =
        Command::new("node").arg("sign_in_at.mjs").args(args).current_dir(js_dir()).output().expect("node");
    assert!(out.status.success(), "sign_in_at.mjs {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Where a browser at `url` (the provider's login) is sent once `login` signs in: the first
/// redirect to a URL starting with `stop_at`.
pub fn sign_in_at(url: &str, login: &str, stop_at: &str) -> String {
    run(&[url, login, stop_at])
}

/// An ID token for `login` issued to rowgate's client, its nonce the SHA-256 (hex) of `nonce`.
pub fn id_token(login: &str, nonce: &str) -> String {
    let idp = idp();
    let redirect = format!("http://127.0.0.1:{}/auth/v1/callback", idp.rowgate_ports[0]);
    run(&["--id-token", &idp.issuer, idp.client_id, idp.secret, &redirect, login, nonce])
}
