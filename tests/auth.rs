//! Authentication on the native protocol: SCRAM-SHA-256/512 logins against
//! users made offline (`ringmq user create --data-dir`) or through the broker;
//! wrong passwords, unknown users, a replayed SCRAM exchange and PLAIN in the
//! clear are refused; a client certificate stands in for a login; only super
//! users manage users; no file holds a password.

mod common;

use common::certs::{path, Ca};
use common::{Broker, Raw};
use ringmq::client::{Client, ClientConfig, ClientError, Message, Producer, ProducerConfig, SaslLogin};
use ringmq::protocol::{ApiKey, ErrorCode, Reader, Writer};
use ringmq::security::sasl::SaslMechanism;
use ringmq::security::scram::{Mechanism, ScramClient};
use ringmq::security::tls::{ClientFiles, ClientTls};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const SHA256: SaslMechanism = SaslMechanism::Scram(Mechanism::ScramSha256);
const SHA512: SaslMechanism = SaslMechanism::Scram(Mechanism::ScramSha512);

/// Runs `ringmq ARGS` with `stdin` (and `RINGMQ_PASSWORD` when given); its exit status and output.
fn ringmq(args: &[&str], stdin: &str, password: Option<&str>) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    command.args(args);
    if let Some(p) = password {
        command.env("RINGMQ_PASSWORD", p);
    }
    common::output_with_stdin(&mut command, stdin)
}

fn ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "ringmq failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A data directory with users admin and alice, made offline.
fn with_users(dir: &Path) -> String {
    common::create_user(&dir.join("data"), "admin", "admin-secret");
    common::create_user(&dir.join("data"), "alice", "alice-secret");
    path(&dir.join("data"))
}

fn login(addr: &str, login: Option<SaslLogin>, tls: Option<ClientTls>) -> Result<std::sync::Arc<Client>, ClientError> {
    let mut config = ClientConfig::new(addr);
    config.sasl = login;
    config.tls = tls;
    config.request_timeout = Duration::from_secs(20);
    Client::connect(config)
}

fn refused_login(err: ClientError) -> bool {
    matches!(err, ClientError::Authentication { code: ErrorCode::AuthenticationFailed, .. })
}

#[test]
fn scram_logins_succeed_and_wrong_passwords_unknown_users_and_anonymous_clients_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = with_users(dir.path());
    // alice is a super user here: authorization is tests/acl.rs's.
    let broker = Broker::start(Path::new(&data), &["--auth-required", "--super-users", "admin,alice"]);

    for mechanism in [SHA256, SHA512] {
        let alice = login(broker.addr(), Some(SaslLogin::new(mechanism, "alice", "alice-secret")), None)
            .unwrap_or_else(|e| panic!("alice logs in with {}: {e}", mechanism.name()));
        alice.create_topic(&format!("t-{}", mechanism.name()), 2, 0).unwrap();
        let producer = Producer::new(alice.clone(), ProducerConfig::default());
        producer.send(&format!("t-{}", mechanism.name()), &Message::new(b"hi".to_vec())).unwrap();
    }
    let wrong = login(broker.addr(), Some(SaslLogin::new(SHA256, "alice", "guess")), None).err().unwrap();
    assert!(refused_login(wrong.clone()), "a wrong password: {wrong}");
    let unknown = login(broker.addr(), Some(SaslLogin::new(SHA512, "mallory", "x")), None).err().unwrap();
    assert!(refused_login(unknown.clone()), "an unknown user: {unknown}");
    assert_eq!(
        wrong.to_string().replace("SCRAM-SHA-256", ""),
        unknown.to_string().replace("SCRAM-SHA-512", ""),
        "the same answer"
    );
    match login(broker.addr(), None, None).err().expect("an anonymous client is refused") {
        ClientError::Broker { code: ErrorCode::AuthenticationRequired, message } => {
            assert!(message.contains("SaslHandshake"), "says what to do: {message}")
        }
        other => panic!("anonymous: {other}"),
    }
    // ApiVersions needs no login.
    let mut raw = Raw::connect(broker.addr());
    assert_eq!(raw.call(ApiKey::ApiVersions as u16, 0, 1, &[]).1, ErrorCode::None);
    assert_eq!(raw.call(ApiKey::ListTopics as u16, 0, 2, &[]).1, ErrorCode::AuthenticationRequired);

    let stored = std::fs::read_to_string(Path::new(&data).join("users")).unwrap();
    assert!(!stored.contains("alice-secret") && !stored.contains("admin-secret"), "no password is stored");
    let again = ringmq(&["user", "create", "bob", "--data-dir", &data], "pw\n", None);
    assert!(!again.status.success(), "the running broker holds its data directory");
    assert!(String::from_utf8_lossy(&again.stderr).contains("holds"), "{}", String::from_utf8_lossy(&again.stderr));
}

fn sasl_call(raw: &mut Raw, api: ApiKey, corr: u32, body: impl FnOnce(&mut Writer)) -> (ErrorCode, Vec<u8>) {
    let mut w = Writer::default();
    body(&mut w);
    let (_, code, _, body) = raw.call(api as u16, 0, corr, &w.buf);
    (code, body)
}

