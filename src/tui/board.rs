//! Board state: the pipeline tabs, the cards grouped into columns, the selection and the
//! filter. Pure data: no I/O, no drawing.

use crate::pipeline::{Pipeline, Status, StatusKind};
use crate::store::{TaskCard, TaskState};

/// Terminal columns collapse by themselves below this width (until `c` says otherwise).
pub const AUTO_COLLAPSE_BELOW: u16 = 140;

/// The board.
#[derive(Debug, Default)]
pub struct Board {
    /// One tab per pipeline.
    pub pipelines: Vec<Pipeline>,
    /// Every task, newest first.
    pub cards: Vec<TaskCard>,
    /// The current tab.
    pub tab: usize,
    /// The current column (index into the tab's statuses).
    pub col: usize,
    /// The selected task, followed across reloads.
    pub selected: Option<i64>,
    /// Selected row per column.
    pub rows: Vec<usize>,
    /// First visible row per column.
    pub scroll: Vec<usize>,
    /// Case-insensitive text a card's title or `#id` must contain.
    pub filter: String,
    /// `Some` once the user toggled collapsing; `None` follows the terminal width.
    pub collapse: Option<bool>,
    /// The workspace's default pipeline: the first tab shown on an empty board.
    pub home: Option<String>,
    /// A task to show, on its own tab, once a snapshot has it (a task just created).
    pub jump_to: Option<i64>,
    /// Indexes into `cards`, per column of the current tab (filter applied).
    columns: Vec<Vec<usize>>,
    /// Columns after the pipeline's own, for statuses its current file no longer has (a
    /// task keeps the copy of the pipeline it was created with, so it can still be there).
    extra: Vec<Status>,
}

impl Board {
    /// The cards whose `⛓` list names task `id` (`"3, 4"`, `"3 failed"`).
    pub fn waiting_on(&self, id: i64) -> Vec<i64> {
        let names = |after: &str| {
            after
                .split(',')
                .any(|part| part.split_whitespace().next().and_then(|n| n.parse().ok()) == Some(id))
        };
        self.cards
            .iter()
            .filter(|c| c.after.as_deref().is_some_and(names))
            .map(|c| c.id)
            .collect()
    }

    /// The current tab's pipeline.
    pub fn pipeline(&self) -> Option<&Pipeline> {
        self.pipelines.get(self.tab)
    }

    /// Whether terminal columns are collapsed at this width.
    pub fn collapsed(&self, width: u16) -> bool {
        self.collapse.unwrap_or(width < AUTO_COLLAPSE_BELOW)
    }

    /// Whether column `i` is drawn as a narrow strip.
    pub fn is_collapsed(&self, i: usize, width: u16) -> bool {
        self.collapsed(width) && self.status(i).is_some_and(|s| s.kind.is_terminal())
    }

    /// The status of column `i`.
    pub fn status(&self, i: usize) -> Option<&Status> {
        let p = self.pipeline()?;
        p.statuses
            .get(i)
            .or_else(|| self.extra.get(i - p.statuses.len()))
    }

    /// The cards of column `i`, in display order.
    pub fn column(&self, i: usize) -> impl Iterator<Item = &TaskCard> {
        self.columns
            .get(i)
            .into_iter()
            .flatten()
            .map(|&c| &self.cards[c])
    }

    /// Number of cards in column `i`.
    pub fn column_len(&self, i: usize) -> usize {
        self.columns.get(i).map_or(0, Vec::len)
    }

    /// Number of columns of the current tab.
    pub fn column_count(&self) -> usize {
        self.pipeline()
            .map_or(0, |p| p.statuses.len() + self.extra.len())
    }

    /// The selected card, if the current column has one.
    pub fn selected_card(&self) -> Option<&TaskCard> {
        let row = *self.rows.get(self.col)?;
        self.columns
            .get(self.col)?
            .get(row)
            .map(|&c| &self.cards[c])
    }

