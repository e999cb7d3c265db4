//! The layers of ARCHITECTURE.md, held: no crate depends on a layer above it (a
//! test's dev-dependency may, by path only), the derive's dependency tree and
//! the facade's default tree hold no runtime and no gRPC, no crate's modules
//! import each other in a cycle, a published package holds its licenses and
//! every file its code and doctests read, no dependency needs a newer Rust than
//! the workspace's `rust-version`, and docs.rs documents every feature.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Each crate of the workspace and its layer; a crate may depend only on crates of
/// lower layers.
const LAYERS: &[(&str, u32)] = &[
    ("fsm-model", 0),
    ("fsm-toml", 1),
    ("fsm-analysis", 1),
    ("fsm-render", 1),
    ("fsm-interchange", 1),
    ("fsm-core", 2),
    ("fsm-derive", 2),
    ("fsm-runtime", 3),
    ("fsm-cli", 3),
    ("fsm-etcd", 4),
    ("fsm-serve", 5),
    ("fsm", 5),
    ("fsm-operators", 6),
    ("fsm-no-std", 6),
];

/// Crates the table layers must never pull in, by name or name prefix.
const HEAVY: &[&str] = &[
    "tokio",
    "dashmap",
    "tracing",
    "tonic",
    "prost",
    "etcd-client",
    "h2",
    "hyper",
    "fsm-runtime",
    "fsm-etcd",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What `cargo` run from the workspace's root with `args` prints, once it has
/// succeeded.
fn cargo<'a>(args: impl IntoIterator<Item = &'a str>) -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let args: Vec<&str> = args.into_iter().collect();
    let out = Command::new(cargo)
        .current_dir(root())
        .args(&args)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("cargo prints UTF-8")
}

fn metadata() -> Value {
    let out = cargo([
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
        "--offline",
    ]);
    serde_json::from_str(&out).expect("cargo metadata prints JSON")
}

fn layer(name: &str) -> Option<u32> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|&(_, l)| l)
}

#[test]
fn every_workspace_crate_has_a_layer() {
    let meta = metadata();
    let members: BTreeSet<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"].is_null())
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let listed: BTreeSet<String> = LAYERS.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(
        members, listed,
        "a crate was added or removed: give it a layer here and in ARCHITECTURE.md"
    );
}

/// A dependency of a workspace crate on one of its own layer or above.
struct ReachUp {
    name: String,
    own: u32,
    dep: String,
    theirs: u32,
    /// `cargo metadata`'s entry for the dependency.
    entry: Value,
}

/// Every dependency of a workspace crate on another of its own layer or above,
/// of every kind.
fn reaching_up() -> Vec<ReachUp> {
    let meta = metadata();
    let mut found = Vec::new();
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let Some(own) = layer(name) else { continue };
        for entry in package["dependencies"].as_array().unwrap() {
            let dep = entry["name"].as_str().unwrap();
            if let Some(theirs) = layer(dep).filter(|&theirs| theirs >= own && dep != name) {
                found.push(ReachUp {
                    name: name.to_owned(),
                    own,
                    dep: dep.to_owned(),
                    theirs,
                    entry: entry.clone(),
                });
            }
        }
    }
    found
}

fn is_dev(up: &ReachUp) -> bool {
    up.entry["kind"].as_str() == Some("dev")
}

