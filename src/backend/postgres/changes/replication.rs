//! The replication connection the change feed reads: tokio-postgres speaks no replication
//! protocol, so this is a small client of its own on `postgres-protocol`'s message codecs —
//! start-up, authentication (trust, password, MD5, SCRAM-SHA-256), the slot's commands, then
//! the copy stream with its standby status updates. No TLS (like the pool).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::feed::FeedError;
use crate::backend::postgres::tls::{PgTarget, Stream};

/// One backend message: its tag and body.
pub(super) struct Frame {
    pub(super) tag: u8,
    pub(super) body: Bytes,
}

pub(super) struct Connection {
    stream: Box<dyn Stream>,
    buf: BytesMut,
    /// What is written next ([`Connection::flush`]).
    pub(super) out: BytesMut,
}

impl Connection {
    /// A replication connection to the primary among `target`'s hosts, tried in order as libpq
    /// tries them: after a failover the promoted standby is found, and a host that is (again)
    /// a standby is passed over, since logical slots live on the primary.
    pub(super) async fn open(target: &PgTarget) -> Result<Connection, FeedError> {
        let hosts = target.config.get_hosts();
        let mut failed = FeedError::Server("db-uri names no host".into());
        // A host that does not answer is left for the next one after libpq's `connect_timeout`.
        let wait = target.config.get_connect_timeout().copied().unwrap_or(std::time::Duration::from_secs(10));
        for i in 0..hosts.len().max(1) {
            let opened = tokio::time::timeout(wait, Connection::open_host(target, i))
                .await
                .unwrap_or_else(|_| Err(FeedError::Server(format!("host {} did not answer in time", i + 1))));
            match opened {
                Ok(mut conn) if hosts.len() > 1 => match conn.command("SELECT pg_is_in_recovery()").await {
                    Ok(row) if row.first().map(String::as_str) == Some("f") => return Ok(conn),
                    Ok(_) => failed = FeedError::Server(format!("host {} is a standby", i + 1)),
                    Err(e) => failed = e,
                },
                Ok(conn) => return Ok(conn),
                Err(e) => failed = e,
            }
        }
        Err(failed)
    }

    /// A replication connection to `target`'s `i`th host (its port, or the one port given).
    async fn open_host(target: &PgTarget, i: usize) -> Result<Connection, FeedError> {
        use tokio_postgres::config::Host;
        let config = &target.config;
        let ports = config.get_ports();
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let stream: Box<dyn Stream> = match config.get_hosts().get(i) {
            Some(Host::Tcp(host)) => {
                let s = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                s.set_nodelay(true)?;
                target.negotiate(s, host).await?
            }
            #[cfg(unix)]
            Some(Host::Unix(dir)) => {
                Box::new(tokio::net::UnixStream::connect(dir.join(format!(".s.PGSQL.{port}"))).await?)
            }
            _ => Box::new(tokio::net::TcpStream::connect(("localhost", port)).await?),
        };
        let mut conn = Connection { stream, buf: BytesMut::with_capacity(64 * 1024), out: BytesMut::new() };
        let user = config.get_user().unwrap_or("postgres");
        let dbname = config.get_dbname().unwrap_or(user);
        let params = [
            ("user", user),
            ("database", dbname),
            ("replication", "database"),
            ("application_name", "rowgate change feed"),
            // How row values are written as text, for realtime's typed JSON.
            ("DateStyle", "ISO"),
            ("TimeZone", "UTC"),
            ("IntervalStyle", "postgres"),
        ];
        frontend::startup_message(params.iter().copied(), &mut conn.out)?;
        conn.flush().await?;
        conn.authenticate(user, config.get_password().unwrap_or_default()).await?;
        Ok(conn)
    }