    /// Takes a new snapshot, keeping the tab and following the selected task; a task to
    /// jump to takes the board to its tab once it is there.
    pub fn apply(
        &mut self,
        pipelines: Vec<Pipeline>,
        cards: Vec<TaskCard>,
        home: Option<String>,
        width: u16,
    ) {
        let first_load = self.pipelines.is_empty();
        let tab_id = self.pipeline().map(|p| p.id.clone());
        self.pipelines = pipelines;
        self.cards = cards;
        self.home = home;
        let jump = self
            .jump_to
            .and_then(|id| self.cards.iter().find(|c| c.id == id))
            .map(|c| (c.id, c.pipeline_id.clone()));
        self.tab = match (jump, &tab_id, first_load) {
            (Some((id, pipeline)), _, _) => {
                self.jump_to = None;
                if tab_id.as_deref() != Some(pipeline.as_str()) {
                    self.col = 0;
                    self.rows.clear();
                    self.scroll.clear();
                }
                self.selected = Some(id);
                tab_of(&self.pipelines, &pipeline)
            }
            (None, Some(id), false) => tab_of(&self.pipelines, id),
            // First load: open on the pipeline of the most recently updated task, else on
            // the workspace's own.
            _ => self
                .cards
                .iter()
                .max_by_key(|c| (c.updated_at, c.id))
                .map(|c| c.pipeline_id.as_str())
                .or(self.home.as_deref())
                .and_then(|id| tab_of(&self.pipelines, id)),
        }
        .unwrap_or(0);
        self.regroup(width);
    }

    /// Switches tab by `delta`, wrapping.
    pub fn switch_tab(&mut self, delta: isize, width: u16) {
        let n = self.pipelines.len();
        if n == 0 {
            return;
        }
        let tab = (self.tab as isize + delta).rem_euclid(n as isize) as usize;
        self.show_tab(tab, width);
    }

    /// Goes to tab `number` (counted from 1, as the tab bar shows them); false when there
    /// is no such tab.
    pub fn go_to_tab(&mut self, number: usize, width: u16) -> bool {
        if number == 0 || number > self.pipelines.len() {
            return false;
        }
        self.show_tab(number - 1, width);
        true
    }

    fn show_tab(&mut self, tab: usize, width: u16) {
        self.tab = tab;
        self.selected = None;
        self.col = 0;
        self.rows.clear();
        self.scroll.clear();
        self.regroup(width);
        // Land on a card: when this tab's only cards sit in collapsed columns, show them.
        if self.selected.is_none() && self.columns.iter().any(|c| !c.is_empty()) {
            self.collapse = Some(false);
            self.regroup(width);
        }
    }

    /// Sets the filter and regroups.
    pub fn set_filter(&mut self, filter: String, width: u16) {
        self.filter = filter;
        self.regroup(width);
    }

    /// Recomputes the columns of the current tab, then re-finds the selected task.
    pub fn regroup(&mut self, width: u16) {
        let Some(p) = self.pipelines.get(self.tab) else {
            self.columns.clear();
            return;
        };
        let needle = self.filter.to_lowercase();
        let mut columns = vec![Vec::new(); p.statuses.len()];
        let mut extra: Vec<Status> = Vec::new();
        for (i, card) in self.cards.iter().enumerate() {
            if card.pipeline_id != p.id || !card_matches(card, &needle) {
                continue;
            }
            let col = match p.index_of(&card.status) {
                Some(col) => col,
                // A status the pipeline's file no longer has gets a column of its own.
                None => match extra.iter().position(|s| s.id == card.status) {
                    Some(k) => p.statuses.len() + k,
                    None => {
                        extra.push(Status {
                            id: card.status.clone(),
                            label: format!("{} (removed)", card.status),
                            kind: StatusKind::Queue,
                            step: None,
                        });
                        columns.push(Vec::new());
                        columns.len() - 1
                    }
                },
            };
            if let Some(c) = columns.get_mut(col) {
                c.push(i);
            }
        }
        self.columns = columns;
        self.extra = extra;
        self.rows.resize(self.columns.len(), 0);
        self.scroll.resize(self.columns.len(), 0);
        for (i, rows) in self.rows.iter_mut().enumerate() {
            *rows = (*rows).min(self.columns[i].len().saturating_sub(1));
        }
        self.col = self.col.min(self.columns.len().saturating_sub(1));
        if let Some(id) = self.selected {
            let found = self.columns.iter().enumerate().find_map(|(ci, col)| {
                col.iter()
                    .position(|&c| self.cards[c].id == id)
                    .map(|r| (ci, r))
            });
            match found {
                Some((ci, r)) if !self.is_collapsed(ci, width) => {
                    self.col = ci;
                    self.rows[ci] = r;
                }
                // The followed card went to a folded column (it failed, or is done): unfold
                // them rather than lose it, unless the person folded them with `z`.
                Some((ci, r)) if self.collapse.is_none() => {
                    self.collapse = Some(false);
                    self.col = ci;
                    self.rows[ci] = r;
                }
                _ => {}
            }
        }
        if self.is_collapsed(self.col, width) {
            self.col = (0..self.columns.len())
                .find(|&i| !self.is_collapsed(i, width))
                .unwrap_or(0);
        }
        if self.selected_card().is_none()
            && let Some(i) = (0..self.columns.len())
                .find(|&i| !self.is_collapsed(i, width) && !self.columns[i].is_empty())
        {
            self.col = i;
        }
        self.selected = self.selected_card().map(|c| c.id);
    }

