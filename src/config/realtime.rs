//! `realtime-*`: Supabase Realtime's API at `/realtime/v1` and its bounds.

use super::{invalid, list, ConfigError, ServeArgs};

/// How realtime runs (`realtime-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealtimeSettings {
    /// `realtime-enabled`.
    pub enabled: bool,
    /// `realtime-tables`: on SQLite, the tables whose changes are sent.
    pub tables: Vec<String>,
    /// `realtime-max-queue`: messages queued per connection.
    pub queue: usize,
    /// `realtime-max-channels`: channels per connection.
    pub max_channels: usize,
    /// `realtime-max-events-per-second`: messages per second from one connection.
    pub max_events_per_second: u32,
    /// `realtime-max-message-size`: the largest message from a client, in bytes.
    pub max_message_size: usize,
}

impl Default for RealtimeSettings {
    fn default() -> Self {
        RealtimeSettings {
            enabled: false,
            tables: Vec::new(),
            queue: 1024,
            max_channels: 100,
            max_events_per_second: 100,
            max_message_size: 1024 * 1024,
        }
    }
}

impl RealtimeSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<RealtimeSettings, ConfigError> {
        let d = RealtimeSettings::default();
        let positive = |key: &'static str, v: Option<usize>, default: usize| match v {
            Some(0) => Err(invalid(key, "must be at least 1".into())),
            Some(n) => Ok(n),
            None => Ok(default),
        };
        Ok(RealtimeSettings {
            enabled: a.realtime_enabled.or(f.realtime_enabled).unwrap_or(d.enabled),
            tables: a
                .realtime_tables
                .as_ref()
                .or(f.realtime_tables.as_ref())
                .map(|l| list(l))
                .unwrap_or_default(),
            queue: positive("realtime-max-queue", a.realtime_max_queue.or(f.realtime_max_queue), d.queue)?,
            max_channels: positive(
                "realtime-max-channels",
                a.realtime_max_channels.or(f.realtime_max_channels),
                d.max_channels,
            )?,
            max_events_per_second: positive(
                "realtime-max-events-per-second",
                a.realtime_max_events_per_second.or(f.realtime_max_events_per_second).map(|n| n as usize),
                d.max_events_per_second as usize,
            )? as u32,
            max_message_size: positive(
                "realtime-max-message-size",
                a.realtime_max_message_size.or(f.realtime_max_message_size),
                d.max_message_size,
            )?,
        })
    }
}
