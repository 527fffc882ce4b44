#![no_main]
//! Fuzz target `meteord_conf`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("meteord_conf")(data));
