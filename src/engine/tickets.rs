//! The requests a count-bounded run's worker may still begin, and how the run's count is
//! split among its connections: one pool per worker (whichever connection is free begins the
//! next, as ab's -n does) or a share per connection (each client makes its own n/c, as
//! h2load's -n does).

use std::time::Instant;

/// How a count-bounded run's requests are split among its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CountSplit {
    /// Whichever connection is free begins the next: a fast connection makes more (ab, run).
    #[default]
    Pooled,
    /// Each connection makes its own share, `n / c` (one more for the first `n % c`), however
    /// fast the others are: h2load's clients.
    PerConnection,
}

/// A worker's tickets: one per request it may still begin.
#[derive(Debug)]
pub(super) enum Tickets {
    /// Bounded by time: a request needs none.
    Unbounded,
    Pooled(u64),
    /// Each local connection's own, and their sum (so "all spent" is one comparison).
    PerConnection {
        each: Box<[u64]>,
        left: u64,
    },
}

/// Whether a request may begin, by the run's stop rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ticket {
    Granted,
    /// The connection's (or the worker's) count is reached: the slot parks.
    NoneLeft,
    /// The deadline has passed.
    RunOver,
}

impl Tickets {
    /// A count-bounded run's tickets, `each` the local connections' shares.
    pub fn split(split: CountSplit, each: Vec<u64>) -> Tickets {
        let left = each.iter().sum();
        match split {
            CountSplit::Pooled => Tickets::Pooled(left),
            CountSplit::PerConnection => Tickets::PerConnection {
                each: each.into_boxed_slice(),
                left,
            },
        }
    }

    /// Takes one of connection `i`'s tickets unless the run is over.
    pub fn take(&mut self, i: usize, deadline: Option<Instant>, now: Instant) -> Ticket {
        if deadline.is_some_and(|d| now >= d) {
            return Ticket::RunOver;
        }
        match self {
            Tickets::Unbounded => Ticket::Granted,
            Tickets::Pooled(0) => Ticket::NoneLeft,
            Tickets::Pooled(t) => {
                *t -= 1;
                Ticket::Granted
            }
            Tickets::PerConnection { each, left } => match each.get_mut(i) {
                Some(t) if *t > 0 => {
                    *t -= 1;
                    *left -= 1;
                    Ticket::Granted
                }
                _ => Ticket::NoneLeft,
            },
        }
    }

    /// Connection `i`'s ticket back, for a request that goes out again (the server never
    /// processed it) and counts once.
    pub fn give_back(&mut self, i: usize) {
        match self {
            Tickets::Unbounded => {}
            Tickets::Pooled(t) => *t += 1,
            Tickets::PerConnection { each, left } => {
                if let Some(t) = each.get_mut(i) {
                    *t += 1;
                    *left += 1;
                }
            }
        }
    }

    /// Connection `i` may begin no more.
    pub fn spent_for(&self, i: usize) -> bool {
        match self {
            Tickets::Unbounded => false,
            Tickets::Pooled(t) => *t == 0,
            Tickets::PerConnection { each, .. } => each.get(i).is_none_or(|t| *t == 0),
        }
    }

    /// No connection may begin any more.
    pub fn all_spent(&self) -> bool {
        match self {
            Tickets::Unbounded => false,
            Tickets::Pooled(left) | Tickets::PerConnection { left, .. } => *left == 0,
        }
    }

    /// Bounded by count.
    pub fn bounded(&self) -> bool {
        !matches!(self, Tickets::Unbounded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_serves_any_connection_and_shares_run_out_one_by_one() {
        let now = Instant::now();
        let mut pool = Tickets::split(CountSplit::Pooled, vec![2, 1]);
        for _ in 0..3 {
            assert_eq!(pool.take(0, None, now), Ticket::Granted);
        }
        assert_eq!(pool.take(1, None, now), Ticket::NoneLeft);
        assert!(pool.all_spent() && pool.spent_for(1));
        pool.give_back(1);
        assert_eq!(pool.take(0, None, now), Ticket::Granted);

        let mut own = Tickets::split(CountSplit::PerConnection, vec![2, 1]);
        assert_eq!(own.take(1, None, now), Ticket::Granted);
        assert_eq!(own.take(1, None, now), Ticket::NoneLeft);
        assert!(own.spent_for(1) && !own.spent_for(0) && !own.all_spent());
        own.give_back(1);
        assert_eq!(own.take(1, None, now), Ticket::Granted);
        assert_eq!(own.take(0, None, now), Ticket::Granted);
        assert_eq!(own.take(0, None, now), Ticket::Granted);
        assert!(own.all_spent());
        assert_eq!(own.take(7, None, now), Ticket::NoneLeft);

        let mut time = Tickets::Unbounded;
        assert_eq!(time.take(0, Some(now), now), Ticket::RunOver);
        assert!(!time.all_spent() && !time.bounded());
    }
}
