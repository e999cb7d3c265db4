//! The OVC tables of `ovc-transition-states.md`, copied verbatim, are the oracle: every
//! row is an allowed move of the shipped spec, and every other pair of states of the
//! object is refused. The allowed set is computed from the seed's text, not from the
//! spec, so a spec that drifts from its seed fails here.

mod common;

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
    fsm_core::spec::load(&path).unwrap_or_else(|e| panic!("{e}"))
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

/// sabakan-machine-lifecycle.md gives sentences, not a table; each becomes pairs
/// that must be allowed, and "only" sentences forbid the rest from their state.
/// (The diagram, checked below, gives the whole set.)
#[test]
fn sabakan_matches_its_transition_constraints() {
    let m = spec("sabakan/machine.toml");
    let s = |n: &str| m.state_id(n).unwrap();
    let allow = |from: &[&str], to: &[&str]| {
        for f in from {
            for t in to {
                assert!(m.validate_transition(s(f), s(t)).is_ok(), "{f} -> {t}");
            }
        }
    };
    let only = |from: &str, to: &[&str]| {
        let mut successors: Vec<&str> = m
            .successors(s(from))
            .into_iter()
            .map(|t| &*m.state(t).name)
            .collect();
        successors.sort();
        let mut to = to.to_vec();
        to.sort();
        assert_eq!(successors, to, "from {from}");
    };
    // "Uninitialized, Healthy, Unhealthy, or Unreachable machine can transition to Retiring."
    allow(
        &["Uninitialized", "Healthy", "Unhealthy", "Unreachable"],
        &["Retiring"],
    );
    // "A Retiring machine can transition only to Retired."
    only("Retiring", &["Retired"]);
    // "A Healthy machine can transition to Unhealthy, Unreachable, Retiring, and Updating."
    allow(
        &["Healthy"],
        &["Unhealthy", "Unreachable", "Retiring", "Updating"],
    );
    // "A Unreachable machine can transition to Healthy."
    allow(&["Unreachable"], &["Healthy"]);
    // "Retired machines can transition only to Uninitialized."
    only("Retired", &["Uninitialized"]);
    // "Updating machines can transition only to Uninitialized after restarting."
    only("Updating", &["Uninitialized"]);
    // Controllers "prepare Uninitialized machines to become Healthy".
    allow(&["Uninitialized"], &["Healthy"]);
    // "Unhealthy machine cannot return to Healthy directly."
    assert!(m.validate_transition(s("Unhealthy"), s("Healthy")).is_err());

    // Operations that change no state, and the only states that allow them.
    let allowed_in = |action: &str| -> BTreeSet<String> {
        let a = m.find_action(action).unwrap();
        m.state_ids()
            .filter(|&st| m.start(a, st).is_ok())
            .map(|st| m.state(st).name.to_string())
            .collect()
    };
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    // "Disk encryption keys of a machine can be deleted if the machine is in Retiring state."
    assert_eq!(allowed_in("delete_keys"), set(&["Retiring"]));
    // "Only Retired machines can be removed from sabakan": by admins.
    let removable: BTreeSet<String> = (m.states().iter())
        .filter(|s| s.remove.is_some())
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(removable, set(&["Retired"]));
    let retired = m.state(m.state_named("Retired").unwrap());
    assert!(retired.may_remove(|r| r == "admin"));
    assert!(!retired.may_remove(|r| r == "controller"));
    // "No new disk encryption keys can be added to Retired machines."
    assert!(!allowed_in("add_key").contains("Retired"));
    // Admins alone move machines to Retiring and from Retired to Uninitialized.
    for action in ["retire", "reinitialize"] {
        let a = m.action(m.find_action(action).unwrap());
        assert_eq!(&a.roles[..], ["admin"], "{action}");
    }
    // "A Retiring machine can transition to Retired only when its disk encryption keys
    // have been deleted."
    let retire = m.action(m.find_action("complete_retirement").unwrap());
    assert_eq!(
        retire
            .guards
            .iter()
            .map(|&g| &*m.guard(g).name)
            .collect::<Vec<_>>(),
        ["keys_deleted"]
    );
}

#[test]
fn rules_resolve_back_to_origin_and_per_origin_targets() {
    let vm = spec("ovc/vm.toml");
    let s = |n| vm.state_id(n).unwrap();
    let add_disk = vm.find_action("add_disk").unwrap();
    for origin in ["RUNNING", "PAUSED", "HALTED"] {
        let rule = vm.start(add_disk, s(origin)).unwrap();
        assert_eq!((rule.via, rule.target), (Some(s("ADDING_DISK")), s(origin)));
    }
    let err = vm
        .start(vm.find_action("pause").unwrap(), s("PAUSING"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`pause` cannot start in PAUSING: it is a transition state while pause runs"
    );
    let err = vm
        .start(vm.find_action("pause").unwrap(), s("HALTED"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`pause` cannot start in HALTED: it starts only from RUNNING"
    );

    let disk = spec("ovc/disk.toml");
    let d = |n| disk.state_id(n).unwrap();
    let delete = disk.find_action("delete").unwrap();
    assert_eq!(
        disk.start(delete, d("CREATED")).unwrap().target,
        d("DELETED")
    );
    assert_eq!(
        disk.start(delete, d("ASSIGNED")).unwrap().target,
        d("TOBEDELETED")
    );
    assert_eq!(
        disk.successors(d("DELETING")),
        vec![d("DELETED"), d("TOBEDELETED")],
        "a transition state leads only to the targets of its action"
    );
}

/// `moves_from` lists the allowed moves from a state's rules; `validate_transition`
/// decides one pair. They agree on every pair of every shipped spec.
#[test]
fn moves_from_agrees_with_validate_transition_everywhere() {
    for path in common::specs() {
        let m = fsm_core::spec::load(&path).unwrap();
        for from in m.state_ids() {
            let steps = m.moves_from(from);
            for to in m.state_ids() {
                let listed = steps.iter().find(|(t, _)| *t == to).map(|&(_, s)| s);
                assert_eq!(
                    listed,
                    m.validate_transition(from, to).ok(),
                    "{}: {from:?} -> {to:?}",
                    path.display()
                );
            }
            assert!(
                steps.windows(2).all(|w| w[0].0 < w[1].0),
                "in target order, each once"
            );
        }
    }
}
