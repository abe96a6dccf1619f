//! Schedules after downtime: at start, a `schedule` trigger whose last slot passed while no
//! engine ran fires once for it when it is within `schedule_grace`; older slots are
//! skipped, with an event saying how many. Each trigger remembers the last slot it handled
//! (the store's meta table), and each firing keeps its dedupe key, so a slot never fires
//! twice.

use super::triggers::{self, Kind};
use super::{Engine, EngineEvent};
use crate::store::NewEvent;
use chrono::{DateTime, Local, Timelike};
use serde_json::json;
use std::time::Duration;

/// Slots counted at most when saying how many were skipped.
const COUNT_CAP: usize = 1000;

/// What a trigger missed between `since` and now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missed {
    /// The latest slot, to fire now (within the grace period).
    pub fire: Option<DateTime<Local>>,
    /// Slots skipped (capped at [`COUNT_CAP`]).
    pub skipped: usize,
    /// The newest skipped slot.
    pub last_skipped: Option<DateTime<Local>>,
}

/// The memory key of a schedule trigger's last handled slot.
pub fn memo_key(pipeline: &str, index: usize) -> String {
    format!("schedule-seen:{pipeline}:{index}")
}

/// The slots of `cron` after `since` and at most `now`: the latest fires when it is at most
/// `grace` old; the rest are skipped.
pub fn missed(
    cron: &croner::Cron,
    since: DateTime<Local>,
    now: DateTime<Local>,
    grace: Duration,
) -> Missed {
    let mut out = Missed {
        fire: None,
        skipped: 0,
        last_skipped: None,
    };
    // Slots are whole seconds (the search keeps the sub-second part of its start).
    let Some(latest) = cron
        .find_previous_occurrence(&now, true)
        .ok()
        .and_then(|l| l.with_nanosecond(0))
        .filter(|l| *l > since)
    else {
        return out;
    };
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    let end = if now - latest <= grace {
        out.fire = Some(latest);
        latest
    } else {
        now + chrono::Duration::seconds(1)
    };
    let mut at = since;
    while let Some(next) = cron
        .find_next_occurrence(&at, false)
        .ok()
        .and_then(|n| n.with_nanosecond(0))
    {
        if next >= end || next > now || out.skipped >= COUNT_CAP {
            break;
        }
        out.skipped += 1;
        out.last_skipped = Some(next);
        at = next;
    }
    out
}

impl Engine {
    /// Remembers now as the start of schedules seen for the first time (added by a reload),
    /// so the next start knows what they missed.
    pub(super) async fn note_new_schedules(&self) {
        let keys: Vec<String> = self
            .triggers
            .triggers
            .iter()
            .filter(|t| matches!(t.kind, Kind::Schedule(_)))
            .map(|t| memo_key(&t.pipeline, t.index))
            .collect();
        if keys.is_empty() {
            return;
        }
        let stamp = Local::now().to_rfc3339();
        let written = self
            .store
            .write(move |db| {
                for k in &keys {
                    if db.meta(k)?.is_none() {
                        db.set_meta(k, &stamp)?;
                    }
                }
                Ok::<_, crate::store::StoreError>(())
            })
            .await;
        if let Err(e) = written {
            tracing::warn!("remembering new schedules failed: {e}");
        }
    }

