#![no_main]
//! Fuzz target `ws_frames`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("ws_frames")(data));
