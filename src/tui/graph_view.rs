//! `g`: the selected task's pipeline as a graph (drawn by [`crate::pipeline::graph`]), its
//! current status highlighted and the path it took marked. A layer on the modal stack.

use super::modal::{Outcome, Target};
use crate::pipeline::Pipeline;
use crate::pipeline::graph::{Mark, TaskPath, draw};
use crossterm::event::{KeyCode, KeyEvent};

/// What the graph view draws: the task's pipeline snapshot and where the task has been.
#[derive(Debug, Clone)]
pub struct GraphData {
    pub pipeline: Pipeline,
    pub path: TaskPath,
}

/// The graph layer.
#[derive(Debug)]
pub struct GraphView {
    pub target: Target,
    /// `None` while loading.
    pub data: Option<Result<GraphData, String>>,
    /// First line shown.
    pub scroll: u16,
}

impl GraphView {
    /// A view of `target`'s graph, loading.
    pub fn new(target: Target) -> Self {
        Self {
            target,
            data: None,
            scroll: 0,
        }
    }

    /// Takes the loaded data; on a screen `height` rows high, scrolls so that the current
    /// status is in view.
    pub fn loaded(&mut self, result: Result<GraphData, String>, height: u16) {
        if let Ok(data) = &result {
            let here = draw(&data.pipeline, &data.path)
                .iter()
                .position(|l| l.0.first().is_some_and(|(_, m)| *m == Mark::Here));
            // The body is the screen less the header, status line and borders.
            let rows = height.saturating_sub(4) as usize;
            if let Some(i) = here.filter(|&i| i + 2 > rows) {
                self.scroll = (i + 3 - rows) as u16;
            }
        }
        self.data = Some(result);
    }

    /// The last line that can be the first shown.
    fn max_scroll(&self) -> u16 {
        match &self.data {
            Some(Ok(d)) => draw(&d.pipeline, &d.path).len().saturating_sub(1) as u16,
            _ => 0,
        }
    }

    /// Scrolling keys; anything else closes the view.
    pub fn key(&mut self, key: KeyEvent) -> Outcome {
        let out = self.scroll_key(key);
        self.scroll = self.scroll.min(self.max_scroll());
        out
    }

    fn scroll_key(&mut self, key: KeyEvent) -> Outcome {
        let by = |n: u16, down: bool, s: &mut u16| {
            *s = if down {
                s.saturating_add(n)
            } else {
                s.saturating_sub(n)
            };
            Outcome::Stay
        };
        match key.code {
            KeyCode::Down | KeyCode::Char('j') => by(1, true, &mut self.scroll),
            KeyCode::Up | KeyCode::Char('k') => by(1, false, &mut self.scroll),
            KeyCode::PageDown | KeyCode::Char(' ') => by(10, true, &mut self.scroll),
            KeyCode::PageUp => by(10, false, &mut self.scroll),
            KeyCode::Home => {
                self.scroll = 0;
                Outcome::Stay
            }
            _ => Outcome::Close,
        }
    }
}
