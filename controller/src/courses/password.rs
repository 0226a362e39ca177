//! First-login passwords for students without an SSH key: random, readable aloud, and handed
//! to the container only as a SHA-512 crypt(3) hash.

use rand::Rng;

/// No 0/O, 1/l/I: the instructor may read it to a student.
const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const LENGTH: usize = 16;

pub fn generate() -> String {
    let mut rng = rand::thread_rng();
    (0..LENGTH)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect()
}

/// `$6$...` hash for `/etc/shadow` (chpasswd -e).
pub fn crypt_hash(password: &str) -> String {
    let params = sha_crypt::Sha512Params::new(5000).unwrap_or_default();
    sha_crypt::sha512_simple(password, &params).unwrap_or_default()
}

/// Whether `password` is the one `hash` ([`crypt_hash`]) was made from.
pub fn verify(password: &str, hash: &str) -> bool {
    sha_crypt::sha512_check(password, hash).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_long_random_and_hash_verifies() {
        let a = generate();
        assert_eq!(a.len(), LENGTH);
        assert_ne!(a, generate());
        let hash = crypt_hash(&a);
        assert!(hash.starts_with("$6$"), "{hash}");
        assert!(verify(&a, &hash));
        assert!(!verify("wrong", &hash));
    }
}
