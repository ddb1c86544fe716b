//! `--tui`: the terminal dashboard. One column per target — throughput now and over the last
//! minute, errors by kind, latency over the last second and since the start, the watched
//! servers' CPU and memory, the load workers' CPU and who limits the load now — redrawn four
//! times a second from the [`Board`]. Keys: `q`, Esc or Ctrl-C stop the load early (its
//! results are kept and reported), `p` switches percentiles, ←/→ switch targets when the
//! terminal is too narrow for all of them.
//!
//! The terminal is restored when the dashboard ends, when the run is stopped by a signal
//! (the run ends, then the dashboard) and on a panic (a hook restores it first).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline, Wrap};
use ratatui::{Frame, Terminal};

use super::{Board, ServerLive, TargetLive};
use crate::engine::live::TICK;
use crate::stats::ErrorKind;
use crate::stats::LatencySummary;

/// Columns narrower than this show one target at a time.
const MIN_COLUMN: u16 = 46;

/// What the user chose to see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct View {
    /// false: p50, p99, p99.9; true: p90, p99.99, max.
    pub tail: bool,
    /// The target shown when only one fits.
    pub selected: usize,
    /// Colours (off with NO_COLOR).
    pub colour: bool,
}

/// Draws one frame of the dashboard.
pub fn draw(frame: &mut Frame, title: &str, view: &View, targets: &[TargetLive]) {
    let area = frame.area();
    let [top, body] = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(1), Constraint::Min(0)])
        .areas(area);
    let fits_all = !targets.is_empty() && body.width / targets.len() as u16 >= MIN_COLUMN;
    let shown: Vec<(usize, &TargetLive)> = if fits_all {
        targets.iter().enumerate().collect()
    } else {
        targets
            .iter()
            .enumerate()
            .filter(|(i, _)| *i == view.selected.min(targets.len().saturating_sub(1)))
            .collect()
    };
    let mut keys = "q stop · p percentiles".to_string();
    if !fits_all && targets.len() > 1 {
        keys.push_str(&format!(
            " · ←→ target {}/{}",
            view.selected.min(targets.len() - 1) + 1,
            targets.len()
        ));
    }
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("archbench ", Style::default().add_modifier(Modifier::BOLD)),
            Span::raw(title.to_string()),
            Span::raw("  "),
            Span::styled(keys, Style::default().add_modifier(Modifier::DIM)),
        ])),
        top,
    );
    if shown.is_empty() {
        return;
    }
    let columns = Layout::default()
        .direction(Direction::Horizontal)
        .constraints(vec![Constraint::Ratio(1, shown.len() as u32); shown.len()])
        .split(body);
    for ((_, t), area) in shown.iter().zip(columns.iter()) {
        column(frame, *area, view, t);
    }
}

fn grouped(v: f64) -> String {
    crate::units::grouped_rounded(v.max(0.0))
}

/// Microseconds as wrk prints them: 38.00us, 1.25ms, 2.10s.
fn latency(us: u64) -> String {
    crate::units::wrk_time_us(us as f64)
}

/// Three percentiles of a summary, in the order of their names.
type PickPercentiles = fn(&LatencySummary) -> [u64; 3];

/// The styles a column draws with.
struct Styles {
    bold: Style,
    dim: Style,
    /// Errors: red and bold with colours, bold alone without.
    warn: Style,
}

impl Styles {
    fn of(view: &View) -> Styles {
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let warn = if view.colour {
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
        } else {
            bold
        };
        Styles {
            bold,
            dim: Style::default().add_modifier(Modifier::DIM),
            warn,
        }
    }
}

/// One target's column: its frame and title, then its blocks top to bottom.
fn column(frame: &mut Frame, area: Rect, view: &View, t: &TargetLive) {
    let st = Styles::of(view);
    let mut title = format!(" {} ", t.name);
    if !t.run_label.is_empty() {
        title.push_str(&format!("· {} ", t.run_label));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(title, st.bold));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let servers = t.servers.len() as u16;
    let [head, spark, figures, server_area, tail] = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(3),
            Constraint::Length(2),
            Constraint::Length(5),
            Constraint::Length(3 * servers),
            Constraint::Min(0),
        ])
        .areas(inner);
    draw_head(frame, head, t, &st);
    draw_throughput(frame, spark, t);
    let mut lines = latency_lines(view, t, &st);
    lines.push(errors_line(t, &st));
    frame.render_widget(Paragraph::new(lines), figures);
    draw_servers(frame, server_area, t, &st);
    draw_tail(frame, tail, t, &st);
}

