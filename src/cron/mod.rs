//! pg_cron's schedules (docs/cron.md): five cron fields (names, ranges, steps and lists; `$`
//! for a month's last day), `@hourly`-style shorthands, or `N seconds` (1 to 59) — and when
//! each next falls due, in UTC. The database refuses a schedule its own check does not
//! accept (`cron._valid_schedule`); this is the same grammar, for the instances that run
//! the jobs. A seconds schedule falls on multiples of N seconds since the epoch, so that every
//! instance computes the same ticks.

use chrono::{DateTime, TimeDelta, Utc};

/// When a job runs.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Every N seconds.
    Every(u32),
    /// A cron expression.
    Cron(Box<croner::Cron>),
}

impl Schedule {
    /// Parses a schedule as `cron.schedule` takes it.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let invalid = || format!("invalid schedule: {text}");
        let s = text.trim().to_ascii_lowercase();
        if let Some(n) = s.strip_suffix("seconds").or_else(|| s.strip_suffix("second")) {
            return match n.trim().parse::<u32>() {
                Ok(n) if (1..=59).contains(&n) => Ok(Schedule::Every(n)),
                _ => Err(invalid()),
            };
        }
        let fields = match s.as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_owned(),
            "@monthly" => "0 0 1 * *".to_owned(),
            "@weekly" => "0 0 * * 0".to_owned(),
            "@daily" | "@midnight" => "0 0 * * *".to_owned(),
            "@hourly" => "0 * * * *".to_owned(),
            _ => {
                let fields: Vec<&str> = s.split_whitespace().collect();
                if fields.len() != 5 || !fields.iter().enumerate().all(|(i, f)| field_valid(i, f)) {
                    return Err(invalid());
                }
                // pg_cron's `$` is croner's `L`.
                let day = fields[2].replace('$', "L");
                format!("{} {} {day} {} {}", fields[0], fields[1], fields[3], fields[4])
            }
        };
        let parser =
            croner::parser::CronParser::builder().seconds(croner::parser::Seconds::Disallowed).build();
        parser.parse(&fields).map(|c| Schedule::Cron(Box::new(c))).map_err(|_| invalid())
    }

    /// The first time after `now` it falls due.
    pub fn next_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Every(n) => {
                let n = i64::from(*n);
                let next = (now.timestamp().div_euclid(n) + 1) * n;
                DateTime::from_timestamp(next, 0)
            }
            Schedule::Cron(cron) => cron.find_next_occurrence(&now, false).ok(),
        }
    }
}

/// Whether field `i` (0: minute .. 4: day of week) is a list of `*`, a value or a range, each
/// with an optional step — as `cron._valid_schedule` checks it (croner alone would also take
/// its own extensions, `L`, `W` and `#`, which pg_cron does not).
fn field_valid(i: usize, field: &str) -> bool {
    const MONTHS: [&str; 12] =
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let (low, high) = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)][i];
    field.split(',').all(|item| {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        if step.is_some_and(|s| s.len() > 4 || !s.bytes().all(|b| b.is_ascii_digit()) || s.parse() == Ok(0)) {
            return false;
        }
        let bounds: Vec<&str> = range.split('-').collect();
        let number = |b: &str| {
            (b.len() <= 4 && b.bytes().all(|c| c.is_ascii_digit())).then(|| b.parse::<u32>().ok()).flatten()
        };
        let valid = |b: &str| match number(b) {
            Some(n) => (low..=high).contains(&n),
            None => (i == 3 && MONTHS.contains(&b)) || (i == 4 && DAYS.contains(&b)),
        };
        match bounds.as_slice() {
            ["*"] => true,
            ["$"] => i == 2,
            [one] => valid(one),
            [a, b] => valid(a) && valid(b) && number(a).zip(number(b)).is_none_or(|(a, b)| a <= b),
            _ => false,
        }
    })
}

static SUCCEEDED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static FAILED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A job's run ended (this instance ran it).
pub fn ran(succeeded: bool) {
    let counter = if succeeded { &SUCCEEDED } else { &FAILED };
    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The jobs' counters in Prometheus text.
pub fn render_metrics(out: &mut String) {
    use std::sync::atomic::Ordering::Relaxed;
    out.push_str(
        "# HELP rowgate_cron_runs_total Scheduled jobs this instance ran, by outcome.\n\
         # TYPE rowgate_cron_runs_total counter\n",
    );
    out.push_str(&format!("rowgate_cron_runs_total{{status=\"succeeded\"}} {}\n", SUCCEEDED.load(Relaxed)));
    out.push_str(&format!("rowgate_cron_runs_total{{status=\"failed\"}} {}\n", FAILED.load(Relaxed)));
}

/// What pg_cron records of a run that returned or changed `n` rows.
pub fn rows(n: u64) -> String {
    match n {
        1 => "1 row".to_owned(),
        n => format!("{n} rows"),
    }
}

/// How long until `at`, from `now` (zero if past).
pub fn until(at: DateTime<Utc>, now: DateTime<Utc>) -> std::time::Duration {
    (at - now).max(TimeDelta::zero()).to_std().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn next(schedule: &str, now: &str) -> String {
        Schedule::parse(schedule).unwrap().next_after(at(now)).unwrap().to_rfc3339()
    }

    #[test]
    fn pg_cron_schedules_fall_due_as_pg_cron_runs_them() {
        assert_eq!(next("30 seconds", "2026-11-28T10:00:10Z"), "2026-11-28T10:00:30+00:00");
        assert_eq!(next("1 second", "2026-11-28T10:00:10Z"), "2026-11-28T10:00:11+00:00");
        assert_eq!(next("*/5 * * * *", "2026-11-28T10:01:10Z"), "2026-11-28T10:05:00+00:00");
        assert_eq!(next("0 3 * * *", "2026-11-28T10:00:00Z"), "2026-11-29T03:00:00+00:00");
        assert_eq!(next("0 12 $ * *", "2026-11-28T13:00:00Z"), "2026-11-30T12:00:00+00:00");
        assert_eq!(next("0 9 * * mon-fri", "2026-11-28T10:00:00Z"), "2026-11-30T09:00:00+00:00");
        assert_eq!(next("0 0 * * 7", "2026-11-28T10:00:00Z"), "2026-11-29T00:00:00+00:00");
        assert_eq!(next("0 0 1 jan *", "2026-11-28T10:00:00Z"), "2027-01-01T00:00:00+00:00");
        assert_eq!(next("0 0 1 jul-aug *", "2026-11-28T10:00:00Z"), "2027-07-01T00:00:00+00:00");
        assert_eq!(next("0,30 */2 * * *", "2026-11-28T10:40:00Z"), "2026-11-28T12:00:00+00:00");
        assert_eq!(next("@hourly", "2026-11-28T10:00:00Z"), "2026-11-28T11:00:00+00:00");
        for bad in [
            "",
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "0 24 * * *",
            "0 0 0 * *",
            "0 0 * 13 *",
            "61 seconds",
            "0 seconds",
            "@reboot",
            "every minute",
            "*/0 * * * *",
            "L * * * *",
            "0 0 L * *",
            "0 0 * * 5#3",
            "5-1 * * * *",
            "1,,2 * * * *",
        ] {
            assert_eq!(Schedule::parse(bad).unwrap_err(), format!("invalid schedule: {bad}"), "{bad:?}");
        }
    }
}
