//! The `herald` package as a library: Herald's configuration ([`config`]), so that tools other
//! than the binary (the config file's fuzz target in `herald-fuzz`) read a config exactly as
//! `herald serve` does. The binary (`main.rs`) holds the command line and `herald serve`.
#![forbid(unsafe_code)]

pub mod config;
