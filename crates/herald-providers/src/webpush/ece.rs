//! RFC 8291 message encryption for Web Push: the `aes128gcm` content coding of RFC 8188 with
//! keys from an ECDH agreement between a fresh (ephemeral) application-server key and the
//! subscription's `p256dh` key, mixed with its `auth` secret. One record, no padding. The
//! per-message ephemeral key and agreement use ring; the fixed-key path for RFC 8291's test
//! vector uses `p256`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use p256::PublicKey;
#[cfg(test)]
use p256::SecretKey;
use rand::RngCore;
use ring::{aead, agreement, hkdf};

use super::{Subscription, WebPushError};

/// The record size announced in the header: one record holds any payload a push service takes.
const RECORD_SIZE: u32 = 4096;
/// Bytes the encryption adds: salt (16), record size (4), key id length (1), key id (65),
/// the padding delimiter (1) and the AES-GCM tag (16).
pub const ENCRYPTION_OVERHEAD: usize = 16 + 4 + 1 + 65 + 1 + 16;

/// Encrypts `plaintext` for the subscription: the whole request body, header included. The
/// ephemeral key pair and the agreement are ring's (much faster than the `p256` arithmetic
/// `encrypt_with` uses for a fixed key).
pub fn encrypt(subscription: &Subscription, plaintext: &[u8]) -> Result<Vec<u8>, WebPushError> {
    let ua_public = decode_key(subscription.p256dh, "p256dh")?;
    let auth = decode_b64url(subscription.auth, "auth")?;
    check_sizes(&auth, plaintext)?;
    let rng = ring::rand::SystemRandom::new();
    let failed = |what: &str| WebPushError::Encryption(format!("{what} failed"));
    let as_secret = agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &rng)
        .map_err(|_| failed("making an ephemeral P-256 key"))?;
    let as_public = as_secret
        .compute_public_key()
        .map_err(|_| failed("computing the ephemeral public key"))?;
    let mut salt = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    let ua_point = ua_public.to_sec1_bytes(); // uncompressed, 65 bytes
    let peer = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, &ua_point);
    agreement::agree_ephemeral(as_secret, &peer, |shared| {
        seal(
            &ua_point,
            as_public.as_ref(),
            shared,
            &auth,
            &salt,
            plaintext,
        )
    })
    .map_err(|_| failed("ECDH"))?
}

/// [`encrypt`] with the ephemeral key and salt given: RFC 8291's example fixes both.
#[cfg(test)]
pub(crate) fn encrypt_with(
    ua_public: &PublicKey,
    auth_secret: &[u8],
    as_secret: &SecretKey,
    salt: &[u8; 16],
    plaintext: &[u8],
) -> Result<Vec<u8>, WebPushError> {
    check_sizes(auth_secret, plaintext)?;
    let ua_point = ua_public.to_sec1_bytes(); // uncompressed, 65 bytes
    let as_point = as_secret.public_key().to_sec1_bytes();
    let shared = p256::ecdh::diffie_hellman(as_secret.to_nonzero_scalar(), ua_public.as_affine());
    seal(
        &ua_point,
        &as_point,
        shared.raw_secret_bytes(),
        auth_secret,
        salt,
        plaintext,
    )
}

/// A 16-byte auth secret, and a plaintext one record holds.
fn check_sizes(auth_secret: &[u8], plaintext: &[u8]) -> Result<(), WebPushError> {
    if auth_secret.len() != 16 {
        return Err(WebPushError::BadSubscription(format!(
            "the auth secret is {} bytes, not 16",
            auth_secret.len()
        )));
    }
    if plaintext.len() + 1 + 16 > RECORD_SIZE as usize {
        return Err(WebPushError::Encryption(format!(
            "the payload is {} bytes, over the {} one record holds",
            plaintext.len(),
            RECORD_SIZE as usize - 17
        )));
    }
    Ok(())
}

