//! Where a bench's per-round figures lie: their median, the middle half and
//! the extremes. Shared by the runtime's and the etcd store's benches, which
//! measure a case and its baseline in alternating rounds and report the
//! ratio's spread over the rounds.

use std::fmt;

/// Where `values` lie: their median, the middle half (first and third
/// quartiles) and the least and greatest.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub median: f64,
    pub middle: (f64, f64),
    pub all: (f64, f64),
}

/// The spread of `values` (sorted in place). `values` must not be empty.
pub fn spread(values: &mut [f64]) -> Spread {
    values.sort_by(f64::total_cmp);
    // The value at fraction `q` of the sorted values, between two neighbours.
    let at = |q: f64| {
        let x = q * (values.len() - 1) as f64;
        let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
        values[lo] + (values[hi] - values[lo]) * (x - lo as f64)
    };
    Spread {
        median: at(0.5),
        middle: (at(0.25), at(0.75)),
        all: (values[0], values[values.len() - 1]),
    }
}

impl Spread {
    /// Each figure less one: from a ratio's spread, what the case adds to its
    /// baseline, as a multiple of it.
    pub fn less_one(self) -> Spread {
        Spread {
            median: self.median - 1.0,
            middle: (self.middle.0 - 1.0, self.middle.1 - 1.0),
            all: (self.all.0 - 1.0, self.all.1 - 1.0),
        }
    }
}

/// `median (middle half; all rounds)`, each to the formatter's precision
/// (two places if none is given): `0.93 (0.91–0.95; 0.86–0.99)`.
impl fmt::Display for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = f.precision().unwrap_or(2);
        write!(
            f,
            "{:.p$} ({:.p$}–{:.p$}; {:.p$}–{:.p$})",
            self.median, self.middle.0, self.middle.1, self.all.0, self.all.1
        )
    }
}

/// `values` split by their `keys` (one key per value): those whose key is at
/// most `bound`, then the others, each in their order.
pub fn split_by(keys: &[f64], values: &[f64], bound: f64) -> (Vec<f64>, Vec<f64>) {
    assert_eq!(keys.len(), values.len(), "one key per value");
    let (mut within, mut past) = (Vec::new(), Vec::new());
    for (&key, &value) in keys.iter().zip(values) {
        if key <= bound {
            within.push(value);
        } else {
            past.push(value);
        }
    }
    (within, past)
}