#[test]
fn no_crate_depends_on_a_layer_above_it() {
    // Dev-dependencies (tests, benches) may reach up; the code may not.
    let wrong: Vec<String> = reaching_up()
        .iter()
        .filter(|up| !is_dev(up))
        .map(|up| {
            format!(
                "{} (layer {}) depends on {} (layer {})",
                up.name, up.own, up.dep, up.theirs
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A dev-dependency that reaches up is by path only, with no version: cargo
/// leaves such a dependency out of the manifest it publishes, so a test's reach
/// up never closes a cycle that stops `cargo package` (fsm-core depends on
/// fsm-render, whose tests load specs through fsm-core). `.ci/run` packages
/// every published crate.
#[test]
fn a_dev_dependency_that_reaches_up_is_by_path_only() {
    // A dependency with no version reads as any version, `*`.
    let wrong: Vec<String> = reaching_up()
        .iter()
        .filter(|up| is_dev(up) && up.entry["req"].as_str() != Some("*"))
        .map(|up| {
            format!(
                "{} (layer {}) dev-depends on {} with a version: give it by path \
                 only, `{} = {{ path = \"..\" }}`",
                up.name, up.own, up.dep, up.dep
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The crates `cargo tree` resolves for `package` with `features`, normal and build
/// dependencies, as a build of that package alone would compile them.
fn tree(package: &str, features: &[&str]) -> BTreeSet<String> {
    let features = features.join(",");
    let mut args = vec![
        "tree",
        "--offline",
        "-p",
        package,
        "-e",
        "normal,build",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ];
    if !features.is_empty() {
        args.extend(["--features", &features]);
    }
    cargo(args)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

fn heavy(tree: &BTreeSet<String>) -> Vec<&String> {
    tree.iter()
        .filter(|c| {
            HEAVY
                .iter()
                .any(|h| *c == h || c.starts_with(&format!("{h}-")))
        })
        .collect()
}

#[test]
fn the_derive_compiles_no_runtime_and_no_grpc() {
    for features in [&[][..], &["toml"][..]] {
        let tree = tree("fsm-derive", features);
        assert!(tree.contains("fsm-analysis"), "{tree:?}");
        assert_eq!(heavy(&tree), Vec::<&String>::new(), "features {features:?}");
    }
}

#[test]
fn a_crate_that_only_derives_compiles_no_runtime() {
    let default = tree("fsm", &[]);
    assert!(
        default.contains("fsm-derive") && default.contains("fsm-core"),
        "{default:?}"
    );
    assert_eq!(heavy(&default), Vec::<&String>::new());
    // What keeps a derive-only crate's cold build at or under rust-fsm's
    // (BENCHMARKS.md): no drawing code unless asked for, and a macro on the
    // compiler's own `proc_macro` (no token-tree library to compile first).
    for light in ["fsm-render", "proc-macro2", "quote", "syn"] {
        assert!(!default.contains(light), "{light} in {default:?}");
    }
    assert!(tree("fsm", &["render"]).contains("fsm-render"));
    // Spec files add the TOML parser, nothing of the runtime.
    let with_toml = tree("fsm", &["toml"]);
    assert!(with_toml.contains("fsm-toml"));
    assert_eq!(heavy(&with_toml), Vec::<&String>::new());
    // And the test is able to see a runtime when one is asked for.
    assert!(tree("fsm", &["runtime"]).contains("tokio"));
}

/// The crates a `#![no_std]` crate that derives builds into itself (the
/// macro's own, which run on the host, aside): each of them is `no_std`.
const NO_STD: &[&str] = &[
    "fsm-no-std",
    "fsm",
    "fsm-core",
    "fsm-model",
    "once_cell",
    "serde",
    "serde_core",
];

#[test]
fn a_crate_that_only_derives_builds_without_std() {
    // `tests/no-std` alone, so that nothing else turns `std` on: a `#![no_std]`
    // crate that derives a machine and uses it. `fsm`, `fsm-core` and
    // `fsm-model` are `no_std` there (each says so without `std`), so a use of
    // `std` in any of them fails this build. Its own target directory: the
    // running `cargo test` holds the workspace's.
    let target = root().join("target").join("no-std");
    cargo([
        "check",
        "--offline",
        "-q",
        "-p",
        "fsm-no-std",
        "--target-dir",
        target.to_str().expect("a UTF-8 path"),
    ]);
    let built = cargo([
        "tree",
        "--offline",
        "-p",
        "fsm-no-std",
        "-e",
        "normal,no-proc-macro",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    let built: BTreeSet<&str> = built
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        built,
        NO_STD.iter().copied().collect(),
        "what a no_std derive builds"
    );
}

#[test]
fn the_cli_uses_the_table_layers_only() {
    let tree = tree("fsm-cli", &[]);
    assert_eq!(heavy(&tree), Vec::<&String>::new());
}

/// The top-level module a `crate::` or `super::` path names, seen from `module`.
fn modules_named(text: &str, module: &str, nested: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        // `$crate::` and `fsm_crate::` are not paths into this crate.
        if text[..i].ends_with(['$', '_']) || text[..i].ends_with(|c: char| c.is_alphanumeric()) {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    // In a file of a module with children (`render/dot.rs`), `super::` is the module.
    if !nested {
        for (i, _) in text.match_indices("super::") {
            if text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &text[i + "super::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != "super" {
                out.insert(name);
            }
        }
    }
    out.remove(module);
    out
}

/// For each top-level module of the crate in `src`, the top-level modules it uses.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let tops: BTreeSet<String> = files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(src).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            first.trim_end_matches(".rs").to_owned()
        })
        .collect();
    for file in &files {
        let rel = file.strip_prefix(src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" || top == "main" {
            continue;
        }
        let nested = rel.components().count() > 1;
        let text = std::fs::read_to_string(file).unwrap();
        // Tests inside a module may reach anywhere.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let used = modules_named(text, &top, nested);
        graph
            .entry(top)
            .or_default()
            .extend(used.into_iter().filter(|m| tops.contains(m) && m != "lib"));
    }
    graph
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|start| visit(start, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_a_cycle_between_its_modules() {
    let metadata = metadata();
    for (name, _) in LAYERS {
        let manifest = metadata["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .find(|p| p["name"] == *name)
            .and_then(|p| p["manifest_path"].as_str())
            .unwrap_or_else(|| panic!("{name} is a package of the workspace"));
        let src = Path::new(manifest).with_file_name("src");
        let graph = module_graph(&src);
        assert_eq!(
            cycle(&graph),
            None,
            "{name}: modules that import each other"
        );
    }
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("ast".to_owned(), BTreeSet::from(["attr".to_owned()])),
        ("attr".to_owned(), BTreeSet::from(["ast".to_owned()])),
    ]
    .into();
    assert_eq!(
        cycle(&graph),
        Some(vec!["ast".into(), "attr".into(), "ast".into()])
    );
    let used = modules_named(
        "use crate::ctxt::Errors;\nuse super::x;\n$crate::y",
        "attr",
        false,
    );
    assert_eq!(used, BTreeSet::from(["ctxt".to_owned(), "x".to_owned()]));
}

/// The files of `package`'s published package, as `cargo package --list` gives
/// them (paths relative to the package's root).
fn packaged(package: &str) -> BTreeSet<String> {
    cargo([
        "package",
        "--list",
        "--allow-dirty",
        "--offline",
        "-p",
        package,
    ])
    .lines()
    .map(str::to_owned)
    .collect()
}

/// `path` written from `dir` (both relative to a package's root, `/`-separated),
/// with `.` and `..` resolved; `None` if it leaves the package.
fn within(dir: &str, path: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// The lines of a source file that are Rust code: its own code, and in its docs
/// (or a Markdown file) the lines of the Rust code blocks, which run as doctests.
/// Prose and blocks of other languages (`text`, `toml`, `sh`, `ignore`...) name
/// files without reading them.
fn code_lines<'t>(file: &str, text: &'t str) -> Vec<&'t str> {
    let markdown = file.ends_with(".md");
    let mut fence: Option<bool> = None; // inside a block: whether it is Rust
    let mut out = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let doc = ["//!", "///"]
            .iter()
            .find_map(|marker| trimmed.strip_prefix(marker))
            .map(str::trim_start);
        let Some(doc) = doc.or(markdown.then_some(trimmed)) else {
            out.push(line);
            continue;
        };
        if let Some(info) = doc.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(info.split(',').map(str::trim).all(|tag| {
                    ["", "rust", "no_run", "should_panic"].contains(&tag)
                        || tag.starts_with("edition")
                })),
            };
        } else if fence == Some(true) {
            out.push(doc);
        }
    }
    out
}

/// The files a source file of a package reads when it is built or its doctests
/// run, each as written and resolved against the package's root (`None`: it
/// leaves the package): what `include_str!`, `include_bytes!` and `#[path]` name
/// (from the file's own directory), a path under `CARGO_MANIFEST_DIR`, and the
/// spec files named by `spec::load("…")` or `spec = "…"` (from the package's
/// root, where the derive and doctests start). A `no_run` doctest counts: it
/// is compiled, and the derive reads its spec then.
fn reads(file: &str, text: &str) -> Vec<(String, Option<String>)> {
    let text = code_lines(file, text).join("\n");
    let dir = file.rsplit_once('/').map_or("", |(dir, _)| dir);
    let from_file = ["include_str!(\"", "include_bytes!(\"", "#[path = \""];
    let from_root = [
        "env!(\"CARGO_MANIFEST_DIR\"), \"",
        "spec::load(\"",
        "spec = \"",
    ];
    let mut found = Vec::new();
    for (starts, base) in [(&from_file, dir), (&from_root, "")] {
        for start in starts {
            for (at, _) in text.match_indices(start) {
                let rest = &text[at + start.len()..];
                let path = &rest[..rest.find('"').unwrap_or(rest.len())];
                // A spec named by a string is a file only if it looks like one
                // (`let spec = "[guards]…"` is a spec's text).
                let spec = matches!(*start, "spec::load(\"" | "spec = \"");
                if spec && !path.ends_with(".toml") {
                    continue;
                }
                found.push((path.to_owned(), within(base, path)));
            }
        }
    }
    found
}

/// Whether `package` (from `cargo metadata`) is published: `publish = false`
/// is an empty list of registries.
fn published(package: &Value) -> bool {
    !package["publish"].as_array().is_some_and(|r| r.is_empty())
}

/// A package holds its licenses, its README (with its Rust examples run as
/// doctests), and every file its code and doctests read.
#[test]
fn a_package_holds_its_readme_and_every_file_its_code_and_doctests_read() {
    let meta = metadata();
    let mut wrong = Vec::new();
    let mut checked = BTreeSet::new();
    let mut examples = Vec::new();
    for package in meta["packages"].as_array().unwrap() {
        if !published(package) {
            continue;
        }
        let name = package["name"].as_str().unwrap();
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap();
        let files = packaged(name);
        for license in ["LICENSE-MIT", "LICENSE-APACHE"] {
            if !files.contains(license) {
                wrong.push(format!("{name}: the package has no {license}"));
            }
        }
        // Its page on crates.io; what it shows as Rust runs as doctests.
        match std::fs::read_to_string(dir.join("README.md")) {
            Ok(_) if !files.contains("README.md") => {
                wrong.push(format!("{name}: the package leaves out its README.md"))
            }
            // Rust that rustdoc runs (not `ignore`d blocks).
            Ok(readme) if !code_lines("README.md", &readme).is_empty() => {
                examples.push(name.to_owned())
            }
            Ok(_) => {}
            Err(_) => wrong.push(format!("{name}: no README.md (its page on crates.io)")),
        }
        for file in files
            .iter()
            .filter(|f| f.ends_with(".rs") || f.ends_with(".md"))
        {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            for (written, resolved) in reads(file, &text) {
                checked.insert(format!("{name}: {file} reads {written}"));
                match resolved {
                    None => wrong.push(format!(
                        "{name}: {file} reads {written}, outside the package"
                    )),
                    Some(path) if !files.contains(&path) => wrong.push(format!(
                        "{name}: {file} reads {written}, which the package leaves out"
                    )),
                    Some(_) => {}
                }
            }
        }
    }
    for name in &examples {
        if !checked.contains(&format!("{name}: src/lib.rs reads ../README.md")) {
            wrong.push(format!(
                "{name}: README.md shows Rust that no doctest runs \
                 (`#[cfg(doctest)] #[doc = include_str!(\"../README.md\")]` in src/lib.rs)"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The scan sees the reads it is there for: the facade's README, a spec its
    // README loads, a runtime doctest's spec, the page fsm-serve serves.
    for read in [
        "fsm: src/lib.rs reads ../README.md",
        "fsm: README.md reads specs/ovc/vm.toml",
        "fsm-runtime: src/lib.rs reads /specs/ovc/vm.toml",
        "fsm-serve: src/page.rs reads page.html",
    ] {
        assert!(
            checked.contains(read),
            "not found: {read}; found: {checked:#?}"
        );
    }
}

#[test]
fn a_read_is_resolved_against_its_file_or_the_package_root() {
    let text = r#"
        //! `spec = "prose.toml"` names a file in prose: nothing reads it.
        //! ```no_run
        //! let node = fsm::spec::load("specs/ovc/node.toml")?;
        //! ```
        //! ```text
        //! #[fsm(spec = "specs/ovc/text.toml")]
        //! ```
        #[doc = include_str!("../README.md")]
        #[path = "../../examples/support/mod.rs"]
        mod support;
        /// ```
        /// # let vm = spec::load(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/ovc/vm.toml"));
        /// ```
        fn f() {
            let spec = "[guards]\ng = { cel = \"true\" }\n";
        }
        #[fsm(spec = "specs/ovc/disk.toml")]
    "#;
    let found = reads("src/lib.rs", text);
    let resolved: Vec<(&str, Option<&str>)> = found
        .iter()
        .map(|(w, r)| (w.as_str(), r.as_deref()))
        .collect();
    assert_eq!(
        resolved,
        [
            ("../README.md", Some("README.md")),
            ("../../examples/support/mod.rs", None),
            ("/specs/ovc/vm.toml", Some("specs/ovc/vm.toml")),
            ("specs/ovc/node.toml", Some("specs/ovc/node.toml")),
            ("specs/ovc/disk.toml", Some("specs/ovc/disk.toml")),
        ]
    );
}

/// `1.88` or `1.88.0` as numbers to compare.
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().unwrap());
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

#[test]
fn no_dependency_needs_a_newer_rust_than_the_workspace_declares() {
    let meta: Value =
        serde_json::from_str(&cargo(["metadata", "--format-version", "1", "--offline"]))
            .expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().unwrap();
    let declared = packages
        .iter()
        .find(|p| p["name"] == "fsm")
        .and_then(|p| p["rust_version"].as_str())
        .expect("the facade declares its rust-version");
    // Every crate of the lock, the optional and dev ones too: a feature or a
    // test that needs more than the declared version would make it untrue.
    let newer: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            let theirs = p["rust_version"].as_str()?;
            let (name, at) = (p["name"].as_str()?, p["version"].as_str()?);
            (version(theirs) > version(declared))
                .then(|| format!("{name} {at} needs Rust {theirs}"))
        })
        .collect();
    assert!(
        newer.is_empty(),
        "the workspace declares rust-version {declared}, but:\n{}",
        newer.join("\n")
    );
}

#[test]
fn docs_rs_documents_every_feature_of_a_published_crate() {
    let meta = metadata();
    let mut wrong = Vec::new();
    for package in meta["packages"].as_array().unwrap() {
        let gated = package["features"]
            .as_object()
            .unwrap()
            .keys()
            .any(|f| f != "default");
        let all = package["metadata"]["docs"]["rs"]["all-features"] == true;
        if published(package) && gated && !all {
            wrong.push(package["name"].as_str().unwrap().to_owned());
        }
    }
    assert!(
        wrong.is_empty(),
        "set `all-features = true` under [package.metadata.docs.rs] in: {}",
        wrong.join(", ")
    );
}
