#![no_main]
//! Fuzz target `config_file`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("config_file")(data));
