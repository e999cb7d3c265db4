//! Guards written in the spec as CEL (feature `cel`): evaluated over the object's
//! data, its state and the actor, with no code of the user's; an expression that
//! does not compile stops the build, one that fails on an object refuses.

use fsm_runtime::{Actor, MemoryStore, Runtime, RuntimeError};

fn spec(guard: &str) -> fsm_core::Machine {
    fsm_core::spec::load_str(
        "disk.toml",
        format!(
            r#"
            [machine]
            name = "machine"
            initial = "Retiring"
            [roles]
            admin = "An administrator"
            [guards]
            keys_deleted = {{ description = "No disk key is left", cel = {guard:?} }}
            [states]
            Retiring = "Being retired"
            Retired = {{ terminal = true }}
            [actions]
            delete_keys = {{ from = "Retiring" }}
            complete_retirement = {{ from = "Retiring", to = "Retired", guards = "keys_deleted" }}
            "#
        ),
    )
    .unwrap()
}

#[test]
fn a_cel_guard_reads_the_objects_data() {
    let rt = Runtime::builder(spec("size(object.data.disk_keys) == 0"), MemoryStore::new())
        .build()
        .unwrap();
    let ops = Actor::new("ops");
    rt.create_with("m", &ops, Some(r#"{"disk_keys": ["k1", "k2"]}"#.into()))
        .unwrap();
    match rt.run("m", &ops, "complete_retirement") {
        Err(RuntimeError::Guard { guard, .. }) => assert_eq!(guard, "keys_deleted"),
        other => panic!("{other:?}"),
    }
    // Deleting the keys is an action too: its completion brings the new data.
    rt.start("m", &ops, "delete_keys")
        .unwrap()
        .complete_with(r#"{"disk_keys": []}"#.into())
        .unwrap();
    rt.run("m", &ops, "complete_retirement").unwrap();
    assert_eq!(rt.state_name("m").unwrap(), "Retired");
}

#[test]
fn a_cel_guard_sees_the_state_the_action_and_the_actor() {
    let rt = Runtime::builder(
        spec(r#"object.state == "Retiring" && action == "complete_retirement" && "admin" in actor.roles"#),
        MemoryStore::new(),
    )
    .build()
    .unwrap();
    let (ops, admin) = (Actor::new("ops"), Actor::new("root").with_role("admin"));
    rt.create("m", &ops).unwrap();
    assert!(matches!(
        rt.run("m", &ops, "complete_retirement"),
        Err(RuntimeError::Guard { .. })
    ));
    rt.run("m", &admin, "complete_retirement").unwrap();
}

#[test]
fn an_expression_that_fails_on_an_object_refuses() {
    // No data at all: `object.data.disk_keys` does not exist.
    let rt = Runtime::builder(spec("size(object.data.disk_keys) == 0"), MemoryStore::new())
        .build()
        .unwrap();
    let ops = Actor::new("ops");
    rt.create("m", &ops).unwrap();
    assert!(matches!(
        rt.run("m", &ops, "complete_retirement"),
        Err(RuntimeError::Guard { .. })
    ));
    // An answer that is not a boolean refuses too.
    let rt = Runtime::builder(spec("object.version"), MemoryStore::new())
        .build()
        .unwrap();
    rt.create("m", &ops).unwrap();
    assert!(matches!(
        rt.run("m", &ops, "complete_retirement"),
        Err(RuntimeError::Guard { .. })
    ));
}

#[test]
fn an_expression_that_does_not_compile_stops_the_build() {
    let err = Runtime::builder(spec("size(object.data.disk_keys ==="), MemoryStore::new())
        .build()
        .map(|_| ())
        .unwrap_err();
    let RuntimeError::BadGuard { guard, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(guard, "keys_deleted");
    assert!(
        err.to_string().starts_with(
            "guard `keys_deleted` of machine `machine`: its `cel` expression does not compile: "
        ),
        "{err}"
    );
    // Code given for the guard wins over the expression.
    Runtime::builder(spec("size(object.data.disk_keys ==="), MemoryStore::new())
        .guard("keys_deleted", |_| true)
        .build()
        .unwrap();
}
