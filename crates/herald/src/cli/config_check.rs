//! `herald config check`: loads the configuration exactly as `serve` would and prints the
//! effective values (secrets redacted) or the first error (exit code 2). It also checks what
//! `serve` would find only at start: that a one-node server can write its data directory.

use std::process::ExitCode;

use std::path::Path;

use crate::config::{Config, ConfigError, ConfigFlags};

pub const EXAMPLES: &str = "\
Examples:
  herald config check --config herald.toml
  HERALD_LISTEN=0.0.0.0:8080 herald config check --config herald.toml
  herald config check --config herald.toml --sync always

Prints the effective configuration as TOML (each value's source in a comment, secrets
redacted) and `# config ok`; on an invalid value prints which value, where it came from and
why, and exits with code 2.";

/// `herald config ...`
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration and print the effective values.
    #[command(after_help = EXAMPLES)]
    Check(CheckArgs),
}

/// Flags of `herald config check`: the same as `herald serve`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigFlags,
}

/// Runs a `config` subcommand.
pub fn run(cmd: ConfigCommand) -> anyhow::Result<ExitCode> {
    let ConfigCommand::Check(args) = cmd;
    let config = Config::load(&args.config)?;
    config.check_serve()?;
    if config.cluster.postgres.is_none() {
        writable_dir(&config.data).map_err(|reason| ConfigError::Invalid {
            what: "data directory".into(),
            value: format!(" {:?}", config.data.display().to_string()),
            origin: config.source("data"),
            reason,
        })?;
    }
    match &config.config_file {
        Some(path) => println!("# effective configuration (file: {})", path.display()),
        None => println!("# effective configuration (no config file)"),
    }
    print!("{}", config.to_toml_redacted());
    if let Some(tls) = &config.tls {
        let info = &tls.info;
        println!(
            "# TLS certificate {}: subject {}, issuer {}, serial {}, valid until {}",
            tls.files.cert.display(),
            info.subject,
            info.issuer,
            info.serial,
            info.not_after_text
        );
        for warning in info.warnings() {
            println!("# WARN: {warning}");
            eprintln!(
                "warning: TLS certificate {} / key {}: {warning}",
                tls.files.cert.display(),
                tls.files.key.display()
            );
        }
    }
    println!("\n# config ok");
    Ok(ExitCode::SUCCESS)
}

/// Whether the server could create files in `dir`: it is a writable directory, or does not exist
/// yet and its nearest existing parent is one (the server creates it). Tried for real, with a
/// file created and removed at once, since permission bits do not tell (root, read-only mounts).
fn writable_dir(dir: &Path) -> Result<(), String> {
    let mut existing = dir;
    while !existing.exists() {
        match existing.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => existing = parent,
            _ => {
                existing = Path::new(".");
                break;
            }
        }
    }
    if !existing.is_dir() {
        return Err(format!(
            "{} is not a directory",
            if existing == dir {
                "it".to_owned()
            } else {
                existing.display().to_string()
            }
        ));
    }
    let probe = existing.join(format!(".herald-config-check-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) if existing == dir => Err(format!("cannot create files in it: {e}")),
        Err(e) => Err(format!(
            "it does not exist and cannot be created in {}: {e}",
            existing.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_must_be_creatable_or_writable() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(writable_dir(tmp.path()), Ok(()));
        assert_eq!(writable_dir(&tmp.path().join("new/deeper")), Ok(()));
        assert!(
            tmp.path().read_dir().unwrap().next().is_none(),
            "the probe was left behind"
        );
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(writable_dir(&file), Err("it is not a directory".into()));
        let under = writable_dir(&file.join("data")).unwrap_err();
        assert!(under.ends_with("file is not a directory"), "{under}");
        // Not even root may create files in /proc.
        let proc = writable_dir(Path::new("/proc/herald-data")).unwrap_err();
        assert!(proc.contains("cannot be created in /proc"), "{proc}");
    }
}
