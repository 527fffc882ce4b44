//! The TLS keys: `tls_cert` and `tls_key` (PEM files, both or neither; read and checked at
//! load, so `herald config check` and `serve` name a file that cannot be read or parsed) and
//! `meteor_tls` (Meteor's ports serve TLS too, with the same certificate). A certificate that
//! still loads but is wrong (expired, not yet valid, a key of another certificate) is kept with
//! its warnings, which `config check` and `serve` say at WARN.

use herald_server::tls::{certificate, CertificateInfo, TlsFiles};

use super::layers::{Layers, Raw, Source};
use super::validate::{boolean, text, ConfigError};

/// The TLS settings of the HTTP listener, with what the certificate says.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// The certificate and key files.
    pub files: TlsFiles,
    /// The certificate as loaded at configuration time (its warnings are `info.warnings()`).
    pub info: CertificateInfo,
}

fn file(raw: &Raw) -> Result<Option<std::path::PathBuf>, String> {
    let t = text(raw)?;
    if t.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(Some(std::path::PathBuf::from(t)))
}

impl Layers {
    /// The TLS settings: `None` unless both files are set; and whether Meteor's ports use them.
    pub(super) fn tls(&self) -> Result<(Option<TlsConfig>, bool), ConfigError> {
        let cert = self.get("tls_cert", None, file)?;
        let key = self.get("tls_key", None, file)?;
        let meteor_tls = self.get("meteor_tls", false, boolean)?;
        let origin = |k: &str| {
            self.values
                .get(k)
                .map(|(_, s)| s.clone())
                .unwrap_or(Source::Default)
        };
        let files = match (cert, key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (cert, _) => {
                let (set, missing) = match cert {
                    Some(_) => ("tls_cert", "tls_key"),
                    None => ("tls_key", "tls_cert"),
                };
                return Err(ConfigError::Invalid {
                    what: set.into(),
                    value: String::new(),
                    origin: origin(set),
                    reason: format!("needs {missing} too (a certificate and its private key)"),
                });
            }
        };
        if meteor_tls && files.is_none() {
            return Err(ConfigError::Invalid {
                what: "meteor_tls".into(),
                value: " true".into(),
                origin: origin("meteor_tls"),
                reason: "needs tls_cert and tls_key (Meteor's ports use the server's certificate)"
                    .into(),
            });
        }
        let Some(files) = files else {
            return Ok((None, false));
        };
        let info = match certificate::load(&files) {
            Ok((_, info)) => info,
            Err(e) => {
                // The error names the file; its source is the key that named it.
                let key = match &e {
                    certificate::TlsError::Read { what: "key", .. }
                    | certificate::TlsError::Invalid { what: "key", .. } => "tls_key",
                    _ => "tls_cert",
                };
                let mut reason = e.to_string();
                if let Some(source) = std::error::Error::source(&e) {
                    reason = format!("{reason}: {source}");
                }
                return Err(ConfigError::Invalid {
                    what: key.into(),
                    value: String::new(),
                    origin: origin(key),
                    reason,
                });
            }
        };
        Ok((Some(TlsConfig { files, info }), meteor_tls))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, load};
    use super::super::ConfigFlags;

    /// A self-signed certificate and its key, PEM, for `name`.
    fn self_signed(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn both_files_or_neither_and_meteor_tls_needs_them() {
        let c = load(None, &[], ConfigFlags::default()).unwrap();
        assert!(c.tls.is_none() && !c.meteor.tls);
        let e = err(
            None,
            &[("HERALD_TLS_CERT", "/x.pem")],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("tls_cert") && e.contains("needs tls_key too"),
            "{e}"
        );
        let e = err(Some("meteor_tls = true"), &[], ConfigFlags::default());
        assert!(
            e.contains("meteor_tls") && e.contains("needs tls_cert"),
            "{e}"
        );
    }

    #[test]
    fn files_are_read_at_load_and_a_bad_one_is_named_without_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed("localhost");
        let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert_path, &cert).unwrap();
        std::fs::write(&key_path, &key).unwrap();
        let file = format!(
            "tls_cert = {:?}\ntls_key = {:?}\nmeteor_tls = true\n",
            cert_path.display().to_string(),
            key_path.display().to_string()
        );
        let c = load(Some(&file), &[], ConfigFlags::default()).unwrap();
        let tls = c.tls.as_ref().unwrap();
        assert_eq!(tls.info.subject, "CN=rcgen self signed cert");
        assert_eq!(tls.info.key_matches, Some(true));
        assert!(tls.info.warnings().is_empty(), "{:?}", tls.info.warnings());
        assert!(c.meteor.tls);
        let toml = c.to_toml_redacted();
        assert!(toml.contains("meteor_tls = true"), "{toml}");

        let missing = dir.path().join("missing.pem");
        let e = err(
            None,
            &[
                ("HERALD_TLS_CERT", cert_path.to_str().unwrap()),
                ("HERALD_TLS_KEY", missing.to_str().unwrap()),
            ],
            ConfigFlags::default(),
        );
        assert!(
            e.contains("HERALD_TLS_KEY")
                && e.contains("cannot read the TLS key file")
                && e.contains("missing.pem"),
            "{e}"
        );
        // A certificate given as the key: named, and none of its bytes shown.
        let e = err(
            None,
            &[
                ("HERALD_TLS_CERT", key_path.to_str().unwrap()),
                ("HERALD_TLS_KEY", key_path.to_str().unwrap()),
            ],
            ConfigFlags::default(),
        );
        assert!(e.contains("holds no PEM CERTIFICATE block"), "{e}");
        let body: String = key.lines().nth(1).unwrap().into();
        assert!(!e.contains(&body), "key bytes leaked: {e}");
    }

    #[test]
    fn a_key_of_another_certificate_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _) = self_signed("localhost");
        let (_, other_key) = self_signed("localhost");
        std::fs::write(dir.path().join("cert.pem"), cert).unwrap();
        std::fs::write(dir.path().join("key.pem"), other_key).unwrap();
        let env = [
            ("HERALD_TLS_CERT", dir.path().join("cert.pem")),
            ("HERALD_TLS_KEY", dir.path().join("key.pem")),
        ];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.to_str().unwrap())).collect();
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        let warnings = c.tls.unwrap().info.warnings();
        assert!(
            warnings.iter().any(|w| w.contains("does not match")),
            "{warnings:?}"
        );
    }

    #[test]
    fn an_expired_certificate_is_a_warning_naming_its_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.path().join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), key.serialize_pem()).unwrap();
        let cert_path = dir.path().join("cert.pem");
        let key_path = dir.path().join("key.pem");
        let env = [
            ("HERALD_TLS_CERT", cert_path.to_str().unwrap()),
            ("HERALD_TLS_KEY", key_path.to_str().unwrap()),
        ];
        let c = load(None, &env, ConfigFlags::default()).unwrap();
        let warnings = c.tls.unwrap().info.warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("expired on") && w.contains("2020")),
            "{warnings:?}"
        );
    }
}
