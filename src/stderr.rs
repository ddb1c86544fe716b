//! Lines on stderr that never panic. `eprintln!` panics when stderr cannot be written (a
//! full disk, `2>/dev/full`), which turns a usage error's exit 2 into a panic's 101: the
//! exit status is what a script reads, so a message that cannot be written is dropped and
//! the status stays. (A closed stderr, `2>&-`, std already treats as a sink.)

use std::fmt::Arguments;
use std::io::Write as _;

/// Writes `args` and a newline to stderr in one locked write, dropping it on failure.
pub fn write_line(args: Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err
        .write_fmt(args)
        .and_then(|()| err.write_all(b"\n"))
        .and_then(|()| err.flush());
}

/// Writes `args` to stderr as they are (a progress line redrawn in place), dropping them on
/// failure.
pub fn write(args: Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.flush());
}

/// `eprintln!` that never panics: see the module's doc.
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {
        $crate::stderr::write_line(format_args!($($arg)*))
    };
}

/// `crate::stderr_text!` that never panics: see the module's doc.
#[macro_export]
macro_rules! stderr_text {
    ($($arg:tt)*) => {
        $crate::stderr::write(format_args!($($arg)*))
    };
}
