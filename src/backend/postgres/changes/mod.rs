//! The response cache's change feed from PostgreSQL: notifications from the triggers
//! `rowgate cache install` creates, or logical decoding of the write-ahead log (`feed`: the
//! loop; `replication`: the replication connection; `pgoutput`: its messages), heartbeats and acknowledgements between instances (`listener`), and the
//! install itself (`install`); the same feed's rows for realtime (`realtime`, with `values`
//! turning the stream's text into typed JSON).

pub mod feed;
pub mod install;
pub mod listener;
mod pgoutput;
pub mod realtime;
mod replication;
mod values;
