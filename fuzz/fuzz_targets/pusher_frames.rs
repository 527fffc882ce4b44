#![no_main]
//! Fuzz target `pusher_frames`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("pusher_frames")(data));
