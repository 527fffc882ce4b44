#![no_main]
//! Fuzz target `mqtt_packets`: see its entry point in crates/herald-fuzz.
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_fuzz::target("mqtt_packets")(data));
