#![no_main]
//! Fuzz target `cursor_strings`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("cursor_strings")(data));
