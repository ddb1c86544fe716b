//! Request mixes without a script (`--mix FILE`): every entry encoded once before the load;
//! each worker's connections take the entries in turn from one weighted cycle, and each
//! entry's answers, status codes and latencies are kept apart. The worker sees a mix as an
//! `engine::hook` whose `request()` copies an encoded entry into the connection's buffer.

pub mod file;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::engine::hook::{HookError, Hooks, WorkerHook, WorkerScript};
use crate::engine::Plan;
use crate::http::{RequestSpec, Target};
use crate::stats::{EntryResult, LatencySummary, RunResult, SerializedHistogram, STATUS_SLOTS};

/// What an entry is, besides its bytes.
#[derive(Debug, Clone)]
struct About {
    name: String,
    method: String,
    path: String,
    weight: u64,
}

/// One worker's figures of one entry.
#[derive(Debug, Clone)]
struct Figures {
    requests: u64,
    errors: u64,
    status: Vec<u64>,
    latency: Histogram<u64>,
}

impl Figures {
    fn new() -> Figures {
        Figures {
            requests: 0,
            errors: 0,
            status: vec![0; STATUS_SLOTS],
            latency: crate::stats::latency_histogram(),
        }
    }
}

/// A loaded mix, for one run after another.
pub struct Mix {
    /// The file, as given.
    path: String,
    about: Vec<About>,
    requests: Arc<[Arc<[u8]>]>,
    order: Arc<[u32]>,
    /// The workers' figures of the current run, handed over as each worker ends.
    collected: Arc<Mutex<Vec<Vec<Figures>>>>,
}

impl std::fmt::Debug for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mix")
            .field("entries", &self.about.len())
            .finish_non_exhaustive()
    }
}