    /// Moves to the next visible column left (`-1`) or right (`1`); false when there is none.
    pub fn move_col(&mut self, delta: isize, width: u16) -> bool {
        let n = self.columns.len() as isize;
        let mut i = self.col as isize;
        loop {
            i += delta;
            if i < 0 || i >= n {
                return false;
            }
            if !self.is_collapsed(i as usize, width) {
                self.col = i as usize;
                self.selected = self.selected_card().map(|c| c.id);
                return true;
            }
        }
    }

    /// The labels of the collapsed columns left (`-1`) or right (`1`) of the current one.
    pub fn collapsed_beyond(&self, delta: isize, width: u16) -> Vec<String> {
        let n = self.columns.len();
        let range: Box<dyn Iterator<Item = usize>> = if delta > 0 {
            Box::new(self.col + 1..n)
        } else {
            Box::new((0..self.col).rev())
        };
        range
            .filter(|&i| self.is_collapsed(i, width))
            .filter_map(|i| self.status(i).map(|s| s.label.clone()))
            .collect()
    }

    /// Whether any column of the current tab is collapsed (the footer says how to expand).
    pub fn any_collapsed(&self, width: u16) -> bool {
        (0..self.columns.len()).any(|i| self.is_collapsed(i, width))
    }

    /// Moves the selection within the column; `capacity` is how many cards fit.
    pub fn move_row(&mut self, delta: isize, capacity: usize) {
        let len = self.column_len(self.col);
        if len == 0 {
            return;
        }
        let row = (self.rows[self.col] as isize + delta).clamp(0, len as isize - 1) as usize;
        self.rows[self.col] = row;
        self.keep_visible(capacity);
        self.selected = self.selected_card().map(|c| c.id);
    }

    /// Scrolls the current column so its selected row is visible.
    pub fn keep_visible(&mut self, capacity: usize) {
        let capacity = capacity.max(1);
        let Some(row) = self.rows.get(self.col).copied() else {
            return;
        };
        let scroll = &mut self.scroll[self.col];
        if row < *scroll {
            *scroll = row;
        } else if row >= *scroll + capacity {
            *scroll = row + 1 - capacity;
        }
    }

    /// Counts for the header: running tasks and tasks waiting for a person (all tabs).
    pub fn counts(&self) -> (usize, usize) {
        let running = self
            .cards
            .iter()
            .filter(|c| c.state == TaskState::Running)
            .count();
        let waiting = self.cards.iter().filter(|c| self.needs_approval(c)).count();
        (running, waiting)
    }

    /// Interrupted tasks (all tabs), waiting for resume or retry.
    pub fn interrupted_count(&self) -> usize {
        self.cards
            .iter()
            .filter(|c| c.state == TaskState::Interrupted)
            .count()
    }

    /// True when the card waits at a gate of its pipeline.
    pub fn needs_approval(&self, card: &TaskCard) -> bool {
        needs_approval(&self.pipelines, card)
    }

    /// The number of step statuses in a card's pipeline (for `2/4`).
    pub fn step_total(&self, card: &TaskCard) -> usize {
        self.pipelines
            .iter()
            .find(|p| p.id == card.pipeline_id)
            .map_or(0, |p| {
                p.statuses
                    .iter()
                    .filter(|s| s.kind == StatusKind::Step)
                    .count()
            })
    }
}

