//! sabakan's machine lifecycle on the fsm runtime: admins and controllers, disk
//! encryption keys, and the rules of `sabakan-machine-lifecycle.md`.
//!
//! `cargo run --example sabakan`

#[path = "../machines/mod.rs"]
mod machines;
// Some of the registry is only used by the tests.
#[allow(dead_code)]
mod registry;

use fsm_runtime::Actor;
use machines::MachineAction as A;
use registry::Registry;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sabakan = Registry::new();
    let admin = Actor::new("ops").with_role("admin");
    let controller = Actor::new("neco-controller").with_role("controller");
    let serial = "rack1-node3";

    sabakan.register(serial, &admin)?;
    sabakan.add_key(serial, &controller, "disk0:3f2a...")?;
    sabakan.transition(serial, &controller, A::Initialize)?;
    println!(
        "{serial}: {:?}, keys {:?}",
        sabakan.state(serial)?,
        sabakan.keys(serial)
    );

    // Controllers may not retire a machine: that is for admins.
    if let Err(e) = sabakan.transition(serial, &controller, A::Retire) {
        println!("refused: {e}");
    }
    sabakan.transition(serial, &admin, A::Retire)?;
    // Not Retired while keys remain.
    if let Err(e) = sabakan.transition(serial, &controller, A::CompleteRetirement) {
        println!("refused: {e}");
    }
    let deleted = sabakan.delete_keys(serial, &controller)?;
    println!("{serial}: {deleted} key(s) deleted");
    sabakan.transition(serial, &controller, A::CompleteRetirement)?;
    if let Err(e) = sabakan.add_key(serial, &controller, "disk1:...") {
        println!("refused: {e}");
    }
    let rt = sabakan.runtime();
    println!("{serial}: history:");
    for e in rt.history(serial)? {
        let action = e
            .action
            .map_or("create".into(), |a| rt.machine().action(a).name.to_string());
        println!(
            "  v{} {:?} {} by {}: {} -> {}",
            e.version,
            e.kind,
            action,
            e.actor,
            rt.machine().state(e.from).name,
            rt.machine().state(e.to).name
        );
    }
    // "Only Retired machines can be removed from sabakan": its record and
    // history go, and watchers get this last entry.
    let removed = sabakan.remove(serial, &admin)?;
    println!(
        "{serial}: removed at v{} by {}; registered again: {:?}",
        removed.version,
        removed.actor,
        sabakan
            .register(serial, &admin)
            .map(|()| sabakan.state(serial))
    );
    Ok(())
}
