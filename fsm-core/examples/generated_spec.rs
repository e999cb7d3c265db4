//! Writes a generated spec to standard output: `STATES` static states in a
//! ring plus random actions, about `ACTIONS` in all, the same for the same
//! `SEED` (the specs of the tests and of the table tools' bench,
//! `tests/common/generated.rs`). For timing the `fsm` commands as wholes on
//! a table of any size (`scripts/speed`, issue #18):
//!
//! ```sh
//! cargo run --release -p fsm-core --example generated_spec -- 5000 25000 1 > big.toml
//! fsm check big.toml
//! ```

#[path = "../tests/common/generated.rs"]
mod generated;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: u64| -> Result<u64, String> {
        args.get(i).map_or(Ok(default), |text| {
            text.parse()
                .map_err(|e| format!("argument {}: `{text}` is not a number: {e}", i + 1))
        })
    };
    let (states, actions, seed) = (number(0, 5_000)?, number(1, 25_000)?, number(2, 1)?);
    if states == 0 {
        return Err("a spec needs at least one state".into());
    }
    print!(
        "{}",
        generated::spec(states as usize, actions as usize, seed)
    );
    Ok(())
}