/// True when the card waits at a gate of its pipeline.
pub fn needs_approval(pipelines: &[Pipeline], card: &TaskCard) -> bool {
    card.state == TaskState::Waiting
        && pipelines
            .iter()
            .find(|p| p.id == card.pipeline_id)
            .and_then(|p| p.status(&card.status))
            .is_some_and(|s| s.kind == StatusKind::Gate)
}

/// Fuzzy, as lazygit filters: the needle's characters appear in order (not necessarily
/// together) in `#id title`, ignoring case; spaces in the needle separate words that must
/// each match.
fn card_matches(card: &TaskCard, needle: &str) -> bool {
    let hay = format!("#{} {}", card.id, card.title.to_lowercase());
    needle.split_whitespace().all(|word| in_order(&hay, word))
}

/// True when the characters of `needle` appear in `hay` in order.
fn in_order(hay: &str, needle: &str) -> bool {
    let mut rest = hay.chars();
    needle.chars().all(|n| rest.any(|h| h == n))
}

/// The tab of pipeline `id`.
fn tab_of(pipelines: &[Pipeline], id: &str) -> Option<usize> {
    pipelines.iter().position(|p| p.id == id)
}

#[cfg(test)]
mod fuzzy_tests {
    use super::in_order;

    #[test]
    fn letters_in_order_match_and_out_of_order_do_not() {
        let hay = "#12 add a dark mode toggle";
        assert!(in_order(hay, "dmt"));
        assert!(in_order(hay, "#12"));
        assert!(in_order(hay, "drkmode"));
        assert!(!in_order(hay, "tmd"));
        assert!(!in_order(hay, "zz"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(id: i64, status: &str) -> TaskCard {
        TaskCard {
            id,
            title: format!("task {id}"),
            pipeline_id: "demo".into(),
            status: status.into(),
            state: TaskState::Waiting,
            updated_at: 0,
            steps_done: 0,
            running_since: None,
            tests: None,
            cost: None,
            alert: None,
            pr: None,
            after: None,
            moved_by: None,
        }
    }

    fn demo_board(cards: Vec<TaskCard>) -> Board {
        let demo = crate::pipeline::load_catalog(None, None)
            .get("demo")
            .cloned()
            .expect("the built-in demo pipeline");
        Board {
            pipelines: vec![demo],
            cards,
            ..Board::default()
        }
    }

    /// A followed card that fails or finishes stays selected: the folded terminal columns
    /// unfold for it, unless the person folded them with `z`.
    #[test]
    fn a_selected_card_moving_to_a_folded_column_stays_selected() {
        let width = 80;
        let mut board = demo_board(vec![card(1, "backlog")]);
        board.selected = Some(1);
        board.regroup(width);
        assert!(
            board.collapsed(width),
            "terminal columns fold at {width} columns"
        );
        board.cards = vec![card(1, "failed")];
        board.regroup(width);
        assert_eq!(board.selected, Some(1));
        assert!(!board.collapsed(width));
        // Folded on purpose: the selection moves on instead.
        board.collapse = Some(true);
        board.regroup(width);
        assert_eq!(board.selected, None);
    }

    #[test]
    fn a_status_the_pipeline_file_no_longer_has_gets_its_own_column() {
        let demo = crate::pipeline::load_catalog(None, None)
            .get("demo")
            .cloned()
            .expect("the built-in demo pipeline");
        let own = demo.statuses.len();
        let mut board = Board {
            pipelines: vec![demo],
            cards: vec![card(1, "backlog"), card(2, "qa"), card(3, "qa")],
            ..Board::default()
        };
        board.regroup(200);
        assert_eq!(board.column_count(), own + 1);
        let extra = board.status(own).expect("an extra column");
        assert_eq!(
            (extra.id.as_str(), extra.label.as_str()),
            ("qa", "qa (removed)")
        );
        assert_eq!(board.column_len(own), 2);
        assert_eq!(
            board.column_len(0),
            1,
            "nothing lands in the first column by mistake"
        );
        assert!(board.status(own + 1).is_none());
    }
}
