//! Compile errors of `#[derive(StateMachine)]` and of typed moves, one case per kind,
//! with the expected messages checked in beside each case (`tests/ui/*.stderr`).
//! After an intended change: `TRYBUILD=overwrite cargo test --test compile_fail`.

#[test]
fn compile_errors() {
    // Spec paths in the cases are relative to this repository, not to the scratch
    // crate trybuild builds them in.
    // SAFETY: set before any thread of this test binary reads the environment; this
    // binary has this one test.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("FSM_SPEC_DIR", env!("CARGO_MANIFEST_DIR"));
    }
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
