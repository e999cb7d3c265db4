//! The READMEs' etcd example is this crate's documented example: the facade's
//! README doctests build without protoc, so the example is compiled here (and
//! this crate's own README, its page on crates.io, shows it too).

/// The lines of the first fenced block of `lang` after `heading` in `text`.
fn block(text: &str, heading: &str, lang: &str) -> Vec<String> {
    let after = &text[text.find(heading).expect("the section exists")..];
    let start = after
        .find(&format!("```{lang}\n"))
        .expect("the block exists")
        + lang.len()
        + 4;
    let end = start + after[start..].find("```").expect("the block ends");
    after[start..end].lines().map(str::to_owned).collect()
}

#[test]
fn the_readmes_show_the_example_this_crate_compiles() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    let docs: String = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.trim_start_matches("//!"))
                .to_owned()
                + "\n"
        })
        .collect();
    let documented = block(&docs, "", "no_run");
    let shown = block(&readme, "## On etcd", "rust,ignore");
    assert!(!shown.is_empty());
    assert_eq!(shown, documented);
    let own = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert_eq!(block(&own, "", "rust,no_run"), documented);
}
