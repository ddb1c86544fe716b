//! Each QUIC connection's timer (loss detection, ACK delay, idle timeout, as quinn last
//! asked), kept in time order. The worker asks for the earliest before every wait and for the
//! due ones after it; a scan of every connection for both cost O(connections) per wake-up,
//! which at 5,000 connections was half the client's CPU. Here each is O(log connections), a
//! timer that did not move costs nothing, and nothing is allocated after the start: a binary
//! heap with one entry per connection at most, which knows where each connection's entry is
//! so that a timer moved is sifted in place.

use std::time::Instant;

/// `place` of a connection without a timer.
const UNSET: usize = usize::MAX;

pub(super) struct QuicTimers {
    /// (when, connection), a binary min-heap by time.
    heap: Vec<(Instant, usize)>,
    /// Where each connection's entry is in `heap`, or [`UNSET`].
    place: Vec<usize>,
}

impl QuicTimers {
    pub fn new(connections: usize) -> QuicTimers {
        QuicTimers {
            heap: Vec::with_capacity(connections),
            place: vec![UNSET; connections],
        }
    }

    /// Connection `i`'s timer is now `when` (None: unset).
    pub fn set(&mut self, i: usize, when: Option<Instant>) {
        let Some(&at) = self.place.get(i) else {
            return;
        };
        match (at, when) {
            (UNSET, None) => {}
            (UNSET, Some(t)) => {
                self.heap.push((t, i));
                self.place[i] = self.heap.len() - 1;
                self.sift_up(self.heap.len() - 1);
            }
            (h, None) => self.remove(h),
            (h, Some(t)) => {
                let old = std::mem::replace(&mut self.heap[h].0, t);
                if t < old {
                    self.sift_up(h);
                } else if t > old {
                    self.sift_down(h);
                }
            }
        }
    }

    /// The earliest timer.
    pub fn next(&self) -> Option<Instant> {
        self.heap.first().map(|&(when, _)| when)
    }

    /// Takes the timers due by `now` into `due` (connection indices, earliest first), each
    /// unset: the connection acts on it once, and sets the next one it asks for.
    pub fn take_due(&mut self, now: Instant, due: &mut Vec<usize>) {
        due.clear();
        while let Some(&(when, i)) = self.heap.first() {
            if when > now {
                break;
            }
            self.remove(0);
            due.push(i);
        }
    }

    fn remove(&mut self, h: usize) {
        let last = self.heap.len() - 1;
        self.swap(h, last);
        if let Some((_, i)) = self.heap.pop() {
            self.place[i] = UNSET;
        }
        if h < self.heap.len() {
            self.sift_up(h);
            self.sift_down(h);
        }
    }

    fn sift_up(&mut self, mut h: usize) {
        while h > 0 {
            let parent = (h - 1) / 2;
            if self.heap[parent].0 <= self.heap[h].0 {
                break;
            }
            self.swap(h, parent);
            h = parent;
        }
    }

    fn sift_down(&mut self, mut h: usize) {
        loop {
            let (left, right) = (2 * h + 1, 2 * h + 2);
            let mut least = h;
            if left < self.heap.len() && self.heap[left].0 < self.heap[least].0 {
                least = left;
            }
            if right < self.heap.len() && self.heap[right].0 < self.heap[least].0 {
                least = right;
            }
            if least == h {
                return;
            }
            self.swap(h, least);
            h = least;
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.place[self.heap[a].1] = a;
        self.place[self.heap[b].1] = b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timers_come_due_in_time_order_once_each() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut timers = QuicTimers::new(4);
        timers.set(0, Some(ms(30)));
        timers.set(1, Some(ms(10)));
        timers.set(2, Some(ms(20)));
        timers.set(3, Some(ms(5)));
        timers.set(3, None);
        timers.set(0, Some(ms(15)));
        timers.set(9, Some(ms(1)));
        assert_eq!(timers.next(), Some(ms(10)));
        let mut due = Vec::new();
        timers.take_due(ms(15), &mut due);
        assert_eq!(due, [1, 0]);
        timers.take_due(ms(15), &mut due);
        assert!(
            due.is_empty(),
            "a timer taken is not due again until set again"
        );
        assert_eq!(timers.next(), Some(ms(20)));
        timers.set(1, Some(ms(40)));
        timers.take_due(ms(100), &mut due);
        assert_eq!(due, [2, 1]);
        assert_eq!(timers.next(), None);
    }

    /// Against a plain scan, through many moves of many timers in a fixed pseudo-random
    /// order: the earliest and the due ones agree after every step.
    #[test]
    fn agrees_with_a_scan_of_every_connection() {
        let t0 = Instant::now();
        let n = 64;
        let mut timers = QuicTimers::new(n);
        let mut truth: Vec<Option<Instant>> = vec![None; n];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut due = Vec::new();
        for step in 0..20_000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed % n as u64) as usize;
            let when =
                (!seed.is_multiple_of(5)).then(|| t0 + Duration::from_micros(seed % 1_000 + step));
            timers.set(i, when);
            truth[i] = when;
            assert_eq!(timers.next(), truth.iter().flatten().min().copied());
            if step.is_multiple_of(97) {
                let now = t0 + Duration::from_micros(step);
                timers.take_due(now, &mut due);
                let mut expected: Vec<(Instant, usize)> = (0..n)
                    .filter_map(|i| truth[i].filter(|&t| t <= now).map(|t| (t, i)))
                    .collect();
                expected.sort();
                let taken: Vec<usize> = expected.iter().map(|&(_, i)| i).collect();
                let mut got = due.clone();
                let mut want = taken.clone();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "step {step}");
                for i in taken {
                    truth[i] = None;
                }
            }
        }
    }
}
