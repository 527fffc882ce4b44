#![no_main]
//! Fuzz target `sse_head`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("sse_head")(data));
