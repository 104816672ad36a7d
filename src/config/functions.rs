//! `functions-*`: the Edge Functions served at `/functions/v1`, and the bounds each runs in.

use std::path::PathBuf;
use std::time::Duration;

use super::{either, invalid, ConfigError, PlatformArgs};

/// Edge Functions (docs/functions.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionsSettings {
    /// `functions-dir`: where they are; none serves none.
    pub dir: Option<PathBuf>,
    /// `functions-deno`: the Deno executable.
    pub deno: PathBuf,
    /// `functions-timeout`: an invocation's wall time.
    pub timeout: Duration,
    /// `functions-cpu`: the CPU time an invocation may use.
    pub cpu: Duration,
    /// `functions-memory`: a function's heap, in MiB.
    pub memory_mib: u32,
    /// `functions-idle`: how long an unused function's process is kept.
    pub idle: Duration,
    /// `functions-verify-jwt`: a function's default `verify_jwt`.
    pub verify_jwt: bool,
}

impl FunctionsSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &PlatformArgs, f: &PlatformArgs) -> Result<FunctionsSettings, ConfigError> {
        let dir = either(&a.functions_dir, &f.functions_dir).filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = &dir {
            if !dir.is_dir() {
                return Err(invalid("functions-dir", format!("{} is not a directory", dir.display())));
            }
        }
        let timeout = a.functions_timeout.or(f.functions_timeout).unwrap_or(150);
        if timeout == 0 {
            return Err(invalid("functions-timeout", "at least one second".into()));
        }
        let cpu = a.functions_cpu.or(f.functions_cpu).unwrap_or(5.0);
        if !(cpu.is_finite() && cpu >= 0.1) {
            return Err(invalid("functions-cpu", "at least 0.1 seconds".into()));
        }
        let memory_mib = a.functions_memory.or(f.functions_memory).unwrap_or(256);
        if memory_mib < 16 {
            return Err(invalid("functions-memory", "at least 16 MiB".into()));
        }
        Ok(FunctionsSettings {
            dir,
            deno: either(&a.functions_deno, &f.functions_deno).unwrap_or_else(|| PathBuf::from("deno")),
            timeout: Duration::from_secs(timeout),
            cpu: Duration::from_secs_f64(cpu),
            memory_mib,
            idle: Duration::from_secs(a.functions_idle.or(f.functions_idle).unwrap_or(300)),
            verify_jwt: a.functions_verify_jwt.or(f.functions_verify_jwt).unwrap_or(true),
        })
    }
}
