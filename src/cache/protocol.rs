//! The messages on the cache's channel ([`super::CHANNEL`]), by NOTIFY or as logical decoding
//! messages: what changed, from the change triggers (or the logical feed), and the instances'
//! heartbeats, write markers, acknowledgements and goodbyes. Anyone who may NOTIFY the channel
//! can send one: the cache flushes on a row notification it cannot read, and ignores any other
//! payload that is no message.

use std::collections::HashMap;
use std::fmt;

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// `<oid>`: any row of the table may have changed.
    TableChanged(u32),
    /// `{"t": oid, "k": {"col": ["value", ...]}}`: rows with these key values changed.
    RowsChanged(RowChange),
    /// `*`: DDL, grants, policies or the cache's install changed: flush, and reload the schema.
    Flush,
    /// `h <instance> <micros>`: an instance's heartbeat, stamped with its clock.
    Heartbeat { from: String, micros: u64 },
    /// `x <instance> <n>`: write marker `n` of an instance, sent with its COMMIT.
    Marker { from: String, n: u64 },
    /// `a <to> <n> <by>`: instance `by` has received every change up to `to`'s marker `n`.
    Ack { to: String, n: u64, by: String },
    /// `b <instance>`: the instance is leaving.
    Goodbye { from: String },
}

/// A row notification's body.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct RowChange {
    /// The table's OID.
    pub t: u32,
    /// Each key column's values, before and after.
    pub k: HashMap<String, Vec<String>>,
}

/// Why a payload is no message.
#[derive(Debug, PartialEq, Eq)]
pub struct Unreadable;

impl Message {
    /// The message a payload carries.
    pub fn parse(payload: &str) -> Result<Message, Unreadable> {
        if let Ok(oid) = payload.parse::<u32>() {
            return Ok(Message::TableChanged(oid));
        }
        if payload.starts_with('{') {
            return serde_json::from_str(payload).map(Message::RowsChanged).map_err(|_| Unreadable);
        }
        let number = |w: &str| w.parse::<u64>().map_err(|_| Unreadable);
        let words: Vec<&str> = payload.split(' ').collect();
        match words.as_slice() {
            ["*"] => Ok(Message::Flush),
            ["h", from, micros] => {
                Ok(Message::Heartbeat { from: (*from).to_owned(), micros: number(micros)? })
            }
            ["x", from, n] => Ok(Message::Marker { from: (*from).to_owned(), n: number(n)? }),
            ["a", to, n, by] => {
                Ok(Message::Ack { to: (*to).to_owned(), n: number(n)?, by: (*by).to_owned() })
            }
            ["b", from] => Ok(Message::Goodbye { from: (*from).to_owned() }),
            _ => Err(Unreadable),
        }
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::TableChanged(oid) => write!(f, "{oid}"),
            Message::RowsChanged(change) => {
                let k: serde_json::Map<String, serde_json::Value> =
                    change.k.iter().map(|(c, v)| (c.clone(), serde_json::json!(v))).collect();
                write!(f, "{}", serde_json::json!({"t": change.t, "k": k}))
            }
            Message::Flush => f.write_str("*"),
            Message::Heartbeat { from, micros } => write!(f, "h {from} {micros}"),
            Message::Marker { from, n } => write!(f, "x {from} {n}"),
            Message::Ack { to, n, by } => write!(f, "a {to} {n} {by}"),
            Message::Goodbye { from } => write!(f, "b {from}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_reads_back_as_written() {
        let change =
            RowChange { t: 7, k: HashMap::from([("id".to_owned(), vec!["1".to_owned(), "2".to_owned()])]) };
        for m in [
            Message::TableChanged(16_384),
            Message::RowsChanged(change),
            Message::Flush,
            Message::Heartbeat { from: "a1b2".into(), micros: 5 },
            Message::Marker { from: "a1b2".into(), n: 3 },
            Message::Ack { to: "a1b2".into(), n: 3, by: "c3d4".into() },
            Message::Goodbye { from: "c3d4".into() },
        ] {
            assert_eq!(Message::parse(&m.to_string()), Ok(m.clone()), "{m}");
        }
    }

    #[test]
    fn anything_else_is_unreadable() {
        for payload in ["", "h a1", "x a1 many", "a a1 2", "{\"t\": \"x\"}", "reload schema"] {
            assert_eq!(Message::parse(payload), Err(Unreadable), "{payload:?}");
        }
    }
}