    /// Fires (or skips) what each schedule missed while no engine ran; once, at start.
    pub(super) async fn catch_up_schedules(&mut self) {
        let schedules: Vec<(usize, String, String, croner::Cron)> = self
            .triggers
            .triggers
            .iter()
            .enumerate()
            .filter_map(|(i, t)| match &t.kind {
                Kind::Schedule(c) => Some((
                    i,
                    t.pipeline.clone(),
                    memo_key(&t.pipeline, t.index),
                    (**c).clone(),
                )),
                _ => None,
            })
            .collect();
        if schedules.is_empty() {
            return;
        }
        let keys: Vec<String> = schedules.iter().map(|s| s.2.clone()).collect();
        let seen = self
            .store
            .read(move |db| {
                keys.iter()
                    .map(|k| db.meta(k))
                    .collect::<crate::store::Result<Vec<_>>>()
            })
            .await
            .unwrap_or_default();
        let now = Local::now();
        let grace = self.cfg.schedule_grace;
        let mut firings = Vec::new();
        let mut skips = Vec::new();
        for ((i, pipeline, _, cron), seen) in schedules.iter().zip(seen) {
            let Some(since) = seen.and_then(|s| DateTime::parse_from_rfc3339(&s).ok()) else {
                continue;
            };
            let m = missed(cron, since.with_timezone(&Local), now, grace);
            let t = &self.triggers.triggers[*i];
            if let Some(at) = m.fire {
                firings.push(triggers::schedule_firing(*i, t, at));
            }
            if m.skipped > 0 {
                let more = if m.skipped >= COUNT_CAP {
                    "at least "
                } else {
                    ""
                };
                let last = m
                    .last_skipped
                    .map(|l| l.format("%Y-%m-%d %H:%M").to_string())
                    .unwrap_or_default();
                skips.push(NewEvent {
                    task_id: None,
                    category: "trigger",
                    kind: "schedule.skipped",
                    summary: format!(
                        "schedule trigger {} of {pipeline} missed {more}{} run(s) while no engine ran (the last skipped at {last}); {}",
                        t.index + 1,
                        m.skipped,
                        if m.fire.is_some() {
                            "only the latest fires now, so they were skipped".to_string()
                        } else {
                            format!(
                                "they are older than schedule_grace ({}) and were skipped",
                                humantime::format_duration(grace)
                            )
                        }
                    ),
                    data: json!({ "trigger": t.index, "skipped": m.skipped }),
                    actor: "engine",
                    level: "warn",
                });
            }
        }
        for s in &skips {
            tracing::warn!("{}", s.summary);
            let _ = self.events.send(EngineEvent::Notice {
                task_id: None,
                text: s.summary.clone(),
            });
        }
        let recorded = self
            .store
            .write(move |db| {
                for s in &skips {
                    db.insert_event(s)?;
                }
                Ok::<_, crate::store::StoreError>(())
            })
            .await;
        if let Err(e) = recorded {
            tracing::error!("recording skipped schedules failed: {e}");
        }
        self.record_firings(firings).await;
        // Every slot up to now is handled: remember that, also for triggers seen first.
        let stamp = now.to_rfc3339();
        let keys: Vec<String> = schedules.into_iter().map(|s| s.2).collect();
        let written = self
            .store
            .write(move |db| {
                for k in &keys {
                    db.set_meta(k, &stamp)?;
                }
                Ok::<_, crate::store::StoreError>(())
            })
            .await;
        if let Err(e) = written {
            tracing::warn!("remembering schedule slots failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn cron(s: &str) -> croner::Cron {
        croner::parser::CronParser::new().parse(s).unwrap()
    }

    fn at(h: u32, m: u32) -> DateTime<Local> {
        Local.with_ymd_and_hms(2025, 3, 10, h, m, 0).unwrap()
    }

    #[test]
    fn slots_are_whole_seconds_whatever_the_clock_says() {
        let hourly = cron("0 * * * *");
        let now = at(10, 20) + chrono::Duration::milliseconds(345);
        let m = missed(&hourly, at(8, 30), now, HOUR);
        assert_eq!(m.fire, Some(at(10, 0)));
        assert_eq!(m.skipped, 1);
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn the_latest_slot_within_grace_fires_and_older_ones_are_skipped() {
        let hourly = cron("0 * * * *");
        let m = missed(&hourly, at(6, 30), at(10, 20), HOUR);
        assert_eq!(m.fire, Some(at(10, 0)));
        assert_eq!(m.skipped, 3, "07:00, 08:00 and 09:00");
        assert_eq!(m.last_skipped, Some(at(9, 0)));
    }

    #[test]
    fn a_slot_older_than_grace_is_skipped_too() {
        let daily = cron("0 3 * * *");
        let m = missed(&daily, at(2, 0), at(10, 0), HOUR);
        assert_eq!(m.fire, None);
        assert_eq!(m.skipped, 1);
        assert_eq!(m.last_skipped, Some(at(3, 0)));
    }

    #[test]
    fn nothing_missed_means_nothing_to_do() {
        let daily = cron("0 3 * * *");
        let m = missed(&daily, at(3, 0), at(10, 0), HOUR);
        assert_eq!(
            m,
            Missed {
                fire: None,
                skipped: 0,
                last_skipped: None
            }
        );
    }

    #[test]
    fn a_fast_schedule_counts_up_to_its_cap() {
        let every_second = cron("* * * * * *");
        let m = missed(&every_second, at(0, 0), at(10, 0), Duration::ZERO);
        assert_eq!(m.skipped, COUNT_CAP);
    }
}
