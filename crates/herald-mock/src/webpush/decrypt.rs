//! The user agent's side of RFC 8291: a subscription's static P-256 key and auth secret, and
//! the decryption of an `aes128gcm` body sent to it (one record, as push messages are).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use p256::{PublicKey, SecretKey};
use rand::RngCore;
use ring::{aead, hkdf};

/// A subscription's keys, as a browser keeps them.
pub(crate) struct UserAgentKeys {
    secret: SecretKey,
    /// The uncompressed public point (`p256dh`).
    pub public: Vec<u8>,
    /// The 16-byte auth secret.
    pub auth: [u8; 16],
}

impl UserAgentKeys {
    pub fn generate() -> Self {
        let secret = SecretKey::random(&mut rand::rngs::OsRng);
        let public = secret.public_key().to_sec1_bytes().to_vec();
        let mut auth = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut auth);
        UserAgentKeys {
            secret,
            public,
            auth,
        }
    }

    pub fn p256dh_b64url(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.public)
    }

    pub fn auth_b64url(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.auth)
    }

    /// The plaintext of `body`, or why it cannot be decrypted.
    pub fn decrypt(&self, body: &[u8]) -> Result<Vec<u8>, String> {
        if body.len() < 21 {
            return Err("shorter than the aes128gcm header".into());
        }
        let salt = &body[..16];
        let record_size = u32::from_be_bytes([body[16], body[17], body[18], body[19]]) as usize;
        let id_len = body[20] as usize;
        let rest = &body[21..];
        if rest.len() < id_len {
            return Err("the key id is cut short".into());
        }
        let (key_id, ciphertext) = rest.split_at(id_len);
        if record_size < 18 || ciphertext.len() > record_size {
            return Err(format!(
                "expected one record of at most rs={record_size} bytes, got {}",
                ciphertext.len()
            ));
        }
        let as_public = PublicKey::from_sec1_bytes(key_id)
            .map_err(|_| "the key id is not a P-256 public key".to_string())?;
        let shared =
            p256::ecdh::diffie_hellman(self.secret.to_nonzero_scalar(), as_public.as_affine());
        let mut key_info = b"WebPush: info\0".to_vec();
        key_info.extend_from_slice(&self.public);
        key_info.extend_from_slice(key_id);
        let ikm = derive(&self.auth, shared.raw_secret_bytes(), &key_info, 32);
        let cek = derive(salt, &ikm, b"Content-Encoding: aes128gcm\0", 16);
        let nonce = derive(salt, &ikm, b"Content-Encoding: nonce\0", 12);
        let key = aead::UnboundKey::new(&aead::AES_128_GCM, &cek)
            .map_err(|_| "bad content key".to_string())?;
        let nonce =
            aead::Nonce::try_assume_unique_for_key(&nonce).map_err(|_| "bad nonce".to_string())?;
        let mut record = ciphertext.to_vec();
        let plain = aead::LessSafeKey::new(key)
            .open_in_place(nonce, aead::Aad::empty(), &mut record)
            .map_err(|_| "decryption failed (wrong keys or a corrupted body)".to_string())?;
        // Strip the padding: zeros after the last record's delimiter 0x02.
        let end = plain
            .iter()
            .rposition(|&b| b != 0)
            .ok_or_else(|| "no padding delimiter".to_string())?;
        if plain[end] != 2 {
            return Err(format!(
                "the padding delimiter is {:#x}, not 0x02",
                plain[end]
            ));
        }
        Ok(plain[..end].to_vec())
    }
}

fn derive(salt: &[u8], ikm: &[u8], info: &[u8], len: usize) -> Vec<u8> {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, salt).extract(ikm);
    let mut out = vec![0u8; len];
    let info = [info];
    if let Ok(okm) = prk.expand(&info, Len(len)) {
        let _ = okm.fill(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8291 section 5: the user agent's keys decrypt the example body.
    #[test]
    fn decrypts_the_rfc_8291_example() {
        let b64 = |s: &str| URL_SAFE_NO_PAD.decode(s).unwrap();
        let secret =
            SecretKey::from_slice(&b64("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94")).unwrap();
        let keys = UserAgentKeys {
            public: secret.public_key().to_sec1_bytes().to_vec(),
            secret,
            auth: b64("BTBZMqHH6r4Tts7J_aSIgg").try_into().unwrap(),
        };
        let body = b64("DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN");
        assert_eq!(
            keys.decrypt(&body).unwrap(),
            b"When I grow up, I want to be a watermelon"
        );
        let mut corrupted = body.clone();
        let last = corrupted.len() - 1;
        corrupted[last] ^= 1;
        assert!(keys.decrypt(&corrupted).is_err());
        for cut in [0, 10, 21, 60, 90] {
            assert!(keys.decrypt(&body[..cut]).is_err(), "{cut}");
        }
    }
}
