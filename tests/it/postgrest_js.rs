//! End to end with the real `@supabase/postgrest-js` client: `node --test tests/js` against the
//! harness's rowgate. `scripts/test` installs the client (`npm ci` in tests/js).

use std::path::Path;
use std::process::Command;

use crate::support::harness;

#[test]
fn postgrest_js_reads_and_writes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    assert!(
        dir.join("node_modules/@supabase/postgrest-js").is_dir(),
        "postgrest-js is not installed: run `npm ci` in tests/js (scripts/test does)"
    );
    let out = Command::new("node")
        .args(["--test", "--test-reporter=spec", "reads.test.mjs", "writes.test.mjs"])
        .current_dir(&dir)
        .env("ROWGATE_URL", &harness().base)
        .output()
        .expect("node is needed for the postgrest-js tests");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "postgrest-js tests failed:\n{report}");
}
