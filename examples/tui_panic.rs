//! A test fixture: the dashboard on the terminal, then a panic in the main thread — what
//! `tests/cases/live.rs` runs in tmux to see that the panic hook gives the terminal back
//! (cooked mode, main screen, cursor shown) before the panic message prints.

use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let board = archbench::live::Board::new();
    board.add_target(
        "fixture",
        "GET http://127.0.0.1:1/ · 1 connection",
        Some(60.0),
    );
    let _dashboard =
        archbench::live::tui::Dashboard::start(board, "panic fixture".into(), Box::new(|| {}))?;
    // Drawn at least once (four frames a second).
    std::thread::sleep(Duration::from_millis(600));
    panic!("the fixture panics under the dashboard");
}
