#![no_main]
//! Fuzz target `provider_answers`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("provider_answers")(data));
