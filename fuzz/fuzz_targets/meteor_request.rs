#![no_main]
//! Fuzz target `meteor_request`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("meteor_request")(data));