/// The head: the plan, the time (of the planned, and left) and throughput now.
fn draw_head(frame: &mut Frame, area: Rect, t: &TargetLive, st: &Styles) {
    let time = match t.planned_s {
        Some(p) => format!(
            "{:.1}s of {p:.0}s · {:.1}s left",
            t.elapsed_s,
            (p - t.elapsed_s).max(0.0)
        ),
        None => format!("{:.1}s", t.elapsed_s),
    };
    let state = if t.finished { " · done" } else { "" };
    frame.render_widget(
        Paragraph::new(vec![
            Line::styled(t.plan.clone(), st.dim),
            Line::raw(format!("{time}{state}")),
            Line::from(vec![
                Span::raw("req/s "),
                Span::styled(grouped(t.rps_now()), st.bold),
                Span::raw(format!("  ({} answered)", grouped(t.completed as f64))),
            ]),
        ]),
        area,
    );
}

/// Throughput over the last minute, one bar per quarter second (the newest on the right).
fn draw_throughput(frame: &mut Frame, area: Rect, t: &TargetLive) {
    let width = area.width as usize;
    let bars: Vec<u64> = t
        .rps_history
        .iter()
        .rev()
        .take(width)
        .rev()
        .map(|r| r.round() as u64)
        .collect();
    frame.render_widget(Sparkline::default().data(&bars), area);
}

/// The latency table: three percentiles (the view's choice) over the last second and since
/// the start.
fn latency_lines(view: &View, t: &TargetLive, st: &Styles) -> Vec<Line<'static>> {
    let (names, pick): ([&str; 3], PickPercentiles) = if view.tail {
        (["p90", "p99.99", "max"], |p| {
            [p.p90_us, p.p99_99_us, p.max_us]
        })
    } else {
        (["p50", "p99", "p99.9"], |p| {
            [p.p50_us, p.p99_us, p.p99_9_us]
        })
    };
    // A summary of no answer has no percentiles: "-", never an invented 0.
    let figures = |l: &LatencySummary| l.recorded().map(|l| pick(l).map(latency));
    let (now, all) = (figures(&t.last_second), figures(&t.since_start));
    let mut lines = vec![Line::styled(
        format!("{:<8}{:>11}{:>13}", "latency", "last 1s", "since start"),
        st.dim,
    )];
    let cell = |f: &Option<[String; 3]>, k: usize| f.as_ref().map_or("-".into(), |f| f[k].clone());
    for (k, name) in names.iter().enumerate() {
        lines.push(Line::raw(format!(
            "{:<8}{:>11}{:>13}",
            name,
            cell(&now, k),
            cell(&all, k)
        )));
    }
    lines
}

/// This run's errors by kind (the complete intervals), beside its total so far.
fn errors_line(t: &TargetLive, st: &Styles) -> Line<'static> {
    let failed: Vec<String> = ErrorKind::ALL
        .iter()
        .filter(|k| t.run_errors_by_kind[**k as usize] > 0)
        .map(|k| {
            format!(
                "{} {}",
                k.name(),
                grouped(t.run_errors_by_kind[*k as usize] as f64)
            )
        })
        .collect();
    if t.errors == 0 && failed.is_empty() {
        Line::raw("errors 0")
    } else {
        Line::styled(
            format!("errors {}: {}", grouped(t.errors as f64), failed.join(", ")),
            st.warn,
        )
    }
}

/// The watched servers, as many as the area has room for (three rows each); never beyond
/// it.
fn draw_servers(frame: &mut Frame, area: Rect, t: &TargetLive, st: &Styles) {
    let fitting = usize::from(area.height / 3);
    for (k, s) in t.servers.iter().take(fitting).enumerate() {
        let rows = Rect {
            y: area.y + 3 * k as u16,
            height: 3,
            ..area
        };
        draw_server(frame, rows, s, st);
    }
}

