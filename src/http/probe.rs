//! `rowgate health`'s probe: one plain-HTTP GET, for container health checks where no curl is
//! at hand.

use std::io::{Read, Write};
use std::time::Duration;

/// The status line `url` (`http://host[:port]/path`) answers with, within `timeout`.
pub fn status_line(url: &str, timeout: Duration) -> Result<String, String> {
    let rest = url.strip_prefix("http://").ok_or("only http:// URLs are checked")?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    let address = if authority.contains(':') { authority.to_owned() } else { format!("{authority}:80") };
    let target = std::net::ToSocketAddrs::to_socket_addrs(&address)
        .map_err(|e| format!("{address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address}: no address"))?;
    let mut stream = std::net::TcpStream::connect_timeout(&target, timeout).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    // The status line, however the answer's first bytes arrive.
    let mut head = Vec::new();
    let mut chunk = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 1024 {
        match stream.read(&mut chunk).map_err(|e| e.to_string())? {
            0 => break,
            n => head.extend_from_slice(&chunk[..n]),
        }
    }
    Ok(String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_owned())
}
