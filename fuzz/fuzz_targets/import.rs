//! A document in one of the import formats, chosen by the first byte (or told
//! by what it holds, `fsm_interchange::import`): each importer answers a spec or a typed error with its place, never a panic, and
//! the spec it writes loads (or is refused with findings, as a table with errors
//! is written all the same).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&format, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let imported = match format % 6 {
        0 => fsm_interchange::from_xstate(text, "fuzzed"),
        1 => fsm_interchange::from_scxml(text, "fuzzed"),
        2 => fsm_interchange::plantuml(text, "fuzzed"),
        3 => fsm_interchange::mermaid(text, "fuzzed"),
        4 => fsm_interchange::source_from_url(text),
        _ => fsm_interchange::import(text, "fuzzed"),
    };
    if let (Ok(spec), true) = (imported, format % 6 != 4) {
        let _ = fsm_core::spec::load_str("imported.toml", spec);
    }
});
