//! Who set the ceiling of a distributed run: the workers' own verdicts first.

use crate::stats::{LimiterSide, RunResult, SourceRun};

/// The verdict of a distributed run: when any worker was client-bound, the load generators
/// set the ceiling, not nginx — the guide's own pitfall. The first such worker's own reason
/// says why (its CPU, or too few connections for the rate).
pub fn limiter(m: &RunResult) -> crate::stats::Limiter {
    let bound: Vec<&SourceRun> = m
        .sources
        .iter()
        .filter(|s| matches!(s.limiter.side, LimiterSide::Client | LimiterSide::Both))
        .collect();
    let mut verdict = crate::monitor::limiter(m);
    if let Some(first) = bound.first() {
        verdict.side = LimiterSide::Client;
        verdict.reason = format!(
            "the load generators set the ceiling, not nginx: {} of {} workers were client-bound ({}); {}: {}",
            bound.len(),
            m.sources.len(),
            bound
                .iter()
                .map(|s| format!("{} {:.0}% busy", s.file, s.client.busiest_worker_percent))
                .collect::<Vec<_>>()
                .join(", "),
            first.file,
            first.limiter.reason
        );
    }
    if !m.lost_sources.is_empty() {
        verdict.reason.push_str(&format!(
            "; {} worker(s) lost, their share missing: {}",
            m.lost_sources.len(),
            m.lost_sources
                .iter()
                .map(|l| format!("{}: {}", l.name, l.reason))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    verdict
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::stats::{Limiter, LostSource};

    fn empty() -> RunResult {
        RunResult::from_recording(
            crate::stats::Recorder::new(None),
            crate::stats::PlanSummary::default(),
            crate::stats::Environment::default(),
            crate::stats::RunTimes {
                started_at: SystemTime::UNIX_EPOCH,
                first_send_at: None,
                elapsed_s: 1.0,
                interrupted: false,
            },
        )
    }

    fn source(file: &str, side: LimiterSide, reason: &str) -> SourceRun {
        let r = empty();
        SourceRun {
            file: file.into(),
            started_at: r.started_at.clone(),
            first_send_at: None,
            start_offset_s: 0.0,
            plan: r.plan.clone(),
            environment: r.environment.clone(),
            totals: r.totals.clone(),
            interrupted: false,
            client: r.client.clone(),
            limiter: Limiter {
                side,
                reason: reason.into(),
            },
            pacing: None,
        }
    }

    #[test]
    fn one_client_bound_worker_makes_the_load_generators_the_limit() {
        let mut m = empty();
        m.sources = vec![
            source("worker 0", LimiterSide::Neither, "fine"),
            source(
                "worker 1",
                LimiterSide::Client,
                "too few connections for this rate",
            ),
        ];
        let v = limiter(&m);
        assert_eq!(v.side, LimiterSide::Client);
        assert!(
            v.reason
                .starts_with("the load generators set the ceiling, not nginx: 1 of 2 workers"),
            "{}",
            v.reason
        );
        assert!(
            v.reason.contains("worker 1: too few connections"),
            "{}",
            v.reason
        );
        m.sources.pop();
        m.lost_sources = vec![LostSource {
            name: "worker 1".into(),
            reason: "its pod failed (exit 137)".into(),
            connections: 5,
            rate: Some(500.0),
        }];
        let v = limiter(&m);
        assert_ne!(v.side, LimiterSide::Client);
        assert!(
            v.reason.ends_with(
                "1 worker(s) lost, their share missing: worker 1: its pod failed (exit 137)"
            ),
            "{}",
            v.reason
        );
    }
}
