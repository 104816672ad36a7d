//! The functions' counters: invocations by outcome, process starts and their time, log lines
//! dropped — per function, in Prometheus text.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Default)]
struct Counts {
    outcomes: BTreeMap<&'static str, u64>,
    boots: u64,
    boot_failures: u64,
    boot_seconds: f64,
    dropped_lines: u64,
}

/// A per-function counter family: its name's end, its help, its value.
type Family = (&'static str, &'static str, fn(&Counts) -> String);

static COUNTS: Mutex<BTreeMap<String, Counts>> = Mutex::new(BTreeMap::new());

fn with(name: &str, f: impl FnOnce(&mut Counts)) {
    let mut counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
    f(counts.entry(name.to_owned()).or_default());
}

/// An invocation of `name` ended with `outcome` (`ok`, `error`, `limit`, `boot_error`).
pub fn invoked(name: &str, outcome: &'static str) {
    with(name, |c| *c.outcomes.entry(outcome).or_default() += 1);
}

/// A process of `name` started listening after `took`.
pub fn booted(name: &str, took: Duration) {
    with(name, |c| {
        c.boots += 1;
        c.boot_seconds += took.as_secs_f64();
    });
}

/// A process of `name` failed to start.
pub fn boot_failed(name: &str) {
    with(name, |c| c.boot_failures += 1);
}

/// A line `name` logged was dropped.
pub fn log_dropped(name: &str) {
    with(name, |c| c.dropped_lines += 1);
}

/// The counters in Prometheus text.
pub fn render(out: &mut String) {
    let counts = COUNTS.lock().unwrap_or_else(|e| e.into_inner());
    out.push_str(
        "# HELP rowgate_functions_invocations_total Edge Function invocations by outcome: ok (answered), error (the \
         process failed), limit (stopped by functions-timeout or functions-memory), boot_error.\n\
         # TYPE rowgate_functions_invocations_total counter\n",
    );
    for (name, c) in counts.iter() {
        for (outcome, n) in &c.outcomes {
            out.push_str(&format!(
                "rowgate_functions_invocations_total{{function=\"{name}\",outcome=\"{outcome}\"}} {n}\n"
            ));
        }
    }
    let families: [Family; 4] = [
        ("boots_total", "Edge Function processes started.", |c| c.boots.to_string()),
        ("boot_failures_total", "Edge Function processes that did not start.", |c| {
            c.boot_failures.to_string()
        }),
        ("boot_seconds_total", "Time Edge Function processes took to start listening.", |c| {
            c.boot_seconds.to_string()
        }),
        ("log_lines_dropped_total", "Lines a function logged past the rate limit.", |c| {
            c.dropped_lines.to_string()
        }),
    ];
    for (family, help, value) in families {
        out.push_str(&format!(
            "# HELP rowgate_functions_{family} {help}\n# TYPE rowgate_functions_{family} counter\n"
        ));
        for (name, c) in counts.iter() {
            out.push_str(&format!("rowgate_functions_{family}{{function=\"{name}\"}} {}\n", value(c)));
        }
    }
}
