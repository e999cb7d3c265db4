//! What the integration tests share.

use std::path::{Path, PathBuf};

/// Every shipped spec file, in path order.
#[allow(dead_code)]
pub fn specs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let mut out = Vec::new();
    for group in std::fs::read_dir(&root).unwrap() {
        let group = group.unwrap().path();
        if group.is_dir() {
            for spec in std::fs::read_dir(&group).unwrap() {
                let spec = spec.unwrap().path();
                if spec.extension().is_some_and(|e| e == "toml") {
                    out.push(spec);
                }
            }
        }
    }
    out.sort();
    assert_eq!(out.len(), 15, "every seed table has its spec");
    out
}

/// The etcd the tests run against: `FSM_ETCD_ENDPOINTS` (comma-separated), or
/// `127.0.0.1:2379` (the one `scripts/test` starts).
#[allow(dead_code)]
pub fn etcd_endpoints() -> Vec<String> {
    std::env::var("FSM_ETCD_ENDPOINTS")
        .unwrap_or_else(|_| "127.0.0.1:2379".into())
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// A test needs something from outside the project that is not there (an etcd, a
/// tool such as Graphviz). That fails the test, saying how to get it, unless the
/// opt-out variable `var` is set; then the skip is written straight to the standard
/// error (past the test harness' capture), where `scripts/test` counts it, and the
/// caller returns.
#[allow(dead_code)]
pub fn missing(var: &str, what: &str, how: &str) {
    if std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0") {
        use std::io::Write;
        let test = std::thread::current().name().unwrap_or("?").to_owned();
        let _ = writeln!(
            std::io::stderr(),
            "fsm-test: SKIPPED {test}: {what} ({var} is set)"
        );
        return;
    }
    panic!("{what}. {how}; or set {var}=1 to skip the tests that need it.");
}
