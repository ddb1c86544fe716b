//! A test that cannot run fails by default; skipped on request, it is listed on the process's
//! own standard error as the process ends.

use std::process::{Command, Output};

/// The fixture (cluster/src/bin/skip-fixture.rs), with or without the opt-in.
fn fixture(allow: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skip-fixture"));
    cmd.env_remove(archbench_cluster::skips::ALLOW);
    if let Some(v) = allow {
        cmd.env(archbench_cluster::skips::ALLOW, v);
    }
    cmd.output().unwrap()
}

#[test]
fn a_test_that_cannot_run_fails_by_default_naming_what_is_missing() {
    for allow in [None, Some("0"), Some("")] {
        let o = fixture(allow);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(101), "{allow:?}: {err}");
        assert!(err.contains("frobnicate is not installed"), "{err}");
        assert!(err.contains("ARCHBENCH_ALLOW_SKIPS=1"), "{err}");
        assert!(!err.contains("did not run"), "{err}");
    }
}

#[test]
fn a_skip_asked_for_is_listed_when_the_process_ends() {
    let o = fixture(Some("1"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "SKIPPED (ARCHBENCH_ALLOW_SKIPS is set): 1 test(s) of skip-fixture did not run"
        ),
        "{err}"
    );
    assert!(
        err.contains("fixture::needs_a_missing_tool: frobnicate is not installed"),
        "{err}"
    );
}
