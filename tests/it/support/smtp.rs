//! A real SMTP server for the accounts' mail: aiosmtpd's (from PyPI, in the git-ignored
//! tests/py/.venv that scripts/test makes), one per test binary, stopped with it, keeping what
//! it receives in a maildir the tests read. Missing, it fails the tests that need it, loudly.

use std::collections::HashSet;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The server: its port, and the maildir it delivers to.
pub struct Sink {
    pub port: u16,
    dir: PathBuf,
    /// Messages already handed to a test.
    taken: Mutex<HashSet<PathBuf>>,
}

/// The server, started on first use.
pub fn sink() -> &'static Sink {
    static SINK: OnceLock<Sink> = OnceLock::new();
    SINK.get_or_init(|| {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/.venv/bin/python");
        assert!(
            python.is_file(),
            "aiosmtpd is not installed: scripts/test makes tests/py/.venv from tests/py/requirements.txt"
        );
        let dir = tempfile::tempdir().expect("temp dir").keep().join("maildir");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = std::process::Command::new(&python)
            .args([
                "-m",
                "aiosmtpd",
                "-n",
                "-l",
                &format!("127.0.0.1:{port}"),
                "-c",
                "aiosmtpd.handlers.Mailbox",
            ])
            .arg(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("aiosmtpd starts");
        super::stop_child_with_this_process(child, ":");
        for _ in 0..200 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Sink { port, dir, taken: Mutex::new(HashSet::new()) };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("aiosmtpd did not listen on port {port}");
    })
}

/// A message as received: its headers and its body, decoded.
#[derive(Debug)]
pub struct Mail {
    pub subject: String,
    pub from: String,
    pub body: String,
}

impl Mail {
    /// The first link in the body (`href="..."`, unescaped).
    pub fn link(&self) -> String {
        let start = self.body.find("href=\"").expect("a link in the mail") + 6;
        let end = start + self.body[start..].find('"').expect("the link's end");
        self.body[start..end].replace("&amp;", "&")
    }

    /// The six-digit code in the body (the built-in templates say "code: 123456").
    pub fn code(&self) -> String {
        let start = self.body.find("code: ").expect("a code in the mail") + "code: ".len();
        let code = &self.body[start..start + 6];
        assert!(code.bytes().all(|b| b.is_ascii_digit()), "{}", self.body);
        code.to_owned()
    }
}

impl Sink {
    /// The maildir messages arrive in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The next message to `address` not yet taken, waiting up to 10 s for it.
    pub fn mail_to(&self, address: &str) -> Mail {
        for _ in 0..200 {
            if let Some(mail) = self.take(address) {
                return mail;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no mail to {address}");
    }

    /// Whether a message to `address` arrives within a second (none taken).
    pub fn nothing_to(&self, address: &str) -> bool {
        std::thread::sleep(Duration::from_secs(1));
        self.find(address).is_none()
    }

    fn take(&self, address: &str) -> Option<Mail> {
        let path = self.find(address)?;
        self.taken.lock().unwrap().insert(path.clone());
        Some(parse(&std::fs::read_to_string(&path).ok()?))
    }

    fn find(&self, address: &str) -> Option<PathBuf> {
        let taken = self.taken.lock().unwrap();
        let mut found: Vec<_> = std::fs::read_dir(self.dir.join("new"))
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| !taken.contains(p))
            .filter(|p| {
                std::fs::read_to_string(p)
                    .is_ok_and(|m| m.lines().any(|l| l.eq_ignore_ascii_case(&format!("X-RcptTo: {address}"))))
            })
            .collect();
        found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        found.into_iter().next()
    }
}

/// A message's headers and body, its transfer encoding undone.
fn parse(message: &str) -> Mail {
    let message = message.replace("\r\n", "\n");
    let (head, body) = message.split_once("\n\n").unwrap_or((&message, ""));
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim())
            })
            .unwrap_or("")
            .to_owned()
    };
    let body = match header("Content-Transfer-Encoding").to_ascii_lowercase().as_str() {
        "base64" => {
            use base64::Engine;
            let text: String = body.split_whitespace().collect();
            String::from_utf8(base64::engine::general_purpose::STANDARD.decode(text).expect("base64 body"))
                .expect("a UTF-8 body")
        }
        "quoted-printable" => quoted_printable(body),
        _ => body.to_owned(),
    };
    Mail { subject: header("Subject"), from: header("From"), body }
}

fn quoted_printable(text: &str) -> String {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'=' if bytes.get(i + 1) == Some(&b'\n') => i += 2,
            b'=' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => out.push(b),
                    Err(_) => out.extend_from_slice(&bytes[i..i + 3]),
                }
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