fn token(body: &[u8]) -> Vec<u8> {
    Reader::new(body).bytes().unwrap().to_vec()
}

/// SASL's requests are answered as PROTOCOL.md says: an unknown version is
/// UnsupportedVersion, a SaslAuthenticate out of order is refused without
/// spoiling the handshake that may follow, and only a refused mechanism is
/// answered with the mechanisms offered.
#[test]
fn sasl_requests_check_their_version_and_an_early_authenticate_leaves_the_handshake_open() {
    let dir = tempfile::tempdir().unwrap();
    let data = with_users(dir.path());
    let broker = Broker::start(Path::new(&data), &[]);
    let mut raw = Raw::connect(broker.addr());
    let mut mechanism = Writer::default();
    mechanism.string("SCRAM-SHA-256");
    for version in [1, u16::MAX] {
        let (_, code, message, _) = raw.call(ApiKey::SaslHandshake as u16, version, 1, &mechanism.buf);
        assert_eq!(code, ErrorCode::UnsupportedVersion, "SaslHandshake v{version}: {message}");
        let (_, code, _, _) = raw.call(ApiKey::SaslAuthenticate as u16, version, 2, &[0, 0, 0, 0]);
        assert_eq!(code, ErrorCode::UnsupportedVersion, "SaslAuthenticate v{version}");
    }

    let (code, body) = sasl_call(&mut raw, ApiKey::SaslAuthenticate, 3, |w| {
        w.bytes(b"n,,n=alice,r=abc");
    });
    assert_eq!((code, body.len()), (ErrorCode::InvalidRequest, 0), "no handshake yet");
    let (code, body) = sasl_call(&mut raw, ApiKey::SaslHandshake, 4, |w| {
        w.string("NOT-A-MECHANISM");
    });
    assert_eq!(code, ErrorCode::UnsupportedSaslMechanism);
    let offered = Reader::new(&body).u32().unwrap();
    assert!(offered >= 2, "a refused mechanism is answered with those offered ({offered})");

    let (code, _) = sasl_call(&mut raw, ApiKey::SaslHandshake, 5, |w| {
        w.string("SCRAM-SHA-256");
    });
    assert_eq!(code, ErrorCode::None, "the handshake after a refused authenticate is served");
    let mut client = ScramClient::new(Mechanism::ScramSha256, "alice", "alice-secret");
    let (code, body) = sasl_call(&mut raw, ApiKey::SaslAuthenticate, 6, |w| {
        w.bytes(&client.first());
    });
    assert_eq!(code, ErrorCode::None);
    let last = client.last(&token(&body)).unwrap();
    let (code, _) = sasl_call(&mut raw, ApiKey::SaslAuthenticate, 7, |w| {
        w.bytes(&last);
    });
    assert_eq!(code, ErrorCode::None, "alice logs in");
    let (code, body) = sasl_call(&mut raw, ApiKey::SaslHandshake, 8, |w| {
        w.string("SCRAM-SHA-256");
    });
    assert_eq!((code, body.len()), (ErrorCode::InvalidRequest, 0), "already authenticated: no body");
    assert_eq!(raw.call(ApiKey::ListTopics as u16, 0, 9, &[]).1, ErrorCode::None, "the connection serves on");
}

#[test]
fn a_recorded_scram_exchange_replayed_on_a_new_connection_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = with_users(dir.path());
    let broker = Broker::start(Path::new(&data), &["--auth-required"]);
    let handshake = |raw: &mut Raw| {
        sasl_call(raw, ApiKey::SaslHandshake, 1, |w| {
            w.string("SCRAM-SHA-256");
        })
    };

    let mut raw = Raw::connect(broker.addr());
    assert_eq!(handshake(&mut raw).0, ErrorCode::None);
    let mut client = ScramClient::new(Mechanism::ScramSha256, "alice", "alice-secret");
    let first = client.first();
    let (code, body) = sasl_call(&mut raw, ApiKey::SaslAuthenticate, 2, |w| {
        w.bytes(&first);
    });
    assert_eq!(code, ErrorCode::None);
    let recorded = client.last(&token(&body)).unwrap();
    let (code, body) = sasl_call(&mut raw, ApiKey::SaslAuthenticate, 3, |w| {
        w.bytes(&recorded);
    });
    assert_eq!(code, ErrorCode::None, "the genuine exchange authenticates");
    client.verify(&token(&body)).expect("the broker proves it holds alice's credential");
    assert_eq!(raw.call(ApiKey::ListTopics as u16, 0, 4, &[]).1, ErrorCode::None);

    let mut replay = Raw::connect(broker.addr());
    assert_eq!(handshake(&mut replay).0, ErrorCode::None);
    assert_eq!(
        sasl_call(&mut replay, ApiKey::SaslAuthenticate, 2, |w| {
            w.bytes(&first);
        })
        .0,
        ErrorCode::None
    );
    let (code, _) = sasl_call(&mut replay, ApiKey::SaslAuthenticate, 3, |w| {
        w.bytes(&recorded);
    });
    assert_eq!(code, ErrorCode::AuthenticationFailed, "the recorded proof does not fit the new nonce");
    assert!(replay.is_closed(), "a failed login closes the connection");
}

