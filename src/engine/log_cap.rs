//! The cap on one step's log (`max_step_log` in config.toml): past it, lines are dropped
//! from the database and the context folder's log file, with one marker line in their
//! place and one warning event; the step itself goes on.

/// What to do with one line of a step's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the cap: store it.
    Keep,
    /// The first line past the cap: store the marker instead, and warn once.
    Reached,
    /// Past the cap: drop it.
    Drop,
}

/// Counts a step's stored bytes against its cap.
#[derive(Debug)]
pub struct LogCap {
    limit: u64,
    used: u64,
    reached: bool,
}

impl LogCap {
    /// A cap of `limit` bytes of line text (each line's newline counted).
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            used: 0,
            reached: false,
        }
    }

    /// Whether `line` still fits. Once one line did not, no later line does (a short line
    /// after a long one would make a log with holes in it).
    pub fn admit(&mut self, line: &str) -> Verdict {
        if self.reached {
            return Verdict::Drop;
        }
        let size = line.len() as u64 + 1;
        if self.used + size <= self.limit {
            self.used += size;
            return Verdict::Keep;
        }
        self.reached = true;
        Verdict::Reached
    }

    /// The line stored where the dropped ones would have been.
    pub fn marker(&self) -> String {
        format!(
            "[baton] this step's log reached its cap of {} (max_step_log in .baton/config.toml): later lines are not kept; the step goes on",
            crate::workspace::config_size::show(self.limit)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_up_to_the_cap_then_one_marker_then_nothing() {
        let mut cap = LogCap::new(10);
        let seen: Vec<Verdict> = ["abcd", "efgh", "i", "", "jk"]
            .into_iter()
            .map(|l| cap.admit(l))
            .collect();
        // 5 + 5 bytes fill the cap exactly; the next line is the first one past it.
        assert_eq!(
            seen,
            [
                Verdict::Keep,
                Verdict::Keep,
                Verdict::Reached,
                Verdict::Drop,
                Verdict::Drop
            ]
        );
        assert!(cap.marker().contains("cap of 10 B"), "{}", cap.marker());
    }
}