/// The body from the agreement's result: keys derived as RFC 8291 says, one `aes128gcm`
/// record, and the header naming the ephemeral public key `as_point`.
fn seal(
    ua_point: &[u8],
    as_point: &[u8],
    shared_secret: &[u8],
    auth_secret: &[u8],
    salt: &[u8; 16],
    plaintext: &[u8],
) -> Result<Vec<u8>, WebPushError> {
    // IKM = HKDF(auth_secret, ecdh_secret, "WebPush: info" || 0 || ua_public || as_public, 32)
    let mut key_info = Vec::with_capacity(14 + 130);
    key_info.extend_from_slice(b"WebPush: info\0");
    key_info.extend_from_slice(ua_point);
    key_info.extend_from_slice(as_point);
    let ikm: [u8; 32] = hkdf_once(auth_secret, shared_secret, &key_info);

    // CEK and nonce from the salt, as RFC 8188 says.
    let cek: [u8; 16] = hkdf_once(salt, &ikm, b"Content-Encoding: aes128gcm\0");
    let nonce: [u8; 12] = hkdf_once(salt, &ikm, b"Content-Encoding: nonce\0");

    let key = aead::LessSafeKey::new(
        aead::UnboundKey::new(&aead::AES_128_GCM, &cek)
            .map_err(|_| WebPushError::Encryption("bad content key".into()))?,
    );
    let mut record = Vec::with_capacity(plaintext.len() + 17);
    record.extend_from_slice(plaintext);
    record.push(2); // the last (only) record's delimiter
    key.seal_in_place_append_tag(
        aead::Nonce::assume_unique_for_key(nonce),
        aead::Aad::empty(),
        &mut record,
    )
    .map_err(|_| WebPushError::Encryption("AES-GCM failed".into()))?;

    let mut body = Vec::with_capacity(21 + as_point.len() + record.len());
    body.extend_from_slice(salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(as_point.len() as u8);
    body.extend_from_slice(as_point);
    body.extend_from_slice(&record);
    Ok(body)
}

/// HKDF-SHA-256 extract with `salt` then expand `info` to `N` bytes.
fn hkdf_once<const N: usize>(salt: &[u8], ikm: &[u8], info: &[u8]) -> [u8; N] {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(ikm);
    let mut out = [0u8; N];
    let info = [info];
    // N is at most 32 here, far below HKDF-SHA-256's 8160-byte limit: neither call can fail.
    if let Ok(okm) = prk.expand(&info, Len(N)) {
        let _ = okm.fill(&mut out);
    }
    out
}

fn decode_b64url(value: &str, what: &str) -> Result<Vec<u8>, WebPushError> {
    // Browsers give base64url without padding; tolerate padding and the standard alphabet.
    let cleaned: String = value
        .trim()
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    URL_SAFE_NO_PAD
        .decode(cleaned.as_bytes())
        .map_err(|e| WebPushError::BadSubscription(format!("{what} is not base64url: {e}")))
}

fn decode_key(value: &str, what: &str) -> Result<PublicKey, WebPushError> {
    let bytes = decode_b64url(value, what)?;
    if bytes.len() != 65 || bytes[0] != 4 {
        return Err(WebPushError::BadSubscription(format!(
            "{what} is not an uncompressed P-256 point (65 bytes starting 0x04)"
        )));
    }
    PublicKey::from_sec1_bytes(&bytes)
        .map_err(|_| WebPushError::BadSubscription(format!("{what} is not a point on P-256")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(s).unwrap()
    }

    /// RFC 8291 section 5 (intermediate values in its appendix A).
    #[test]
    fn reproduces_the_rfc_8291_example() {
        let as_secret =
            SecretKey::from_slice(&b64("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")).unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.encode(as_secret.public_key().to_sec1_bytes()),
            "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
        );
        let ua_public = decode_key(
            "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
            "p256dh",
        )
        .unwrap();
        let auth = b64("BTBZMqHH6r4Tts7J_aSIgg");
        let salt: [u8; 16] = b64("DGv6ra1nlYgDCS1FRnbzlw").try_into().unwrap();
        let body = encrypt_with(
            &ua_public,
            &auth,
            &as_secret,
            &salt,
            b"When I grow up, I want to be a watermelon",
        )
        .unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.encode(body),
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
        );
    }

    #[test]
    fn refuses_bad_subscription_keys() {
        let good_key = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
        let cases = [
            ("!!", "BTBZMqHH6r4Tts7J_aSIgg"),
            ("BCVx", "BTBZMqHH6r4Tts7J_aSIgg"),
            (good_key, "BTBZ"),
            (good_key, "%%%"),
        ];
        for (p256dh, auth) in cases {
            let s = Subscription {
                endpoint: "https://x/y",
                p256dh,
                auth,
            };
            assert!(
                matches!(encrypt(&s, b"x"), Err(WebPushError::BadSubscription(_))),
                "{p256dh} {auth}"
            );
        }
        // A 65-byte string that is not on the curve.
        let mut off_curve = vec![4u8];
        off_curve.extend([1u8; 64]);
        let p = URL_SAFE_NO_PAD.encode(off_curve);
        let s = Subscription {
            endpoint: "https://x/y",
            p256dh: &p,
            auth: "BTBZMqHH6r4Tts7J_aSIgg",
        };
        assert!(matches!(
            encrypt(&s, b"x"),
            Err(WebPushError::BadSubscription(_))
        ));
    }

    #[test]
    fn overhead_is_what_the_size_limit_assumes() {
        let s = Subscription {
            endpoint: "https://x/y",
            p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
            auth: "BTBZMqHH6r4Tts7J_aSIgg",
        };
        let body = encrypt(&s, &[b'x'; 100]).unwrap();
        assert_eq!(body.len(), 100 + ENCRYPTION_OVERHEAD);
        assert!(encrypt(&s, &[b'x'; 4096 - ENCRYPTION_OVERHEAD]).is_ok());
        assert!(encrypt(&s, &[b'x'; 4096]).is_err());
    }
}
