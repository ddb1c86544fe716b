//! archbench's integration tests: one binary, cases in tests/cases, fixtures in tests/util.

mod cases;
mod util;
