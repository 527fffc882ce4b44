#![no_main]
//! Fuzz target `tag_expr`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("tag_expr")(data));
