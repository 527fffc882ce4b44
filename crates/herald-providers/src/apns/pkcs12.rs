//! Certificate auth from a PKCS#12 file (`.p12`, what Keychain Access exports for an APNs
//! certificate): the certificate chain and private key are taken out once, when the
//! credentials are given, and kept as PEM, which is what the TLS client presents. Legacy
//! (RC2/3DES, as older Keychains and `openssl -legacy` write) and modern (AES) files are read.

use base64::Engine;

use super::{ApnsAuth, ApnsError};

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Certificate auth from the bytes of a PKCS#12 file and its password.
pub fn from_pkcs12(der: &[u8], password: &str) -> Result<ApnsAuth, ApnsError> {
    let store = p12_keystore::KeyStore::from_pkcs12(
        der,
        password,
        p12_keystore::Pkcs12ImportPolicy::Relaxed,
    )
    .map_err(|e| {
        ApnsError::Certificate(format!(
            "the PKCS#12 file cannot be read ({e}); check the password"
        ))
    })?;
    let (_, chain) = store.private_key_chain().ok_or_else(|| {
        ApnsError::Certificate("the PKCS#12 file holds no private key with its certificate".into())
    })?;
    if chain.certs().is_empty() {
        return Err(ApnsError::Certificate(
            "the PKCS#12 file holds a key but no certificate".into(),
        ));
    }
    let cert_pem: String = chain
        .certs()
        .iter()
        .map(|c| pem("CERTIFICATE", c.as_der()))
        .collect();
    let auth = ApnsAuth::Certificate {
        cert_pem,
        key_pem: pem("PRIVATE KEY", chain.key().as_der()),
    };
    auth.validate()?;
    Ok(auth)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made once with `openssl req -x509 -newkey ec` and `openssl pkcs12 -export -legacy`
    /// (RC2-40 and 3DES, as older Keychains write), password `herald`. A throwaway key.
    const LEGACY_P12: &str = include_str!("testdata/legacy.p12.b64");
    /// The same certificate exported without `-legacy` (AES-256, PBKDF2).
    const MODERN_P12: &str = include_str!("testdata/modern.p12.b64");

    fn bytes(b64: &str) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(b64.split_whitespace().collect::<String>())
            .unwrap()
    }

    #[test]
    fn legacy_and_modern_files_give_certificate_auth() {
        for file in [LEGACY_P12, MODERN_P12] {
            let ApnsAuth::Certificate { cert_pem, key_pem } =
                from_pkcs12(&bytes(file), "herald").unwrap()
            else {
                panic!("certificate auth expected");
            };
            assert!(cert_pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
            assert!(key_pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        }
    }

    #[test]
    fn a_wrong_password_or_garbage_is_a_clear_error() {
        let e = from_pkcs12(&bytes(MODERN_P12), "wrong").unwrap_err();
        assert!(e.to_string().contains("check the password"), "{e}");
        assert!(from_pkcs12(b"not a p12", "herald").is_err());
    }
}
