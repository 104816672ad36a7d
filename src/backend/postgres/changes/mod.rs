//! The response cache's change feed from PostgreSQL: notifications from the triggers
//! `rowgate cache install` creates, or logical decoding of the write-ahead log
//! (`decoder`), heartbeats and acknowledgements between instances (`listener`), and the
//! install itself (`install`); the same feed's rows for realtime (`realtime`, with `values`
//! turning the stream's text into typed JSON).

pub mod decoder;
pub mod install;
pub mod listener;
pub mod realtime;
mod values;
