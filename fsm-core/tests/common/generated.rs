//! Generated specs of any size, for the tests and the table tools' bench: `states`
//! static states in a ring (so every state has a way out and all are reachable),
//! plus `actions` random ones, one in eight through a transition state of its own.
//! Deterministic: the same `seed` gives the same spec.

use std::fmt::Write as _;

/// A spec's TOML text: `states` static states and about `actions` actions.
pub fn spec(states: usize, actions: usize, seed: u64) -> String {
    let mut rng = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move |bound: usize| {
        // A 64-bit linear congruential generator, its high bits.
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((rng >> 33) as usize) % bound
    };
    let mut out = String::from("[machine]\nname = \"generated\"\ninitial = \"S0\"\n\n[states]\n");
    for s in 0..states {
        writeln!(out, "S{s} = \"state {s}\"").unwrap();
    }
    let random = actions.saturating_sub(states);
    let mut moves = String::new();
    for s in 0..states {
        writeln!(
            moves,
            "ring{s} = {{ from = \"S{s}\", to = \"S{}\" }}",
            (s + 1) % states
        )
        .unwrap();
    }
    for a in 0..random {
        let (from, to) = (next(states), next(states));
        if a % 8 == 0 {
            writeln!(out, "T{a} = {{ transition = true }}").unwrap();
            writeln!(
                moves,
                "a{a} = {{ from = \"S{from}\", via = \"T{a}\", to = \"S{to}\" }}"
            )
            .unwrap();
        } else if from == to {
            writeln!(moves, "a{a} = {{ from = \"S{from}\" }}").unwrap();
        } else {
            writeln!(moves, "a{a} = {{ from = \"S{from}\", to = \"S{to}\" }}").unwrap();
        }
    }
    out.push_str("\n[actions]\n");
    out + &moves
}
