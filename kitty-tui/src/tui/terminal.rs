//! The terminal: raw mode and the alternate screen on entry, always
//! restored on the way out (quit, error, panic; signals end the loop).

use crossterm::{cursor, execute, terminal};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// Restores the terminal when dropped (normal exit, error or panic unwind).
pub struct TermGuard;

pub fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        crossterm::event::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        restore();
    }
}

pub type Term = Terminal<CrosstermBackend<std::io::Stdout>>;

pub fn enter() -> std::io::Result<(TermGuard, Term)> {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        prev(info);
    }));
    terminal::enable_raw_mode()?;
    let guard = TermGuard;
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide
    )?;
    // Click selects a rank, the wheel scrolls (KITTY_NO_MOUSE=1 leaves the
    // mouse to the terminal, for selecting text).
    if std::env::var_os("KITTY_NO_MOUSE").is_none_or(|v| v.is_empty()) {
        execute!(std::io::stdout(), crossterm::event::EnableMouseCapture)?;
    }
    let term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    Ok((guard, term))
}
