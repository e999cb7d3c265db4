//! What the integration tests share.

use std::path::{Path, PathBuf};

/// Every shipped spec file, in path order.
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
