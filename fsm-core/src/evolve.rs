//! Specs change in production: what a change means for stored objects.
//!
//! [`fingerprint`] names one version of a machine's meaning; persistent stores keep
//! it beside each record, to say which version of the spec wrote it.

use crate::Machine;

/// A fingerprint of what `machine` allows: its name, its states (kind, terminal)
/// and its rules, by name and in no particular order, hashed (64-bit FNV-1a, as 16
/// hex digits). Reordering a spec keeps it; any change of meaning changes it.
///
/// ```
/// let a = fsm_core::spec::load_str("a.toml", "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nA = \"a\"\nB = { terminal = true }\n[actions]\ngo = { from = \"A\", to = \"B\" }\n")?;
/// let b = fsm_core::spec::load_str("b.toml", "[machine]\nname = \"m\"\ninitial = \"A\"\n[states]\nB = { terminal = true }\nA = \"a\"\n[actions]\ngo = { from = \"A\", to = \"B\" }\n")?;
/// assert_eq!(fsm_core::evolve::fingerprint(&a), fsm_core::evolve::fingerprint(&b));
/// # Ok::<(), fsm_core::spec::SpecError>(())
/// ```
pub fn fingerprint(machine: &Machine) -> String {
    let mut lines: Vec<String> = machine
        .states()
        .iter()
        .map(|s| format!("state {} {:?} {}", s.name, s.kind, s.terminal))
        .collect();
    for a in machine.action_ids() {
        let action = machine.action(a);
        let mut rules: Vec<String> = machine
            .rules_of(a)
            .map(|r| {
                let (o, t) = (&machine.state(r.origin).name, &machine.state(r.target).name);
                format!("{o}>{t}")
            })
            .collect();
        rules.sort();
        let via = action.via.map_or("", |v| &*machine.state(v).name);
        lines.push(format!(
            "action {} via {via} hidden {} {}",
            action.name,
            action.hidden,
            rules.join(",")
        ));
    }
    lines.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in machine.name().bytes().chain(lines.join("\n").into_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}
