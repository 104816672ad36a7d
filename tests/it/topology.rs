//! The deployment of issue #25, started by `scripts/topology --check`: a PostgreSQL primary and
//! a streaming replica, two rowgate instances, and Debian's HAProxy in front. The script checks
//! the response cache across instances, reads on the replica, realtime on either instance (for
//! supabase-js and for PocketBase's SDK), and a
//! rolling restart of both instances under load with no failed request.

use std::process::Command;

#[test]
fn two_instances_behind_haproxy_pass_the_topology_checks() {
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/topology"))
        .args(["--check", "--rowgate-bin", env!("CARGO_BIN_EXE_rowgate")])
        .output()
        .expect("scripts/topology runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "scripts/topology --check failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("topology: all checks passed"), "{stdout}");
}
