//! OpenvCloud's transition states (`ovc-transition-states.md`) on the fsm runtime:
//! `validate_transition`, the queuer's Scenario 1 (a hidden migration, a destroy
//! queued behind it), refusals while in a transition state, `409 Conflict`, and the
//! self-healing of a stuck VM, and the cloudspace actions only administrators make.
//!
//! `cargo run --example ovc`

#[path = "../machines/mod.rs"]
mod machines;
mod scenarios;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("validate_transition(vm, from, to):");
    for line in scenarios::validate() {
        println!("  {line}");
    }
    println!("\nScenario 1, VM migration:");
    for line in scenarios::migration()? {
        println!("  {line}");
    }
    println!("\nA stuck VM:");
    for line in scenarios::stuck()? {
        println!("  {line}");
    }
    println!("\nCloudspace administration:");
    for line in scenarios::cloudspace()? {
        println!("  {line}");
    }
    Ok(())
}
