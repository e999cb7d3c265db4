//! A crate outside the workspace, depending on `fsm` by path with the feature
//! `diagram` as a user's crate would, derives a machine and runs `cargo doc`: the
//! enum's page shows the machine drawn (an SVG made at compile time, nothing
//! fetched) and its table of actions.

use std::path::{Path, PathBuf};
use std::process::Command;

const LIB: &str = r#"//! A user's crate.
use fsm::StateMachine;

/// A door with a lock.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Open)]
#[fsm(roles(keeper = "Holds the key"))]
#[fsm(action(close, from = Open, to = Closed))]
#[fsm(action(open, from = Closed, to = Open))]
#[fsm(action(lock, from = Closed, via = Locking, to = Locked, roles = keeper))]
#[fsm(action(unlock, from = Locked, via = Unlocking, to = Closed, roles = keeper))]
#[fsm(action(oil, from = [Open, Closed], via = Oiling, to_origin))]
pub enum Door {
    Open,
    Closed,
    #[fsm(transition)]
    Locking,
    Locked,
    #[fsm(transition)]
    Unlocking,
    #[fsm(transition)]
    Oiling,
}

/// The same door, drawn in full.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(initial = Open, diagram = full)]
#[fsm(action(close, from = Open, via = Closing, to = Closed))]
pub enum FullDoor {
    Open,
    #[fsm(transition)]
    Closing,
    #[fsm(terminal)]
    Closed,
}

/// A gate from a spec file, drawn in full: the view is a setting beside `spec`.
#[derive(StateMachine, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[fsm(spec = "gate.toml", diagram = full)]
pub enum Gate {
    Open,
    Swinging,
    Shut,
}
"#;

const GATE: &str = r#"[machine]
name = "gate"
initial = "Open"

[states]
Open = "Open"
Swinging = { transition = true }
Shut = "Shut"

[actions]
swing = { from = "Open", via = "Swinging", to = "Shut" }
open = { from = "Shut", to = "Open" }
"#;

fn user_crate() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("fsm-doc-diagram-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"doors\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nfsm = {{ path = {:?}, features = [\"diagram\", \"toml\"] }}\n\n[workspace]\n",
            root.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIB).unwrap();
    std::fs::write(dir.join("gate.toml"), GATE).unwrap();
    // The workspace's lock file, so that the build takes the versions this
    // machine already has.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    dir
}

#[test]
fn cargo_doc_shows_the_machine_on_the_enum_page() {
    let dir = user_crate();
    // Its own target directory under ours, kept between runs.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/doc-diagram");
    let out = Command::new(env!("CARGO"))
        .args(["doc", "--offline", "--no-deps", "-q"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo doc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(target.join("doc/doors/enum.Door.html")).unwrap();
    // The drawing, inline: rustdoc kept it as HTML.
    let svg = &page[page
        .find("<svg xmlns=\"http://www.w3.org/2000/svg\"")
        .expect("an SVG on the page")..];
    let svg = &svg[..svg.find("</svg>").expect("the SVG ends") + 6];
    // Folded by default: static states drawn, each move labelled with its
    // transition state, back-to-origin actions listed on their states.
    for text in [
        ">Open</text>",
        ">Closed</text>",
        ">Locked</text>",
        ">lock (Locking) by keeper</text>",
        ">unlock (Unlocking) by keeper</text>",
        ">↻ oil (Oiling)</text>",
    ] {
        assert!(svg.contains(text), "{text} not in {svg}");
    }
    assert!(
        !svg.contains(">Locking</text>"),
        "a transition state drawn as a box: {svg}"
    );
    // And the table of actions, as a Markdown table rendered by rustdoc.
    assert!(page.contains("Transition table"), "{page}");
    assert!(
        page.contains("<td>lock</td><td>Closed</td><td>Locking</td><td>Locked</td><td>keeper</td>"),
        "no row for lock in {page}"
    );

    let full = std::fs::read_to_string(target.join("doc/doors/enum.FullDoor.html")).unwrap();
    assert!(
        full.contains(">Closing</text>"),
        "the full view draws transition states"
    );
    let gate = std::fs::read_to_string(target.join("doc/doors/enum.Gate.html")).unwrap();
    assert!(
        gate.contains(">Swinging</text>"),
        "a spec file's enum drawn in the view it asks for"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
