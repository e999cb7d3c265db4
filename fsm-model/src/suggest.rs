//! "Did you mean" hints.

use alloc::{vec, vec::Vec};

/// The candidate closest to `name` (ignoring ASCII case), if it is close enough to
/// be a plausible typo: at most one edit per three characters (an edit inserts,
/// removes or replaces a character, or swaps two neighbours), and at least one.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted: Vec<char> = name.to_ascii_lowercase().chars().collect();
    candidates
        .into_iter()
        .filter_map(|c| {
            let candidate: Vec<char> = c.to_ascii_lowercase().chars().collect();
            let limit = (wanted.len().max(candidate.len()) / 3).max(1);
            let d = distance(&wanted, &candidate);
            (d <= limit).then_some((d, c))
        })
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// The optimal-string-alignment distance: edits, counting a swap of neighbours as
/// one.
fn distance(a: &[char], b: &[char]) -> usize {
    // Three rows of the dynamic programme: two rows back, the last, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        core::mem::swap(&mut before, &mut last);
        core::mem::swap(&mut last, &mut row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn typos_are_recognised_and_strangers_are_not() {
        let states = ["RUNNING", "HALTED", "PAUSED"];
        assert_eq!(closest("RUNNIN", states), Some("RUNNING"));
        assert_eq!(closest("running", states), Some("RUNNING"));
        assert_eq!(closest("HALTD", states), Some("HALTED"));
        assert_eq!(closest("form", ["from", "via", "to"]), Some("from"));
        assert_eq!(closest("admn", ["admin", "controller"]), Some("admin"));
        assert_eq!(
            closest("unreachble", ["unreachable", "unused-role"]),
            Some("unreachable")
        );
        assert_eq!(closest("DESTROYED", states), None);
    }
}