#[test]
fn plain_is_refused_in_the_clear_and_logs_in_over_tls_and_a_client_certificate_stands_in_for_a_login() {
    let dir = tempfile::tempdir().unwrap();
    let data = with_users(dir.path());
    let ca = Ca::new(dir.path(), "ca");
    let cert = ca.issue("broker", "localhost", 10);
    let ca_arg = path(&ca.pem);
    let mut args = cert.serve_args();
    args.extend(["--auth-required", "--tls-ca", &ca_arg, "--tls-client-auth", "optional"].map(String::from));
    args.extend(["--super-users", "alice"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let tls_broker = Broker::start(Path::new(&data), &args);
    let plain_broker = Broker::start(&dir.path().join("plain"), &["--auth-required"]);
    let trust = |identity: Option<&common::certs::Issued>| {
        let files = ClientFiles {
            ca: Some(ca.pem.clone()),
            cert: identity.map(|i| i.cert.clone()),
            key: identity.map(|i| i.key.clone()),
        };
        ClientTls::load(&files).unwrap()
    };

    let plain = SaslLogin::new(SaslMechanism::Plain, "alice", "alice-secret");
    match login(plain_broker.addr(), Some(plain.clone()), None).err().expect("PLAIN in the clear is refused") {
        ClientError::Authentication { code: ErrorCode::UnsupportedSaslMechanism, reason, .. } => {
            assert!(reason.contains("TLS"), "says why: {reason}")
        }
        other => panic!("PLAIN in the clear: {other}"),
    }
    login(tls_broker.addr(), Some(plain), Some(trust(None))).expect("PLAIN over TLS logs alice in");
    let wrong = SaslLogin::new(SaslMechanism::Plain, "alice", "guess");
    assert!(refused_login(login(tls_broker.addr(), Some(wrong), Some(trust(None))).err().unwrap()));

    let alice = ca.issue("alice", "alice", 10);
    let by_certificate =
        login(tls_broker.addr(), None, Some(trust(Some(&alice)))).expect("the certificate logs alice in");
    by_certificate.create_topic("orders", 2, 0).unwrap();
    let anonymous = login(tls_broker.addr(), None, Some(trust(None))).err().expect("no certificate and no login");
    assert!(matches!(anonymous, ClientError::Broker { code: ErrorCode::AuthenticationRequired, .. }), "{anonymous}");
}

#[test]
fn super_users_manage_users_through_the_broker_and_others_may_not() {
    let dir = tempfile::tempdir().unwrap();
    let data = with_users(dir.path());
    let broker = Broker::start(Path::new(&data), &["--auth-required", "--super-users", "admin"]);
    let as_admin = ["--broker", broker.addr(), "--user", "admin"];
    let with = |extra: &[&str]| -> Vec<String> { extra.iter().chain(&as_admin).map(|s| s.to_string()).collect() };
    let run = |args: Vec<String>, stdin: &str, password: &str| {
        ringmq(&args.iter().map(String::as_str).collect::<Vec<_>>(), stdin, Some(password))
    };

    ok(run(with(&["user", "create", "bob", "--mechanisms", "SCRAM-SHA-512"]), "bob-1\n", "admin-secret"));
    assert!(ok(run(with(&["user", "list"]), "", "admin-secret")).contains("bob SCRAM-SHA-512"));
    login(broker.addr(), Some(SaslLogin::new(SHA512, "bob", "bob-1")), None).expect("bob logs in");
    ok(run(with(&["user", "passwd", "bob"]), "bob-2\n", "admin-secret"));
    assert!(refused_login(login(broker.addr(), Some(SaslLogin::new(SHA512, "bob", "bob-1")), None).err().unwrap()));
    login(broker.addr(), Some(SaslLogin::new(SHA512, "bob", "bob-2")), None).expect("bob's new password");
    let missing = run(with(&["user", "passwd", "carol"]), "x\n", "admin-secret");
    assert!(!missing.status.success(), "passwd of a user that does not exist");

    let as_alice: Vec<String> =
        ["user", "create", "eve", "--broker", broker.addr(), "--user", "alice"].map(String::from).to_vec();
    let denied = run(as_alice, "eve\n", "alice-secret");
    assert!(!denied.status.success(), "alice is no super user");
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("NotAuthorized"),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );

    ok(run(with(&["user", "delete", "bob"]), "", "admin-secret"));
    assert!(refused_login(login(broker.addr(), Some(SaslLogin::new(SHA512, "bob", "bob-2")), None).err().unwrap()));
    let wrong_admin = run(with(&["user", "list"]), "", "not-the-password");
    assert!(!wrong_admin.status.success(), "a wrong login is refused");
}
