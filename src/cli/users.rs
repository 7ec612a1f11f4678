//! `ringmq user create|passwd|delete|list`: through a running broker
//! (logged in as a super user when it authenticates), straight in a
//! cluster's etcd (`--cluster`), or offline on a stopped broker's data
//! directory (`--data-dir`): how the first user is made. A new password is
//! read from stdin (its first line); the credentials are derived here, so
//! neither the broker nor its files ever hold it.

use crate::BrokerArg;
use clap::{Args, Subcommand};
use ringmq::protocol::security::AlterUser;
use ringmq::security::acl::Acls;
use ringmq::security::change::{AccountsChange, Changed};
use ringmq::security::quota::Quotas;
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

/// Where the users are: a running broker, a cluster's etcd, or a stopped broker's data directory.
#[derive(Args)]
pub struct Target {
    /// Edit the users file of a stopped broker's data directory instead of asking a running broker.
    #[arg(long, conflicts_with = "cluster")]
    data_dir: Option<PathBuf>,
    /// Edit a cluster's users in its etcd (etcd://host:port[,host:port]) instead of asking a broker.
    #[arg(long)]
    cluster: Option<String>,
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
        UserAction::Delete { name, target } => alter(&target, AlterUser::Delete { user: name }),
        UserAction::List { target } => {
            for (name, mechanisms) in list(&target)? {
                let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
                println!("{name} {}", names.join(","));
            }
            Ok(())
        }
    }
}

fn set(name: &str, args: &CredentialArgs, target: &Target, existing: bool) -> Result<(), String> {
    let password = new_password()?;
    if existing && !list(target)?.iter().any(|(user, _)| user == name) {
        return Err(format!("there is no user {name:?}; create it first"));
    }
    let credentials = args
        .mechanisms
        .iter()
        .map(|&m| Credential::new(m, &password, args.iterations).map(|c| (m, c)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.0)?;
    alter(target, AlterUser::Upsert { user: name.to_string(), credentials })
}

/// Makes the change where the target says.
fn alter(target: &Target, change: AlterUser) -> Result<(), String> {
    if let Some(dir) = &target.data_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let _lock = DataDirLock::acquire(dir).map_err(|e| e.to_string())?;
        let users = Users::load(dir).map_err(|e| e.to_string())?;
        let changed = AccountsChange::User(change)
            .apply(&users, &Acls::default(), &Quotas::default())
            .map_err(|e| e.to_string())?;
        let Changed::Users(next) = changed else { unreachable!("a user change changes the users") };
        return next.store(dir).map_err(|e| format!("storing the users in {}: {e}", dir.display()));
    }
    if let Some(url) = &target.cluster {
        let endpoints = ringmq::cluster::parse_endpoints(url).map_err(|e| e.to_string())?;
        return ringmq::cluster::change_accounts(&endpoints, &AccountsChange::User(change))
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    crate::connect(&target.broker)?.alter_user(&change).map_err(|e| e.to_string())
}

/// Every user and its mechanisms, where the target says.
fn list(target: &Target) -> Result<Vec<(String, Vec<Mechanism>)>, String> {
    let users = match (&target.data_dir, &target.cluster) {
        (Some(dir), _) => Users::load(dir).map_err(|e| e.to_string())?,
        (None, Some(url)) => {
            ringmq::cluster::cluster_users(&ringmq::cluster::parse_endpoints(url).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?
        }
        (None, None) => return Ok(crate::connect(&target.broker)?.list_users().map_err(|e| e.to_string())?.0),
    };
    Ok(users.names().map(|n| (n.to_string(), users.mechanisms(n))).collect())
}
