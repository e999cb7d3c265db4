//! A spec file's text, whatever it is: `load_str` answers a machine or a typed
//! error with its place, never a panic; a machine it answers draws and exports.
#![no_main]

use fsm_core::render::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(machine) = fsm_core::spec::load_str("fuzz.toml", text) {
        for format in [Format::Mermaid, Format::Dot, Format::PlantUml] {
            let _ = fsm_core::render::diagram(&machine, format);
        }
        let _ = fsm_core::render::svg(&machine, fsm_core::render::View::Full);
        let _ = fsm_interchange::xstate(&machine);
        let _ = fsm_interchange::scxml(&machine);
    }
});