/// One server in three rows: its cores (of its limit) and memory now, then a minute of
/// samples each of CPU and memory.
fn draw_server(frame: &mut Frame, area: Rect, s: &ServerLive, st: &Styles) {
    let row = |n: u16| Rect {
        y: area.y + n,
        height: 1,
        ..area
    };
    let of_limit = s
        .now
        .limit_cores
        .map(|l| format!(" ({:.0}% of {l:.2})", s.now.cores * 100.0 / l))
        .unwrap_or_default();
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(format!("{} ", s.now.target), st.dim),
            Span::styled(format!("{:.2} cores", s.now.cores), st.bold),
            Span::raw(format!(
                "{of_limit} · {}",
                crate::units::bytes_iec(s.now.memory_bytes as f64)
            )),
        ])),
        row(0),
    );
    // A minute of samples each: CPU and memory, labelled (no colour needed).
    let cpu: Vec<u64> = s
        .cpu_history
        .iter()
        .map(|c| (c * 100.0).round() as u64)
        .collect();
    let memory: Vec<u64> = s.memory_history.iter().copied().collect();
    for (n, label, data) in [(1, "cpu ", cpu), (2, "mem ", memory)] {
        let [name, chart] = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Length(4), Constraint::Min(0)])
            .areas(row(n));
        frame.render_widget(Paragraph::new(Span::styled(label, st.dim)), name);
        let shown = &data[data.len().saturating_sub(chart.width as usize)..];
        frame.render_widget(Sparkline::default().data(shown), chart);
    }
}

/// The tail: each load worker's demand now and who limits the load.
fn draw_tail(frame: &mut Frame, area: Rect, t: &TargetLive, st: &Styles) {
    let workers: Vec<String> = t
        .worker_busy
        .iter()
        .map(|b| b.map_or("?".into(), |b| format!("{:.0}%", b * 100.0)))
        .collect();
    frame.render_widget(
        Paragraph::new(vec![
            Line::raw(format!("client workers {}", workers.join(" "))),
            Line::styled(format!("limiter: {}", t.limiter()), st.bold),
        ])
        .wrap(Wrap { trim: true }),
        area,
    );
}

/// Set by a panic: the dashboard thread stops drawing (a frame half drawn after the terminal
/// was given back would land on the main screen, over the panic's message).
static RELEASED: AtomicBool = AtomicBool::new(false);
/// Set by the dashboard thread once it no longer draws.
static STOPPED_DRAWING: AtomicBool = AtomicBool::new(false);

/// The terminal is in the dashboard's hands (raw mode, alternate screen).
static TAKEN: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back as it was: cooked mode, main screen, cursor shown — once: leaving
/// the alternate screen a second time would move the cursor back to where the dashboard
/// began, over whatever was printed since (a panic's message).
fn restore() {
    if TAKEN.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    }
}

/// Takes the terminal back from the dashboard, wherever it is drawing, for a message that
/// ends the process (a panic's, or a run abandoned): the frame being drawn may finish, then
/// the terminal is as it was.
pub fn release_terminal() {
    RELEASED.store(true, Ordering::SeqCst);
    // Let a frame being drawn finish (not long: the process is ending).
    if TAKEN.load(Ordering::SeqCst) && std::thread::current().name() != Some("archbench-tui") {
        let deadline = Instant::now() + Duration::from_millis(500);
        while !STOPPED_DRAWING.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    restore();
}

/// A panic anywhere restores the terminal before its message prints.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            release_terminal();
            previous(info);
        }));
    });
}

/// The dashboard, drawing on its own thread until [`Dashboard::finish`].
pub struct Dashboard {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Dashboard {
    /// Takes over the terminal (stdout) and draws `board` until finished; `on_quit` is called
    /// when the user asks to stop.
    pub fn start(
        board: Arc<Board>,
        title: String,
        on_quit: Box<dyn Fn() + Send>,
    ) -> io::Result<Dashboard> {
        install_panic_hook();
        RELEASED.store(false, Ordering::SeqCst);
        STOPPED_DRAWING.store(false, Ordering::SeqCst);
        terminal::enable_raw_mode()?;
        TAKEN.store(true, Ordering::SeqCst);
        if let Err(e) = execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(e);
        }
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::Builder::new()
            .name("archbench-tui".into())
            .spawn(move || {
                let r = (|| {
                    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
                    run(&mut terminal, &board, &title, &flag, on_quit.as_ref())
                })();
                STOPPED_DRAWING.store(true, Ordering::SeqCst);
                restore();
                r
            })
            .inspect_err(|_| restore())?;
        Ok(Dashboard {
            done,
            thread: Some(thread),
        })
    }

