//! A process that has one "test" that cannot run, for the test of the skip list
//! (cluster/tests/skips.rs; a binary, so that cargo builds it for that test): the thread carries a test's name, as the test harness's do.

fn main() {
    let test = std::thread::Builder::new()
        .name("fixture::needs_a_missing_tool".into())
        .spawn(|| archbench_cluster::skips::cannot_run("frobnicate is not installed"));
    let code = match test.map(|t| t.join()) {
        Ok(Ok(())) => 0,
        _ => 101,
    };
    std::process::exit(code);
}
