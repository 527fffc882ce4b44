//! Herald's config file, read by `herald-config` as `herald serve` reads it: any text is loaded
//! (over the defaults, with no environment) into a configuration or an error, and a
//! configuration prints as TOML that parses.

use std::path::Path;

use herald_config::Config;

/// A `herald.toml`.
pub fn config_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Paths in the file are read (a meteord.conf, CA files): keep the fuzzer off devices that
    // never end or block.
    if ["/dev", "/proc", "/sys"].iter().any(|p| text.contains(p)) {
        return;
    }
    if let Ok(config) = Config::from_file_text(Path::new("fuzz.toml"), text) {
        let printed = config.to_toml_redacted();
        if let Err(e) = printed.parse::<toml::Table>() {
            panic!("the effective configuration is not TOML: {e}\n{printed}");
        }
    }
}
