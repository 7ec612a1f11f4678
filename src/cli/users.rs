//! `ringmq user create|passwd|delete|list`: through a running broker
//! (logged in as a super user when it authenticates), or offline on a
//! stopped broker's data directory (`--data-dir`: how the first user is made).
//! A new password is read from stdin (its first line); the credentials are
//! derived here, so neither the broker nor its files ever hold it.

use crate::BrokerArg;
use clap::{Args, Subcommand};
use ringmq::security::scram::{Credential, Mechanism, ITERATIONS_MIN};
use ringmq::security::users::Users;
use ringmq::server::DataDirLock;
use std::io::BufRead;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum UserAction {
    /// Create a user; its password is the first line of stdin.
    Create {
        name: String,
        #[command(flatten)]
        credential: CredentialArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Set an existing user's password (the first line of stdin).
    Passwd {
        name: String,
        #[command(flatten)]
        credential: CredentialArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Delete a user.
    Delete {
        name: String,
        #[command(flatten)]
        target: Target,
    },
    /// One line per user: its name and mechanisms.
    List {
        #[command(flatten)]
        target: Target,
    },
}

#[derive(Args)]
pub struct CredentialArgs {
    /// SCRAM mechanisms to store a credential for
    #[arg(long, value_delimiter = ',', default_value = "SCRAM-SHA-256,SCRAM-SHA-512", value_parser = parse_mechanism)]
    mechanisms: Vec<Mechanism>,
    /// PBKDF2 iterations of each credential
    #[arg(long, default_value_t = ITERATIONS_MIN)]
    iterations: u32,
}

/// Where the users are: a running broker, or a stopped one's data directory.
#[derive(Args)]
pub struct Target {
    /// Edit the users file of a stopped broker's data directory instead of asking a running broker.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    broker: BrokerArg,
}

fn parse_mechanism(name: &str) -> Result<Mechanism, String> {
    Mechanism::from_name(name).ok_or_else(|| format!("{name:?}: SCRAM-SHA-256 or SCRAM-SHA-512"))
}

fn new_password() -> Result<String, String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(|e| format!("reading the password from stdin: {e}"))?;
    let password = line.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        return Err("give the new password as the first line of stdin".into());
    }
    Ok(password)
}

pub fn run(action: UserAction) -> Result<(), String> {
    match action {
        UserAction::Create { name, credential, target } => set(&name, &credential, &target, false),
        UserAction::Passwd { name, credential, target } => set(&name, &credential, &target, true),
        UserAction::Delete { name, target } => match &target.data_dir {
            Some(dir) => offline(dir, |users| users.without_user(&name)),
            None => crate::connect(&target.broker)?.delete_user(&name).map_err(|e| e.to_string()),
        },
        UserAction::List { target } => {
            let users: Vec<(String, Vec<Mechanism>)> = match &target.data_dir {
                Some(dir) => {
                    let users = Users::load(dir)?;
                    users.names().map(|n| (n.to_string(), users.mechanisms(n))).collect()
                }
                None => crate::connect(&target.broker)?.list_users().map_err(|e| e.to_string())?.0,
            };
            for (name, mechanisms) in users {
                let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
                println!("{name} {}", names.join(","));
            }
            Ok(())
        }
    }
}

fn set(name: &str, args: &CredentialArgs, target: &Target, existing: bool) -> Result<(), String> {
    let password = new_password()?;
    match &target.data_dir {
        Some(dir) => offline(dir, |users| {
            if existing && !users.contains(name) {
                return Err(format!("there is no user {name:?}; create it first"));
            }
            let credentials = args
                .mechanisms
                .iter()
                .map(|&m| Credential::new(m, &password, args.iterations).map(|c| (m, c)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.0)?;
            users.with_user(name, credentials)
        }),
        None => {
            let client = crate::connect(&target.broker)?;
            if existing && !client.list_users().map_err(|e| e.to_string())?.0.iter().any(|(u, _)| u == name) {
                return Err(format!("there is no user {name:?}; create it first"));
            }
            client.set_user(name, &password, &args.mechanisms, args.iterations).map_err(|e| e.to_string())
        }
    }
}

/// Changes the users file of a data directory no broker runs on.
fn offline(dir: &std::path::Path, change: impl FnOnce(&Users) -> Result<Users, String>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let _lock = DataDirLock::acquire(dir)?;
    let next = change(&Users::load(dir)?)?;
    next.store(dir).map_err(|e| format!("storing the users in {}: {e}", dir.display()))
}