impl Mix {
    /// Reads and encodes the mix for `plan`'s target, with its headers and protocol.
    pub fn load<A>(path: &Path, plan: &Plan<A>) -> Result<Mix, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read request mix {}: {e}", path.display()))?;
        let entries = file::parse(&text, path)?;
        let mut about = Vec::with_capacity(entries.len());
        let mut requests = Vec::with_capacity(entries.len());
        for e in &entries {
            let target = entry_target(&plan.target, &e.target)
                .map_err(|why| format!("{}: entry {:?}: {why}", path.display(), e.name))?;
            let mut headers = plan.request.headers.clone();
            headers.extend(e.headers.iter().cloned());
            let spec = RequestSpec {
                method: e.method.clone(),
                headers,
                body: e.body.clone(),
                ..plan.request.clone()
            };
            requests.push(Arc::<[u8]>::from(
                spec.encode(&target, plan.basic_auth.clone()),
            ));
            about.push(About {
                name: e.name.clone(),
                method: e.method.clone(),
                path: target.path.clone(),
                weight: e.weight,
            });
        }
        let weights: Vec<u64> = entries.iter().map(|e| e.weight).collect();
        Ok(Mix {
            path: path.display().to_string(),
            about,
            requests: requests.into(),
            order: file::cycle(&weights).into(),
            collected: Arc::new(Mutex::new(Vec::new())),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<Figures>>> {
        self.collected.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An entry's target: a path on the run's target, or a URL naming the same server.
fn entry_target(run: &Target, written: &str) -> Result<Target, String> {
    if written.starts_with('/') {
        return Ok(Target {
            path: written.to_string(),
            ..run.clone()
        });
    }
    let t = Target::parse(written).map_err(|e| e.to_string())?;
    if (t.scheme, t.host.as_str(), t.port) != (run.scheme, run.host.as_str(), run.port) {
        return Err(format!(
            "{written} is not on the run's server ({}); a run loads one server, so write a path",
            run.redacted_url
        ));
    }
    Ok(t)
}

impl Hooks for Mix {
    fn workers(&self, threads: usize) -> Result<Vec<WorkerScript>, HookError> {
        self.lock().clear();
        let len = self.order.len();
        Ok((0..threads)
            .map(|w| WorkerScript {
                hook: Box::new(MixHook {
                    requests: self.requests.clone(),
                    order: self.order.clone(),
                    // Workers start at different places of the cycle, so together they
                    // keep to the weights from the first request on.
                    cursor: w * len / threads.max(1),
                    current: Vec::new(),
                    figures: vec![Figures::new(); self.requests.len()],
                    sink: self.collected.clone(),
                }),
                addr: None,
                request: None,
                dynamic: true,
                pipeline: 1,
                head_requests: false,
                wants_responses: false,
                delays: false,
                outcomes: true,
            })
            .collect())
    }

    fn failure(&self) -> Option<String> {
        None
    }

    fn flags(&self) -> Vec<(&'static str, String)> {
        vec![("mix", self.path.clone())]
    }

    fn done(&self, _result: &RunResult) -> Result<(), HookError> {
        Ok(())
    }

    fn entries(&self) -> Vec<EntryResult> {
        let collected = self.lock();
        self.about
            .iter()
            .enumerate()
            .map(|(k, a)| {
                let mut all = Figures::new();
                for worker in collected.iter() {
                    let f = &worker[k];
                    all.requests += f.requests;
                    all.errors += f.errors;
                    for (s, n) in f.status.iter().enumerate() {
                        all.status[s] += n;
                    }
                    // Same bounds everywhere: the add cannot fail.
                    let _ = all.latency.add(&f.latency);
                }
                EntryResult {
                    name: a.name.clone(),
                    method: a.method.clone(),
                    path: a.path.clone(),
                    weight: a.weight,
                    requests: all.requests,
                    errors: all.errors,
                    status_codes: all
                        .status
                        .iter()
                        .enumerate()
                        .filter(|(_, &n)| n > 0)
                        .map(|(s, &n)| (s.to_string(), n))
                        .collect(),
                    latency: LatencySummary::of(&all.latency),
                    histogram: SerializedHistogram(all.latency),
                }
            })
            .collect()
    }
}

/// One worker's side of a mix.
struct MixHook {
    requests: Arc<[Arc<[u8]>]>,
    order: Arc<[u32]>,
    cursor: usize,
    /// The entry each connection is sending.
    current: Vec<u32>,
    figures: Vec<Figures>,
    sink: Arc<Mutex<Vec<Vec<Figures>>>>,
}

impl WorkerHook for MixHook {
    fn request(&mut self, conn: usize, out: &mut Vec<u8>) -> Result<(), HookError> {
        let entry = self.order.get(self.cursor).copied().unwrap_or(0);
        self.cursor = (self.cursor + 1) % self.order.len().max(1);
        if conn >= self.current.len() {
            // Once per connection, not per request.
            self.current.resize(conn + 1, 0);
        }
        self.current[conn] = entry;
        if let Some(bytes) = self.requests.get(entry as usize) {
            out.extend_from_slice(bytes);
        }
        Ok(())
    }

    fn response(&mut self, _raw: &[u8]) -> Result<(), HookError> {
        Ok(())
    }

    fn delay(&mut self) -> Result<Duration, HookError> {
        Ok(Duration::ZERO)
    }

    fn stop_requested(&self) -> bool {
        false
    }

    fn failed(&mut self, _error: HookError) {}

    fn outcome(&mut self, conn: usize, answer: Option<(u16, u64)>) {
        let entry = self.current.get(conn).copied().unwrap_or(0) as usize;
        let Some(f) = self.figures.get_mut(entry) else {
            return;
        };
        match answer {
            Some((status, us)) => {
                f.requests += 1;
                f.status[(status as usize).min(STATUS_SLOTS - 1)] += 1;
                f.latency.saturating_record(us.max(1));
            }
            None => f.errors += 1,
        }
    }
}

impl Drop for MixHook {
    fn drop(&mut self) {
        let figures = std::mem::take(&mut self.figures);
        self.sink
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(figures);
    }
}
