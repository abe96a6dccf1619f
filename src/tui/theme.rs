//! Colours and emphasis. Only the 16 named terminal colours are used, so the board reads
//! the same on a 16-colour terminal; with `NO_COLOR` every colour is dropped and only
//! bold/dim/reverse remain.

use ratatui::style::{Color, Modifier, Style};

/// The styles the views use, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Whether colours are used at all (false under `NO_COLOR`).
    pub color: bool,
}

impl Theme {
    /// Colours unless `NO_COLOR` is set (to anything, as no-color.org says).
    pub fn from_env() -> Self {
        Self {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    /// A theme with colours on or off.
    pub fn new(color: bool) -> Self {
        Self { color }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    /// Plain text.
    pub fn text(&self) -> Style {
        Style::new()
    }
    /// Secondary text: timestamps, hints, greyed-out options.
    pub fn dim(&self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new().add_modifier(Modifier::DIM)
        }
    }
    /// Titles and the focused frame.
    pub fn title(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    /// Frame of an unfocused area.
    pub fn border(&self) -> Style {
        self.dim()
    }
    /// Frame of the focused area.
    pub fn border_focus(&self) -> Style {
        self.fg(Color::Cyan)
    }
    /// The selected row or card.
    pub fn selected(&self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }
    /// Task ids.
    pub fn id(&self) -> Style {
        self.fg(Color::Blue)
    }
    /// Running things: spinner, ● step.
    pub fn running(&self) -> Style {
        self.fg(Color::Cyan)
    }
    /// Succeeded things.
    pub fn ok(&self) -> Style {
        self.fg(Color::Green)
    }
    /// Failed things and error messages.
    pub fn error(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    /// Needs a person: approval, interrupted.
    pub fn attention(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    /// The interrupted banner.
    pub fn banner(&self) -> Style {
        if self.color {
            Style::new().fg(Color::Black).bg(Color::Yellow)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }
    /// Key names in hints and help.
    pub fn key(&self) -> Style {
        self.fg(Color::Yellow)
    }
    /// A log line that matches the search.
    pub fn search_match(&self) -> Style {
        if self.color {
            Style::new().bg(Color::Yellow).fg(Color::Black)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }
    /// stderr lines get a marker in this style.
    pub fn stderr(&self) -> Style {
        self.fg(Color::Red)
    }
}