    /// Stops drawing and restores the terminal (also when the thread failed).
    pub fn finish(mut self) -> io::Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> io::Result<()> {
        self.done.store(true, Ordering::Relaxed);
        let r = match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the dashboard thread panicked"))),
            None => Ok(()),
        };
        restore();
        r
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn run<B: Backend>(
    terminal: &mut Terminal<B>,
    board: &Board,
    title: &str,
    done: &AtomicBool,
    on_quit: &dyn Fn(),
) -> io::Result<()>
where
    B::Error: Into<io::Error>,
{
    let mut view = View {
        colour: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        ..View::default()
    };
    let mut next_draw = Instant::now();
    while !done.load(Ordering::Relaxed) && !RELEASED.load(Ordering::SeqCst) {
        if Instant::now() >= next_draw {
            let targets = board.snapshot();
            terminal
                .draw(|f| draw(f, title, &view, &targets))
                .map_err(Into::into)?;
            next_draw = Instant::now() + TICK;
        }
        // Keys are read as they come; the wait is short so `done` is seen promptly.
        if event::poll(Duration::from_millis(50))? {
            if let Event::Key(k) = event::read()? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                match k.code {
                    _ if ctrl_c => on_quit(),
                    KeyCode::Char('q') | KeyCode::Esc => on_quit(),
                    KeyCode::Char('p') => view.tail = !view.tail,
                    KeyCode::Left => view.selected = view.selected.saturating_sub(1),
                    KeyCode::Right => {
                        view.selected = (view.selected + 1).min(board.len().saturating_sub(1))
                    }
                    _ => continue,
                }
                next_draw = Instant::now();
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::ServerLive;
    use crate::stats::ServerNow;
    use ratatui::backend::TestBackend;

    fn target(name: &str, rps: f64, p99_us: u64) -> TargetLive {
        let mut t = TargetLive::new(
            name,
            &format!("GET http://127.0.0.1:8080/{name} · 50 connections · closed loop · 30s"),
            Some(30.0),
        );
        t.run_label = "run 2".into();
        t.elapsed_s = 12.25;
        t.completed = 503_211;
        t.errors = 3;
        // Ending at `rps`: the figure shown is the latest interval's.
        t.rps_history = (0..48)
            .map(|k| rps * (0.8 + 0.2 * f64::from((k + 2) % 5) / 4.0))
            .collect();
        t.errors_by_kind[ErrorKind::Timeout as usize] = 3;
        t.run_errors_by_kind[ErrorKind::Timeout as usize] = 3;
        let p = |scale: u64| LatencySummary {
            count: 1000,
            p50_us: 40 * scale,
            p90_us: 55 * scale,
            p99_us: p99_us * scale,
            p99_9_us: 2 * p99_us * scale,
            p99_99_us: 3 * p99_us * scale,
            max_us: 10 * p99_us * scale,
            ..LatencySummary::default()
        };
        t.last_second = p(1);
        t.since_start = p(2);
        t.worker_busy = vec![Some(0.76), Some(0.81)];
        t.servers = vec![ServerLive {
            now: ServerNow {
                label: name.into(),
                target: "pid:4242".into(),
                cores: 1.93,
                limit_cores: Some(2.0),
                memory_bytes: 12 << 20,
                at_s: 12.0,
            },
            cpu_history: (0..48).map(|k| 1.5 + f64::from(k % 3) * 0.2).collect(),
            memory_history: (0..48).map(|_| 12 << 20).collect(),
        }];
        t
    }

    fn frame(width: u16, height: u16, view: &View, targets: &[TargetLive]) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal
            .draw(|f| draw(f, "compare intel vs arm", view, targets))
            .unwrap();
        let buf = terminal.backend().buffer();
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_short_terminal_shows_what_fits_and_never_draws_outside() {
        let mut t = target("intel", 41_234.0, 98);
        let server = t.servers[0].clone();
        t.servers = vec![server; 8];
        // Drawing must not panic at any size; the servers shown are those that fit: at
        // 80x24 the column has 21 rows inside its frame, 10 of them above the servers, so
        // three servers of three rows each.
        for (w, h, servers) in [(80, 24, 3), (60, 9, 0), (46, 5, 0), (20, 3, 0), (1, 1, 0)] {
            let text = frame(w, h, &View::default(), std::slice::from_ref(&t));
            assert_eq!(
                text.matches("pid:4242").count(),
                servers,
                "{w}x{h}:\n{text}"
            );
        }
    }

    /// A target with no answer yet has no latency: "-" in both columns, where the figures of
    /// an empty summary showed "0.00us".
    #[test]
    fn no_answer_no_latency() {
        let mut silent = target("stalled", 0.0, 98);
        silent.last_second = LatencySummary::default();
        silent.since_start = LatencySummary::default();
        let text = frame(100, 30, &View::default(), &[target("a", 1.0, 98), silent]);
        let row = text
            .lines()
            .find(|l| l.starts_with("│p99 "))
            .unwrap_or_default();
        let (answered, stalled) = row.split_once("││").unwrap_or_default();
        assert!(answered.contains("98.00us"), "{text}");
        let words: Vec<&str> = stalled.trim_end_matches('│').split_whitespace().collect();
        assert_eq!(words, ["p99", "-", "-"], "{text}");
    }

    #[test]
    fn two_targets_side_by_side() {
        let targets = [target("intel", 41_234.0, 98), target("arm", 52_876.0, 71)];
        insta::assert_snapshot!(frame(100, 30, &View::default(), &targets));
    }

    #[test]
    fn at_80_by_24_one_target_at_a_time_and_the_tail_percentiles() {
        let targets = [target("intel", 41_234.0, 98), target("arm", 52_876.0, 71)];
        let view = View {
            tail: true,
            selected: 1,
            colour: false,
        };
        let text = frame(80, 24, &view, &targets);
        assert!(text.contains("←→ target 2/2"), "{text}");
        assert!(
            text.contains(" arm · run 2 ") && !text.contains(" intel · "),
            "{text}"
        );
        assert!(text.contains("p99.99") && text.contains("max"), "{text}");
        insta::assert_snapshot!(text);
    }
    /// The colours every cell of a frame uses, as "foreground/background".
    fn colours(view: &View, targets: &[TargetLive]) -> std::collections::BTreeSet<String> {
        let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
        terminal
            .draw(|f| draw(f, "compare intel vs arm", view, targets))
            .unwrap();
        let buf = terminal.backend().buffer();
        buf.content()
            .iter()
            .map(|cell| format!("{:?}/{:?}", cell.fg, cell.bg))
            .collect()
    }

    #[test]
    fn readable_on_light_and_dark_backgrounds_and_without_colour() {
        // Errors on screen: the one place a colour is used.
        let targets = [target("intel", 41_234.0, 98), target("arm", 52_876.0, 71)];
        let coloured = View {
            colour: true,
            ..View::default()
        };
        // The terminal's own foreground and background everywhere (so light and dark themes
        // both read), red only for errors; never a background colour.
        assert_eq!(
            colours(&coloured, &targets),
            ["Reset/Reset".to_string(), "Red/Reset".to_string()].into()
        );
        // NO_COLOR: not one colour, and the errors still stand out (bold).
        assert_eq!(
            colours(&View::default(), &targets),
            ["Reset/Reset".to_string()].into()
        );
        let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
        terminal
            .draw(|f| draw(f, "t", &View::default(), &targets))
            .unwrap();
        let buf = terminal.backend().buffer();
        let errors_line_bold = (0..30u16).any(|y| {
            let row: String = (0..100u16).map(|x| buf[(x, y)].symbol()).collect();
            row.find("errors 3: timeout").is_some_and(|at| {
                // Single-width characters up to there (box lines, ASCII): chars are columns.
                let x = row[..at].chars().count() as u16;
                buf[(x, y)].modifier.contains(Modifier::BOLD)
            })
        });
        assert!(errors_line_bold);
    }
}
