//! The archbench binary: everything happens in the library; this maps it to an exit status.

fn main() {
    std::process::exit(archbench::cli::main_with_args(std::env::args_os()));
}
