//! SASL SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), both ends:
//! the credential a broker stores (a salt, an iteration count and two keys
//! derived from the password, never the password), the client's messages
//! and the server's checks. No channel binding (the `y`/`n` flags only), as
//! Kafka. A nonce is 24 random bytes per exchange, so a recorded exchange
//! replayed on another connection fails its proof.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// `N` bytes from the operating system's random source (salts, nonces, decoy keys).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::getrandom(&mut bytes).expect("the operating system's random source");
    bytes
}

/// Fewest iterations a credential may be derived with (Kafka's minimum).
pub const ITERATIONS_MIN: u32 = 4096;
/// Most iterations: what one PLAIN login may cost the broker.
pub const ITERATIONS_MAX: u32 = 1 << 18;
/// Longest SCRAM message accepted (a name, a nonce, a proof and extensions fit well within).
pub const MESSAGE_BYTES_MAX: usize = 4096;

/// A SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Mechanism {
    #[cfg_attr(feature = "serde", serde(rename = "SCRAM-SHA-256"))]
    ScramSha256,
    #[cfg_attr(feature = "serde", serde(rename = "SCRAM-SHA-512"))]
    ScramSha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::ScramSha256, Mechanism::ScramSha512];

    /// Its SASL name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha256 => Sha256::digest(data).to_vec(),
            Mechanism::ScramSha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::ScramSha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            Mechanism::ScramSha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::ScramSha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations).to_vec()
            }
            Mechanism::ScramSha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations).to_vec()
            }
        }
    }
}

/// Why an exchange failed. The message is for the broker's log; a client is
/// told only that authentication failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScramError(pub String);

fn fail<T>(why: impl Into<String>) -> Result<T, ScramError> {
    Err(ScramError(why.into()))
}

/// What the broker stores for one user and mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Credential {
    #[cfg_attr(feature = "serde", serde(with = "base64_bytes"))]
    pub salt: Vec<u8>,
    pub iterations: u32,
    #[cfg_attr(feature = "serde", serde(with = "base64_bytes"))]
    pub stored_key: Vec<u8>,
    #[cfg_attr(feature = "serde", serde(with = "base64_bytes"))]
    pub server_key: Vec<u8>,
}

impl Credential {
    /// Derives a credential from a password with a fresh 24-byte salt.
    pub fn new(mechanism: Mechanism, password: &str, iterations: u32) -> Result<Credential, ScramError> {
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return fail(format!("iterations must be {ITERATIONS_MIN}..={ITERATIONS_MAX}, not {iterations}"));
        }
        let salt = random_bytes::<24>().to_vec();
        Ok(Credential::derive(mechanism, password, salt, iterations))
    }

    fn derive(mechanism: Mechanism, password: &str, salt: Vec<u8>, iterations: u32) -> Credential {
        let salted = mechanism.salted_password(password, &salt, iterations);
        Credential::of_salted(mechanism, &salted, salt, iterations)
    }

    fn of_salted(mechanism: Mechanism, salted: &[u8], salt: Vec<u8>, iterations: u32) -> Credential {
        let client_key = mechanism.hmac(salted, b"Client Key");
        Credential {
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted, b"Server Key"),
            salt,
            iterations,
        }
    }

    /// The credential of a salted password a client derived itself
    /// (Kafka's AlterUserScramCredentials sends that, never the password):
    /// checked as `new`'s, and the salted password as long as the hash.
    pub fn from_salted(
        mechanism: Mechanism,
        salted: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> Result<Credential, ScramError> {
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return fail(format!("iterations must be {ITERATIONS_MIN}..={ITERATIONS_MAX}, not {iterations}"));
        }
        if salted.len() != mechanism.hash(b"").len() || salt.is_empty() {
            return fail(format!(
                "a {} salted password is {} bytes, with a salt",
                mechanism.name(),
                mechanism.hash(b"").len()
            ));
        }
        Ok(Credential::of_salted(mechanism, salted, salt, iterations))
    }

    /// What an unknown user's password is checked against (SASL PLAIN): a
    /// salt stable per user (from `decoy_key`, as SCRAM's decoy), the
    /// iterations a user gets by default and keys no password derives, so
    /// that a refusal costs what a wrong password does and tells no one
    /// which users exist.
    pub fn decoy(mechanism: Mechanism, user: &str, decoy_key: &[u8]) -> Credential {
        let keys = mechanism.hmac(decoy_key, format!("decoy keys of {user}").as_bytes());
        Credential {
            salt: mechanism.hmac(decoy_key, user.as_bytes())[..24].to_vec(),
            iterations: ITERATIONS_MIN,
            stored_key: keys.clone(),
            server_key: keys,
        }
    }

    /// Whether `password` is the one this credential was derived from (for
    /// SASL PLAIN); costs `iterations` HMACs.
    pub fn matches(&self, mechanism: Mechanism, password: &str) -> bool {
        let derived = Credential::derive(mechanism, password, self.salt.clone(), self.iterations);
        derived.stored_key.ct_eq(&self.stored_key).into()
    }

    /// Whether its fields are within bounds (a credential sent by a client is checked before it is stored).
    pub fn check(&self, mechanism: Mechanism) -> Result<(), ScramError> {
        let key_bytes = mechanism.hash(b"").len();
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&self.iterations) {
            return fail(format!("iterations must be {ITERATIONS_MIN}..={ITERATIONS_MAX}, not {}", self.iterations));
        }
        if self.salt.len() < 16 || self.salt.len() > 64 {
            return fail(format!("a salt of {} bytes; 16..=64 are accepted", self.salt.len()));
        }
        if self.stored_key.len() != key_bytes || self.server_key.len() != key_bytes {
            return fail(format!("{} keys are {key_bytes} bytes", mechanism.name()));
        }
        Ok(())
    }
}

