//! The OVC tables of `ovc-transition-states.md`, copied verbatim, are the oracle: every
//! row is an allowed move of the shipped spec, and every other pair of states of the
//! object is refused. The allowed set is computed from the seed's text, not from the
//! spec, so a spec that drifts from its seed fails here.

use std::collections::BTreeSet;
use std::path::PathBuf;

use fsm_core::Machine;

const VM_TABLE: &str = r"
|Initial State|Transition State| Desired State|
|---|---|---|
|VIRTUAL*|DEPLOYING* |RUNNING|
| RUNNING | PAUSING* | PAUSED |
| PAUSED | RESUMING* | RUNNING |
|RUNNING/PAUSED| STOPPING| HALTED |
|RUNNING/PAUSED| DELETING| DELETED |
|RUNNING/PAUSED| DESTROYING| DESTROYED  |
|HALTED| DELETING| DELETED |
|HALTED| DESTROYING| DESTROYED |
|RUNNING| REBOOTING | RUNNING|
|PAUSED| REBOOTING | RUNNING|
|RUNNING| RESETTING | RUNNING|
|RUNNING| ADDING_DISK / ATTACHING_DISK / DETACHING_DISK | RUNNING|
|PAUSED| ADDING_DISK / ATTACHING_DISK / DETACHING_DISK | PAUSED|
|HALTED| ADDING_DISK / ATTACHING_DISK / DETACHING_DISK | HALTED|
";

const CLOUDSPACE_TABLE: &str = r"
|Initial State|Transition States| Desired State|
|---|---|---|
|VIRTUAL|DEPLOYING|DEPLOYED|
|DEPLOYED| DISABLING*| DISABLED|
|DISABLED| ENABLING* | DEPLOYED|
|DEPLOYED / DISABLED|DELETING|DELETED|
|DELETED| DESTROYING| DESTROYED|
|DELETED| RESTORING | DEPLOYED|
|DEPLOYED| PAUSING***| PAUSED*** |
|PAUSED**| RESUMING** | DEPLOYED|
|DEPLOYED| RESETTING** | DEPLOYED|
";

const ACCOUNT_TABLE: &str = r"
|Initial State|Transition States| Desired State|
|---|---|---|
|CONFIRMED| DISABLING*| DISABLED|
|DISABLED| ENABLING*| CONFIRMED|
|CONFIRMED / DISABLED| DESTROYING | DESTROYED |
|CONFIRMED / DISABLED| DELETING | DELETED |
";

const DISK_TABLE: &str = r"
|Initial State|Transition States| Desired State|
|---|---|---|
|MODELED|CREATING|CREATED|
|MODELED|ASSIGNING*| ASSIGNED|
|CREATED| ATTACHING*| ASSIGNED|
|ASSIGNED| DETACHING* | CREATED|
|CREATED| DELETING | DELETED |
|CREATED| DESTROYING | DESTROYED |
|ASSIGNED| DELETING* | TOBEDELETED |
|ASSIGNED| DESTROYING | DESTROYED |
";

const IMAGE_TABLE: &str = r"
|Initial State|Transition States| Desired State|
|---|---|---|
|VIRTUAL*|CREATING|CREATED|
|CREATED| DISABLING*| DISABLED|
|DISABLED|DISABLING|CREATED|
|CREATED / DISABLED| DELETING* |  DELETED* |
|CREATED / DISABLED| DESTROYING* | DESTROYED |
";

const NODE_TABLE: &str = r"
|Initial State|Transition States| Desired State|
|---|---|---|
|ENABLED| PUTTING_IN_MAINTENANCE* |MAINTENANCE|
|MAINTENANCE| ENABLING* | ENABLED |
|ENABLED/MAINTENANCE| DECOMMISSIONING* | DECOMMISSIONED|
";

fn spec(path: &str) -> Machine {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../specs")
        .join(path);
    Machine::from_spec_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// A seed cell names one or several states (`RUNNING/PAUSED`,
/// `ADDING_DISK / ATTACHING_DISK`); `*` marks footnotes, not names.
fn names(cell: &str) -> Vec<String> {
    cell.split('/')
        .map(|s| s.replace('*', "").trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Every (from, to) pair the table's rows allow: origin into the transition state,
/// transition state into the desired state, and origin to desired state.
fn allowed_by(table: &str) -> BTreeSet<(String, String)> {
    let mut allowed = BTreeSet::new();
    for line in table.lines().filter(|l| l.starts_with('|')).skip(2) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
        assert_eq!(cells.len(), 3, "seed row {line:?}");
        let (origins, vias, targets) = (names(cells[0]), names(cells[1]), names(cells[2]));
        for o in &origins {
            for t in &targets {
                allowed.insert((o.clone(), t.clone()));
                for v in &vias {
                    allowed.insert((o.clone(), v.clone()));
                    allowed.insert((v.clone(), t.clone()));
                }
            }
        }
    }
    allowed
}

fn states_of(table: &str) -> BTreeSet<String> {
    allowed_by(table)
        .into_iter()
        .flat_map(|(a, b)| [a, b])
        .collect()
}

fn check_object(spec_path: &str, table: &str) {
    let machine = spec(spec_path);
    let allowed = allowed_by(table);
    let seed_states = states_of(table);
    let spec_states: BTreeSet<String> = machine
        .states()
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(
        spec_states, seed_states,
        "{spec_path}: the spec's states are the seed's"
    );
    let mut checked = 0;
    for from in machine.state_ids() {
        for to in machine.state_ids() {
            let pair = (
                machine.state(from).name.to_string(),
                machine.state(to).name.to_string(),
            );
            let verdict = machine.validate_transition(from, to);
            if allowed.contains(&pair) {
                assert!(
                    verdict.is_ok(),
                    "{spec_path}: seed allows {pair:?} but {verdict:?}"
                );
            } else {
                assert!(
                    verdict.is_err(),
                    "{spec_path}: seed has no row for {pair:?} but spec allows it: {verdict:?}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, seed_states.len() * seed_states.len());
}

#[test]
fn vm_matches_its_seed_table() {
    check_object("ovc/vm.toml", VM_TABLE);
}

#[test]
fn cloudspace_matches_its_seed_table() {
    check_object("ovc/cloudspace.toml", CLOUDSPACE_TABLE);
}

#[test]
fn account_matches_its_seed_table() {
    check_object("ovc/account.toml", ACCOUNT_TABLE);
}

#[test]
fn disk_matches_its_seed_table() {
    check_object("ovc/disk.toml", DISK_TABLE);
}

#[test]
fn image_matches_its_seed_table() {
    check_object("ovc/image.toml", IMAGE_TABLE);
}

#[test]
fn node_matches_its_seed_table() {
    check_object("ovc/node.toml", NODE_TABLE);
}
