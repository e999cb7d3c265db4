//! OpenvCloud's scenarios through the example (`examples/ovc`): what each prints
//! is what happened.

#[path = "../examples/machines/mod.rs"]
mod machines;
#[path = "../examples/ovc/scenarios.rs"]
mod scenarios;

#[test]
fn validate_transition_allows_the_table_and_says_why_not() {
    assert_eq!(
        scenarios::validate(),
        [
            "RUNNING -> PAUSING: allowed",
            "PAUSING -> PAUSED: allowed",
            "RUNNING -> PAUSED: allowed",
            "refused: DEPLOYING is a transition state: deploy is running and can only end in RUNNING, not HALTED",
        ]
    );
}

#[test]
fn scenario_1_a_destroy_waits_behind_a_hidden_migration() {
    let trace = scenarios::migration().unwrap();
    let expected = [
        "vm-1 is RUNNING",
        "migrate queued; vm-1 still shows RUNNING",
        "destroy queued; vm-1 shows DESTROYING",
        "reboot refused: cannot execute action at this time: vm-1 is DESTROYING while `destroy` runs (held by user)",
        "migration finished",
        "destroy_vm ran [\"stop\", \"delete\", \"destroy\"]: vm-1 is DESTROYED",
        "queues left: 0",
        "  vm-1 v1 Created create by user: VIRTUAL -> VIRTUAL",
        "  vm-1 v2 Started deploy by user: VIRTUAL -> DEPLOYING",
        "  vm-1 v3 Completed deploy by user: DEPLOYING -> RUNNING",
        "  vm-1 v4 Started migrate by load-balancer: RUNNING -> RUNNING",
        "  vm-1 v5 Started destroy by user: RUNNING -> DESTROYING",
        "  vm-1 v6 Completed migrate by load-balancer: DESTROYING -> DESTROYING",
        "  vm-1 v7 Completed destroy by user: DESTROYING -> DESTROYED",
        "vm-1 removed in DESTROYED at v8; then: no object vm-1",
    ];
    assert_eq!(trace, expected);
}

#[test]
fn a_stuck_vm_is_healed_and_the_late_worker_gets_409() {
    let trace = scenarios::stuck().unwrap();
    let expected = [
        "worker-7 stops vm-2: STOPPING",
        "pause refused: cannot execute action at this time: vm-2 is STOPPING while `stop` runs (held by worker-7)",
        "healer: vm-2 stuck in STOPPING by stop since 1795000000s; restored RUNNING",
        "worker-7 completes: 409 Conflict: vm-2 was expected in STOPPING at version 4, found RUNNING at version 5",
        "vm-2 is RUNNING",
        "pause accepted: vm-2 is PAUSED",
        "  vm-2 v1 Created create by user: VIRTUAL -> VIRTUAL",
        "  vm-2 v2 Started deploy by user: VIRTUAL -> DEPLOYING",
        "  vm-2 v3 Completed deploy by user: DEPLOYING -> RUNNING",
        "  vm-2 v4 Started stop by worker-7: RUNNING -> STOPPING",
        "  vm-2 v5 Healed stop by self-healing: STOPPING -> RUNNING",
        "  vm-2 v6 Started pause by user: RUNNING -> PAUSING",
        "  vm-2 v7 Completed pause by user: PAUSING -> PAUSED",
    ];
    assert_eq!(trace, expected);
}

#[test]
fn cloudspace_admin_actions_refuse_a_user() {
    use fsm::StateMachine;
    // The scenario covers every admin-only action of the cloudspace spec.
    let m = machines::CloudspaceState::machine();
    let admin_only: Vec<&str> = m
        .actions()
        .iter()
        .filter(|a| a.roles.iter().any(|r| &**r == "admin"))
        .map(|a| &*a.name)
        .collect();
    assert_eq!(admin_only, ["pause", "resume", "reset"]);

    let trace = scenarios::cloudspace().unwrap();
    let expected = [
        "refused: user may not run `pause`: it needs the role admin",
        "cloudbroker pause: cs-1 is PAUSED",
        "refused: user may not run `resume`: it needs the role admin",
        "cloudbroker resume: cs-1 is DEPLOYED",
        "refused: user may not run `reset`: it needs the role admin",
        "cloudbroker reset: cs-1 is DEPLOYED",
        "  cs-1 v1 Created create by user: VIRTUAL -> VIRTUAL",
        "  cs-1 v2 Started deploy by user: VIRTUAL -> DEPLOYING",
        "  cs-1 v3 Completed deploy by user: DEPLOYING -> DEPLOYED",
        "  cs-1 v4 Started pause by cloudbroker: DEPLOYED -> PAUSING",
        "  cs-1 v5 Completed pause by cloudbroker: PAUSING -> PAUSED",
        "  cs-1 v6 Started resume by cloudbroker: PAUSED -> RESUMING",
        "  cs-1 v7 Completed resume by cloudbroker: RESUMING -> DEPLOYED",
        "  cs-1 v8 Started reset by cloudbroker: DEPLOYED -> RESETTING",
        "  cs-1 v9 Completed reset by cloudbroker: RESETTING -> DEPLOYED",
    ];
    assert_eq!(trace, expected);
}