fn nonce() -> String {
    B64.encode(random_bytes::<24>())
}

/// `=` and `,` escaped in a name, as SCRAM writes it.
fn escape(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

fn unescape(name: &str) -> Result<String, ScramError> {
    let unescaped = name.replace("=2C", ",").replace("=3D", "=");
    if unescaped.len() + 2 * name.matches('=').count() != name.len() {
        return fail("a user name with a stray '='");
    }
    Ok(unescaped)
}

/// The value of attribute `key` (`k=value`) of a comma-separated message.
fn attribute(message: &str, key: char) -> Option<&str> {
    message.split(',').find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
}

fn text(message: &[u8]) -> Result<&str, ScramError> {
    if message.len() > MESSAGE_BYTES_MAX {
        return fail(format!("a SCRAM message of {} bytes; at most {MESSAGE_BYTES_MAX}", message.len()));
    }
    std::str::from_utf8(message).map_err(|_| ScramError("a SCRAM message that is not UTF-8".into()))
}

/// The client's side of one exchange.
pub struct ScramClient {
    mechanism: Mechanism,
    password: String,
    first_bare: String,
    nonce: String,
    server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// Starts an exchange; `first()` is the first message to send.
    pub fn new(mechanism: Mechanism, user: &str, password: &str) -> ScramClient {
        ScramClient::with_nonce(mechanism, user, password, nonce())
    }

    fn with_nonce(mechanism: Mechanism, user: &str, password: &str, nonce: String) -> ScramClient {
        let first_bare = format!("n={},r={nonce}", escape(user));
        ScramClient { mechanism, password: password.to_string(), first_bare, nonce, server_signature: None }
    }

    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// The final message, answering the server's first.
    pub fn last(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let server_first = text(server_first)?;
        if let Some(error) = attribute(server_first, 'e') {
            return fail(format!("the server refused: {error}"));
        }
        let nonce = attribute(server_first, 'r').ok_or_else(|| ScramError("no nonce from the server".into()))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return fail("the server's nonce does not extend the client's");
        }
        let salt = attribute(server_first, 's').and_then(|s| B64.decode(s).ok());
        let salt = salt.ok_or_else(|| ScramError("no salt from the server".into()))?;
        let iterations: u32 = attribute(server_first, 'i').and_then(|i| i.parse().ok()).unwrap_or(0);
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return fail(format!("the server asks for {iterations} iterations"));
        }
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let m = self.mechanism;
        let salted = m.salted_password(&self.password, &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let signature = m.hmac(&m.hash(&client_key), auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        self.server_signature = Some(m.hmac(&m.hmac(&salted, b"Server Key"), auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server's final message: it proves the server knew the credential.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let server_final = text(server_final)?;
        if let Some(error) = attribute(server_final, 'e') {
            return fail(format!("the server refused: {error}"));
        }
        let got = attribute(server_final, 'v').and_then(|v| B64.decode(v).ok());
        match (&self.server_signature, got) {
            (Some(expected), Some(got)) if bool::from(expected.ct_eq(&got)) => Ok(()),
            _ => fail("the server's signature does not verify: it does not hold this user's credential"),
        }
    }
}

/// The server's side after the client's first message.
pub struct ScramServer {
    mechanism: Mechanism,
    user: String,
    /// None: an unknown user, carried through to the end with a decoy salt
    /// so that the exchange does not tell which users exist.
    credential: Option<Credential>,
    gs2_header: String,
    first_bare: String,
    server_first: String,
    nonce: String,
}

impl ScramServer {
    /// Reads the client's first message, looks its user up, and gives the
    /// server's first message. `decoy_key` makes an unknown user's salt
    /// stable (the same on every shard and connection).
    pub fn start(
        mechanism: Mechanism,
        client_first: &[u8],
        lookup: impl FnOnce(&str) -> Option<Credential>,
        decoy_key: &[u8],
    ) -> Result<(ScramServer, Vec<u8>), ScramError> {
        let client_first = text(client_first)?;
        let mut parts = client_first.splitn(3, ',');
        let (flag, authzid, first_bare) = (parts.next(), parts.next(), parts.next());
        let (Some(flag), Some(authzid), Some(first_bare)) = (flag, authzid, first_bare) else {
            return fail("a client-first message without its GS2 header");
        };
        if flag != "n" && flag != "y" {
            return fail("channel binding is not supported");
        }
        if first_bare.starts_with("m=") {
            return fail("mandatory extensions are not supported");
        }
        let name = attribute(first_bare, 'n').ok_or_else(|| ScramError("no user name".into()))?;
        let user = unescape(name)?;
        if let Some(authzid) = authzid.strip_prefix("a=") {
            if unescape(authzid)? != user {
                return fail("an authorization identity other than the user");
            }
        }
        if attribute(first_bare, 't').is_some() || first_bare.contains("tokenauth=true") {
            return fail("delegation tokens are not supported");
        }
        let client_nonce = attribute(first_bare, 'r').filter(|r| !r.is_empty());
        let client_nonce = client_nonce.ok_or_else(|| ScramError("no client nonce".into()))?;
        let credential = lookup(&user);
        let (salt, iterations) = match &credential {
            Some(c) => (c.salt.clone(), c.iterations),
            None => {
                let decoy = Credential::decoy(mechanism, &user, decoy_key);
                (decoy.salt, decoy.iterations)
            }
        };
        let nonce = format!("{client_nonce}{}", nonce());
        let server_first = format!("r={nonce},s={},i={iterations}", B64.encode(salt));
        let gs2_header = format!("{flag},{authzid},");
        let server = ScramServer {
            mechanism,
            user,
            credential,
            gs2_header,
            first_bare: first_bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok((server, server_first.into_bytes()))
    }

    /// The user the client claims to be.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Checks the client's proof; the server's final message when it holds.
    pub fn finish(self, client_final: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let client_final = text(client_final)?;
        let Some((without_proof, proof)) = client_final.rsplit_once(",p=") else {
            return fail("a client-final message without a proof");
        };
        if attribute(without_proof, 'c') != Some(B64.encode(&self.gs2_header).as_str()) {
            return fail("the channel binding does not repeat the GS2 header");
        }
        // RFC 5802 has the client repeat the whole nonce; librdkafka before
        // 2.x puts its own part in front once more, and Kafka accepts any nonce
        // that ends with the server's (which is fresh, so a replay still fails).
        if !attribute(without_proof, 'r').is_some_and(|r| r.ends_with(&self.nonce)) {
            return fail("the nonce is not this exchange's (a replay?)");
        }
        let Some(credential) = &self.credential else { return fail(format!("unknown user {:?}", self.user)) };
        let proof = B64.decode(proof).map_err(|_| ScramError("a proof that is not base64".into()))?;
        let m = self.mechanism;
        let auth_message = format!("{},{},{without_proof}", self.first_bare, self.server_first);
        let signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return fail(format!("user {:?}: a proof of the wrong length", self.user));
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !bool::from(m.hash(&client_key).ct_eq(&credential.stored_key)) {
            return fail(format!("user {:?}: wrong password", self.user));
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok((self.user, format!("v={}", B64.encode(server_signature)).into_bytes()))
    }
}

/// Bytes as base64 strings in JSON.
#[cfg(feature = "serde")]
mod base64_bytes {
    use super::B64;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        B64.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_from_a_salted_password_is_the_passwords() {
        for m in Mechanism::ALL {
            let salt = b"0123456789abcdef".to_vec();
            let salted = m.salted_password("pw", &salt, 4096);
            let made = Credential::from_salted(m, &salted, salt.clone(), 4096).unwrap();
            assert_eq!(made, Credential::derive(m, "pw", salt.clone(), 4096));
            assert!(made.matches(m, "pw") && !made.matches(m, "other"));
            assert!(Credential::from_salted(m, &salted[1..], salt.clone(), 4096).is_err());
            assert!(Credential::from_salted(m, &salted, salt, 1).is_err());
        }
    }

    fn exchange(m: Mechanism, stored: &Credential, user: &str, password: &str) -> Result<String, ScramError> {
        let mut client = ScramClient::new(m, user, password);
        let known = |name: &str| (name == "alice").then(|| stored.clone());
        let (server, server_first) = ScramServer::start(m, &client.first(), known, b"decoy")?;
        let client_final = client.last(&server_first)?;
        let (user, server_final) = server.finish(&client_final)?;
        client.verify(&server_final)?;
        Ok(user)
    }

    #[test]
    fn the_right_password_authenticates_and_the_server_proves_it_holds_the_credential() {
        for m in Mechanism::ALL {
            let stored = Credential::new(m, "s3cret", ITERATIONS_MIN).unwrap();
            assert_eq!(exchange(m, &stored, "alice", "s3cret").unwrap(), "alice");
            assert!(exchange(m, &stored, "alice", "guess").unwrap_err().0.contains("wrong password"));
            assert!(exchange(m, &stored, "bob", "s3cret").unwrap_err().0.contains("unknown user"));
            assert!(stored.matches(m, "s3cret") && !stored.matches(m, "guess"));
        }
    }

    #[test]
    fn a_known_and_an_unknown_user_look_alike_until_the_proof() {
        let m = Mechanism::ScramSha256;
        let stored = Credential::new(m, "pw", ITERATIONS_MIN).unwrap();
        let first = |user: &str| {
            let client = ScramClient::new(m, user, "pw");
            let (_, server_first) = ScramServer::start(m, &client.first(), |_| None::<Credential>, b"k").unwrap();
            String::from_utf8(server_first).unwrap()
        };
        let salt = |msg: String| attribute(&msg, 's').unwrap().to_string();
        assert_eq!(salt(first("nobody")), salt(first("nobody")), "a decoy salt is stable");
        assert_eq!(attribute(&first("nobody"), 'i'), Some(stored.iterations.to_string().as_str()));
    }

    #[test]
    fn a_recorded_final_message_fails_on_another_exchange() {
        let m = Mechanism::ScramSha512;
        let stored = Credential::new(m, "pw", ITERATIONS_MIN).unwrap();
        let lookup = |_: &str| Some(stored.clone());
        let mut client = ScramClient::new(m, "alice", "pw");
        let (server, server_first) = ScramServer::start(m, &client.first(), lookup, b"k").unwrap();
        let recorded = client.last(&server_first).unwrap();
        server.finish(&recorded).unwrap();
        // The attacker replays the client's messages on a new connection.
        let (server, _) = ScramServer::start(m, &client.first(), lookup, b"k").unwrap();
        assert!(server.finish(&recorded).unwrap_err().0.contains("replay"));
    }

    /// RFC 7677's example exchange, from the client's side.
    #[test]
    fn the_rfc_7677_example_exchange_gives_its_proof_and_verifies_its_signature() {
        let nonce = "rOprNGfwEbeRWgbNEkqO".to_string();
        let mut client = ScramClient::with_nonce(Mechanism::ScramSha256, "user", "pencil", nonce);
        assert_eq!(client.first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let last = String::from_utf8(client.last(server_first).unwrap()).unwrap();
        assert_eq!(
            last,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").unwrap();
        assert!(client.verify(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").is_err());
    }

    proptest::proptest! {
        /// Whatever a client sends, the server answers Ok or Err.
        #[test]
        fn no_client_message_makes_the_server_panic(
            first in proptest::collection::vec(proptest::num::u8::ANY, 0..160),
            last in proptest::collection::vec(proptest::num::u8::ANY, 0..160),
            prefix in proptest::sample::select(vec!["", "n,,n=alice,r=", "y,,n=a=2Cb,r=x", "n,a=alice,n=alice,r=q"]),
        ) {
            let m = Mechanism::ScramSha256;
            let stored = Credential::derive(m, "pw", vec![7; 16], ITERATIONS_MIN);
            let mut client_first = prefix.as_bytes().to_vec();
            client_first.extend_from_slice(&first);
            if let Ok((server, _)) = ScramServer::start(m, &client_first, |_| Some(stored.clone()), b"k") {
                let _ = server.finish(&last);
            }
            let mut client = ScramClient::new(m, "alice", "pw");
            let _ = client.last(&first);
            let _ = client.verify(&last);
        }
    }

    #[test]
    fn names_with_commas_and_equals_signs_round_trip() {
        let m = Mechanism::ScramSha256;
        let stored = Credential::new(m, "pw", ITERATIONS_MIN).unwrap();
        let client = ScramClient::new(m, "a=b,c", "pw");
        let (server, _) = ScramServer::start(m, &client.first(), |_| Some(stored.clone()), b"k").unwrap();
        assert_eq!(server.user(), "a=b,c");
        assert!(unescape("a=2").is_err());
    }
}
