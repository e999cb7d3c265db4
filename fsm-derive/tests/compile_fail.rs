//! Compile errors of `#[derive(StateMachine)]` and of typed moves, one case per kind,
//! with the expected messages checked in beside each case (`tests/ui/*.stderr`).
//! After an intended change: `TRYBUILD=overwrite cargo test -p fsm-derive --test compile_fail`.

use std::path::Path;
use std::process::Command;

#[test]
fn compile_errors() {
    // Spec paths in the cases are relative to the workspace, not to the scratch crate
    // trybuild builds them in.
    // SAFETY: set before any thread of this test binary reads the environment; this
    // binary has this one test.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("FSM_SPEC_DIR", concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    }
    let outcome = std::panic::catch_unwind(|| {
        let t = trybuild::TestCases::new();
        t.compile_fail("tests/ui/*.rs");
    });
    if let Err(panic) = outcome {
        explain_scratch_build();
        std::panic::resume_unwind(panic);
    }
}

/// trybuild reads only the diagnostics that name a case, so when cargo fails before
/// it reaches the cases (a dependency that does not build, or that is not on this
/// machine: trybuild builds offline; a full disk), every case reads as "compiled"
/// and the cause is dropped. This builds the scratch crate again and prints what
/// cargo itself said.
fn explain_scratch_build() {
    let Some(target) = Path::new(env!("CARGO_TARGET_TMPDIR")).parent() else {
        return;
    };
    let scratch = target.join("tests/trybuild");
    let manifest = scratch.join(env!("CARGO_PKG_NAME")).join("Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        // Offline, as trybuild builds it: a package that is not on this machine
        // fails here as it failed there.
        .args(["check", "--offline", "--bins", "--all-features"])
        .args(["--color=never", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", &scratch)
        .output();
    match output {
        Ok(output) => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let lines: Vec<&str> = stderr.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            eprintln!(
                "cargo check of trybuild's scratch crate ({}) exited with {}; the last lines it printed:\n{}",
                manifest.display(),
                output.status,
                tail.join("\n")
            );
        }
        Err(error) => eprintln!(
            "cargo check of {} did not start: {error}",
            manifest.display()
        ),
    }
}
