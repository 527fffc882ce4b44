#![no_main]
//! Fuzz target `command_json`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("command_json")(data));
