//! Reading a certificate chain and its private key from PEM files into what rustls serves
//! ([`load`]), and what an operator needs to know about them ([`CertificateInfo`]: subject,
//! serial, validity, whether the key matches). Errors name the file and never show key bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// The certificate and key files of a TLS listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain: the server's certificate first, then intermediates.
    pub cert: PathBuf,
    /// PEM private key: PKCS#8, SEC1 (EC) or PKCS#1 (RSA).
    pub key: PathBuf,
}

/// Why a certificate or key cannot be used. Never holds key bytes.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read the TLS {what} file {}", path.display())]
    Read {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM item of its kind.
    #[error("the TLS {what} file {} {reason}", path.display())]
    Invalid {
        /// `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong (never the file's content).
        reason: String,
    },
}

/// What a loaded certificate says, for logs and `herald config check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The subject's distinguished name, e.g. `CN=push.example.com`.
    pub subject: String,
    /// The issuer's distinguished name.
    pub issuer: String,
    /// The serial number, hex with colons.
    pub serial: String,
    /// Valid from (seconds since the Unix epoch).
    pub not_before: i64,
    /// Valid until (seconds since the Unix epoch).
    pub not_after: i64,
    /// The same instant as text (`Jan  1 00:00:00 2027 +00:00`).
    pub not_after_text: String,
    /// `Some(false)` when the private key does not belong to the certificate; `None` when that
    /// cannot be told.
    pub key_matches: Option<bool>,
}

impl CertificateInfo {
    /// What is wrong with this certificate that still lets it be served: said at WARN by
    /// `serve` and `config check`.
    pub fn warnings(&self) -> Vec<String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut warnings = Vec::new();
        if self.key_matches == Some(false) {
            warnings.push(
                "the private key does not match the certificate: every TLS handshake will fail"
                    .to_owned(),
            );
        }
        if self.not_after < now {
            warnings.push(format!(
                "the certificate expired on {}: clients will refuse it",
                self.not_after_text
            ));
        } else if self.not_before > now {
            warnings.push("the certificate is not valid yet: clients will refuse it".into());
        }
        warnings
    }
}

/// Reads and checks `files`: the chain and key rustls serves, and what the certificate says.
pub fn load(files: &TlsFiles) -> Result<(Arc<CertifiedKey>, CertificateInfo), TlsError> {
    let chain = read_chain(&files.cert)?;
    let key = read_key(&files.key)?;
    let info = describe(&chain[0], &files.cert)?;
    let provider = rustls::crypto::ring::default_provider();
    let signing_key =
        provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsError::Invalid {
                what: "key",
                path: files.key.clone(),
                reason: format!("holds a key rustls cannot use ({})", key_error(&e)),
            })?;
    let certified = CertifiedKey::new(chain, signing_key);
    let key_matches = match certified.keys_match() {
        Ok(()) => Some(true),
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => Some(false),
        Err(_) => None,
    };
    Ok((
        Arc::new(certified),
        CertificateInfo {
            key_matches,
            ..info
        },
    ))
}

/// A key error's kind, without anything of the key.
fn key_error(e: &rustls::Error) -> &'static str {
    match e {
        rustls::Error::General(_) => "unsupported key type or malformed key",
        _ => "unusable key",
    }
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path, "certificate")?;
    let invalid = |reason: String| TlsError::Invalid {
        what: "certificate",
        path: path.to_owned(),
        reason,
    };
    let chain = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("is not valid PEM ({})", e.kind())))?;
    if chain.is_empty() {
        return Err(invalid("holds no PEM CERTIFICATE block".into()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path, "key")?;
    let invalid = |reason: &str| TlsError::Invalid {
        what: "key",
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    match rustls_pemfile::private_key(&mut &pem[..]) {
        Ok(Some(key)) => Ok(key),
        Ok(None) => Err(invalid(
            "holds no PEM private key (PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)",
        )),
        Err(_) => Err(invalid("is not valid PEM")),
    }
}

/// Subject, issuer, serial and validity of the end-entity certificate.
fn describe(cert: &CertificateDer<'_>, path: &Path) -> Result<CertificateInfo, TlsError> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|e| TlsError::Invalid {
            what: "certificate",
            path: path.to_owned(),
            reason: format!("holds a certificate that cannot be parsed ({e})"),
        })?;
    let validity = parsed.validity();
    Ok(CertificateInfo {
        subject: parsed.subject().to_string(),
        issuer: parsed.issuer().to_string(),
        serial: parsed.raw_serial_as_string(),
        not_before: validity.not_before.timestamp(),
        not_after: validity.not_after.timestamp(),
        not_after_text: validity.not_after.to_string(),
        key_matches: None,
    })
}