    pub(super) async fn authenticate(&mut self, user: &str, password: &[u8]) -> Result<(), FeedError> {
        let mut scram: Option<ScramSha256> = None;
        loop {
            let frame = self.read().await?;
            match frame.tag {
                b'R' => {
                    let mut body = frame.body;
                    match body.get_i32() {
                        0 => {}
                        3 => frontend::password_message(password, &mut self.out)?,
                        5 => {
                            let salt = [body[0], body[1], body[2], body[3]];
                            let hash =
                                postgres_protocol::authentication::md5_hash(user.as_bytes(), password, salt);
                            frontend::password_message(hash.as_bytes(), &mut self.out)?;
                        }
                        10 => {
                            if !cstrings(&body).any(|m| m == SCRAM_SHA_256) {
                                return Err(FeedError::Protocol("SASL mechanisms (no SCRAM-SHA-256)".into()));
                            }
                            let s = ScramSha256::new(password, ChannelBinding::unsupported());
                            frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut self.out)?;
                            scram = Some(s);
                        }
                        11 => {
                            let s =
                                scram.as_mut().ok_or_else(|| FeedError::Protocol("SASL continue".into()))?;
                            s.update(&body)?;
                            frontend::sasl_response(s.message(), &mut self.out)?;
                        }
                        12 => {
                            let s = scram.as_mut().ok_or_else(|| FeedError::Protocol("SASL final".into()))?;
                            s.finish(&body)?;
                        }
                        other => return Err(FeedError::Protocol(format!("authentication method {other}"))),
                    }
                    self.flush().await?;
                }
                b'Z' => return Ok(()),
                b'S' | b'K' | b'N' => {}
                tag => return Err(FeedError::Protocol(format!("message '{}' during start-up", tag as char))),
            }
        }
    }

    /// Runs a replication command that answers with rows or nothing: the first row's values
    /// as text (a null as empty).
    pub(super) async fn command(&mut self, sql: &str) -> Result<Vec<String>, FeedError> {
        frontend::query(sql, &mut self.out)?;
        self.flush().await?;
        let mut first = None;
        loop {
            let frame = self.read().await?;
            match frame.tag {
                b'Z' => return Ok(first.unwrap_or_default()),
                b'D' if first.is_none() => first = Some(data_row(frame.body)?),
                b'T' | b'D' | b'C' | b'N' | b'S' => {}
                tag => return Err(FeedError::Protocol(format!("message '{}' after a command", tag as char))),
            }
        }
    }

    pub(super) async fn flush(&mut self) -> Result<(), FeedError> {
        self.stream.write_all(&self.out).await?;
        self.out.clear();
        Ok(())
    }

    /// The next message; an error response becomes [`FeedError::Server`].
    pub(super) async fn read(&mut self) -> Result<Frame, FeedError> {
        loop {
            if let Some(frame) = self.buffered()? {
                return Ok(frame);
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(FeedError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }

    /// The next message if it has been received whole already.
    pub(super) fn buffered(&mut self) -> Result<Option<Frame>, FeedError> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len < 4 {
            return Err(FeedError::Protocol("message length".into()));
        }
        if self.buf.len() <= len {
            self.buf.reserve(len + 1 - self.buf.len());
            return Ok(None);
        }
        let mut message = self.buf.split_to(len + 1).freeze();
        let tag = message.get_u8();
        message.advance(4);
        if tag == b'E' {
            return Err(FeedError::Server(error_text(&message)));
        }
        Ok(Some(Frame { tag, body: message }))
    }

    /// A standby status update: everything up to `lsn` is handled (the slot may move on).
    pub(super) fn status(&mut self, lsn: u64) -> Result<(), FeedError> {
        let mut data = BytesMut::with_capacity(34);
        data.put_u8(b'r');
        data.put_u64(lsn);
        data.put_u64(lsn);
        data.put_u64(lsn);
        data.put_i64(pg_now());
        data.put_u8(0);
        frontend::CopyData::new(data.freeze())?.write(&mut self.out);
        Ok(())
    }
}

/// Microseconds since 2000-01-01, PostgreSQL's clock.
fn pg_now() -> i64 {
    const PG_EPOCH: u64 = 946_684_800;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    now.as_micros() as i64 - (PG_EPOCH as i64) * 1_000_000
}

/// The NUL-terminated strings of a message body.
fn cstrings(body: &[u8]) -> impl Iterator<Item = &str> {
    body.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| std::str::from_utf8(s).unwrap_or(""))
}

/// A data row's values as text (a null as empty).
fn data_row(mut body: Bytes) -> Result<Vec<String>, FeedError> {
    let short = || FeedError::Protocol("short data row".into());
    if body.remaining() < 2 {
        return Err(short());
    }
    let n = body.get_i16().max(0);
    let mut values = Vec::with_capacity(n as usize);
    for _ in 0..n {
        if body.remaining() < 4 {
            return Err(short());
        }
        let len = body.get_i32();
        let len = usize::try_from(len).unwrap_or(0);
        if body.remaining() < len {
            return Err(short());
        }
        values.push(String::from_utf8_lossy(&body.split_to(len)).into_owned());
    }
    Ok(values)
}

/// An error response's message (field `M`), with its SQLSTATE.
fn error_text(body: &[u8]) -> String {
    let mut message = "";
    let mut code = "";
    for field in body.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let value = std::str::from_utf8(&field[1..]).unwrap_or("");
        match field[0] {
            b'M' => message = value,
            b'C' => code = value,
            _ => {}
        }
    }
    format!("{message} ({code})")
}
