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

/// The machine of `spec`, defined in code with `guard` as is: a spec file's
/// expressions are parsed as it is read (fsm-core's `cel` feature), a
/// definition's are not, and the runtime checks them itself.
fn defined(guard: &str) -> fsm_core::Machine {
    use fsm_model::{ActionDef, MachineDef, NamedDef, StateDef, StateKind, TargetDef};
    let mut def = MachineDef {
        name: "machine".into(),
        initial: Some("Retiring".into()),
        ..Default::default()
    };
    def.guards.push(NamedDef {
        name: "keys_deleted".into(),
        description: Some("No disk key is left".into()),
        cel: Some(guard.into()),
    });
    def.states
        .push(StateDef::new("Retiring", StateKind::Static));
    let mut retired = StateDef::new("Retired", StateKind::Static);
    retired.terminal = true;
    def.states.push(retired);
    def.actions.push(ActionDef {
        name: "complete_retirement".into(),
        from: vec!["Retiring".into()],
        to: TargetDef::State("Retired".into()),
        guards: vec!["keys_deleted".into()],
        ..Default::default()
    });
    let analysis = fsm_core::analysis::check(&def);
    analysis.machine.expect("a valid definition")
}

#[test]
fn an_expression_that_does_not_compile_stops_the_build() {
    let err = Runtime::builder(
        defined("size(object.data.disk_keys ==="),
        MemoryStore::new(),
    )
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
    Runtime::builder(
        defined("size(object.data.disk_keys ==="),
        MemoryStore::new(),
    )
    .guard("keys_deleted", |_| true)
    .build()
    .unwrap();
}

/// The sabakan seed's rules on keys, as its shipped spec states them in CEL: keys
/// are deleted only while Retiring (`delete_keys` adds none, `add_key` deletes
/// none), none added once Retired, and retirement completes only without keys.
#[test]
fn the_sabakan_spec_checks_changes_of_data() {
    let machine = fsm_core::spec::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/sabakan/machine.toml"),
    )
    .unwrap();
    let rt = Runtime::builder(machine, MemoryStore::new())
        .guard("restarted", |_| true)
        .build()
        .unwrap();
    let admin = Actor::new("ops").with_role("admin");
    let controller = Actor::new("neco").with_role("controller");
    let keys = |keys: &[&str]| -> std::sync::Arc<str> {
        serde_json::json!({ "disk_keys": keys }).to_string().into()
    };
    let data = |rt: &Runtime| -> serde_json::Value {
        serde_json::from_str(rt.get("m").unwrap().data.as_deref().unwrap()).unwrap()
    };
    let refused_by = |result: Result<_, RuntimeError>| match result {
        Err(RuntimeError::Guard { guard, .. }) => guard,
        other => panic!("{:?}", other.map(|_| ())),
    };
    rt.create_with("m", &admin, Some(keys(&["k1"]))).unwrap();
    rt.run("m", &controller, "initialize").unwrap();

    // Healthy: a key may be added, none deleted (not even while adding one).
    rt.start_changing("m", None, &controller, "add_key", keys(&["k1", "k2"]))
        .unwrap()
        .complete()
        .unwrap();
    assert_eq!(data(&rt)["disk_keys"], serde_json::json!(["k1", "k2"]));
    let r = rt.start_changing("m", None, &controller, "add_key", keys(&["k3"]));
    assert_eq!(refused_by(r), "keeps_keys");
    assert!(matches!(
        rt.start_changing("m", None, &admin, "delete_keys", keys(&[])),
        Err(RuntimeError::NoRule { .. })
    ));
    // An action that proposes no change of data passes the rules on changes.
    rt.start("m", &controller, "add_key")
        .unwrap()
        .complete()
        .unwrap();
    // A failed change leaves the data as it was.
    let held = rt
        .start_changing("m", None, &controller, "add_key", keys(&["k1", "k2", "k4"]))
        .unwrap();
    held.fail().unwrap();
    assert_eq!(data(&rt)["disk_keys"], serde_json::json!(["k1", "k2"]));

    // Retiring: the keys must go before retirement completes, and deleting adds none.
    rt.run("m", &admin, "retire").unwrap();
    assert_eq!(
        refused_by(rt.start("m", &controller, "complete_retirement")),
        "keys_deleted"
    );
    let r = rt.start_changing("m", None, &admin, "delete_keys", keys(&["k1", "k9"]));
    assert_eq!(refused_by(r), "adds_no_keys");
    // A change computed from one version is not written over another.
    let stale = rt.get("m").unwrap().version - 1;
    assert!(matches!(
        rt.start_changing("m", Some(stale), &admin, "delete_keys", keys(&[])),
        Err(RuntimeError::VersionMismatch { .. })
    ));
    let version = rt.get("m").unwrap().version;
    rt.start_changing("m", Some(version), &admin, "delete_keys", keys(&[]))
        .unwrap()
        .complete()
        .unwrap();
    rt.run("m", &controller, "complete_retirement").unwrap();

    // Retired: no key can be added.
    assert!(matches!(
        rt.start_changing("m", None, &controller, "add_key", keys(&["k5"])),
        Err(RuntimeError::NoRule { .. })
    ));
    assert_eq!(data(&rt)["disk_keys"], serde_json::json!([]));
    fsm_runtime::check_history(rt.machine(), &rt.history("m").unwrap()).unwrap();
}
