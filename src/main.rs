//! The `ringmq` command: the broker (`serve`) and client commands for topics,
//! producing and consuming.

mod cli;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use cli::settings::Settings;
use ringmq::client::{
    Client, ClientConfig, ClientError, Consumer, GroupConfig, Message, Producer, ProducerConfig, SaslLogin, StartFrom,
    StartNew,
};
use ringmq::cluster::node::Role;
use ringmq::security::sasl::SaslMechanism;
use ringmq::security::tls::{ClientFiles, ClientTls, ServerTls};
use ringmq::server::{self, ServerConfig};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// ringmq: a durable thread-per-core message broker.
#[derive(Parser)]
#[command(name = "ringmq", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker: one shard per core, shard N on the listen port + N.
    Serve(Box<Settings>),
    /// Create, list, describe or delete topics.
    Topic {
        #[command(subcommand)]
        action: cli::topics::TopicAction,
    },
    /// Send lines from stdin as messages, one per line.
    Produce(ProduceArgs),
    /// Print messages of a topic, one value per line (or JSON).
    Consume(ConsumeArgs),
    /// Check that this host can run the broker (with --admin, the running broker's tiered storage too); each failure names its fix.
    Doctor(cli::doctor::DoctorArgs),
    /// Look messages up by id or by key (every shard is asked).
    Message {
        #[command(subcommand)]
        action: MessageAction,
    },
    /// List consumer groups; describe one: members, committed offsets, queue ends and lag.
    Group {
        #[command(subcommand)]
        action: cli::groups::GroupAction,
    },
    /// A live view of a broker's topics (rates, stored messages, lag) and append latency, refreshed each second (its admin listener).
    Top(cli::top::TopArgs),
    /// A message's timeline: sent, stored, delivered, committed, retried, dead-lettered (topics the broker traces).
    Trace(cli::trace::TraceArgs),
    /// Inspect a consumer group's dead letters and send them back to their topics.
    Dlq {
        #[command(subcommand)]
        action: DlqAction,
    },
    /// Create, list and delete the users the broker authenticates, or set their passwords.
    User {
        #[command(subcommand)]
        action: cli::users::UserAction,
    },
    /// Add, remove and list the rules that allow or deny principals operations on resources.
    Acl {
        #[command(subcommand)]
        action: cli::acls::AclAction,
    },
    /// Set and list client quotas: bytes per second produced and fetched, requests per second.
    Quota {
        #[command(subcommand)]
        action: cli::quotas::QuotaAction,
    },
    /// Tiered storage's bucket: check that the broker can use it.
    Tiered {
        #[command(subcommand)]
        action: cli::tiered::TieredAction,
    },
    /// The cluster as its etcd sees it.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Every registered node (group, name, advertised address, lease), then
    /// every broker group (leader, epoch, in-sync set) and each follower's lag (bytes, ms since its last fetch).
    Status {
        /// The cluster's etcd (etcd://host:port[,host:port]).
        #[arg(long)]
        cluster: String,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// A planned switch of a broker group's leader to another in-sync member;
    /// waits until it leads, then prints the group's leader and epoch.
    TransferLeader {
        /// The cluster's etcd (etcd://host:port[,host:port]).
        #[arg(long)]
        cluster: String,
        /// The broker group whose leader is switched.
        #[arg(long)]
        broker_group: String,
        /// The node to lead (default: another registered member of the in-sync set).
        #[arg(long)]
        to: Option<String>,
        /// Longest wait for it to lead, ms.
        #[arg(long, default_value_t = 30_000)]
        wait_ms: u64,
    },
    /// Moves a topic's queue to another broker group while clients go on
    /// (copied, frozen for a moment, switched), and waits for the switch;
    /// or, with --cancel, stops its move before the switch.
    Move {
        /// The cluster's etcd (etcd://host:port[,host:port]).
        #[arg(long)]
        cluster: String,
        #[arg(long)]
        topic: String,
        #[arg(long)]
        queue: u32,
        /// The broker group it moves to.
        #[arg(long, required_unless_present = "cancel")]
        to: Option<String>,
        /// Its shard there (default: the one holding the fewest queues).
        #[arg(long)]
        shard: Option<u32>,
        /// Cancel the queue's move instead.
        #[arg(long)]
        cancel: bool,
        /// Longest wait for the switch, ms (the move goes on past it).
        #[arg(long, default_value_t = 600_000)]
        wait_ms: u64,
    },
    /// Evens out the broker groups: a plan that moves queues from the most
    /// loaded group to the least (stored bytes and recent produce bytes/s,
    /// as the leaders report them) until each is within 10% of the mean;
    /// prints it, then carries it out unless --dry-run.
    Rebalance {
        /// The cluster's etcd (etcd://host:port[,host:port]).
        #[arg(long)]
        cluster: String,
        /// Print the plan only.
        #[arg(long)]
        dry_run: bool,
        /// Queues moving at once.
        #[arg(long, default_value_t = 4)]
        in_flight: usize,
        /// Longest wait for one round of moves to switch, ms.
        #[arg(long, default_value_t = 600_000)]
        wait_ms: u64,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Every queue moving now: topic, queue, from, to, frozen.
    Moves {
        /// The cluster's etcd (etcd://host:port[,host:port]).
        #[arg(long)]
        cluster: String,
    },
    /// Moves every queue off a broker group (to the emptiest shards of the
    /// others), a few at a time, until it holds none.
    Drain {
        /// The cluster's etcd (etcd://host:port[,host:port]).
        #[arg(long)]
        cluster: String,
        #[arg(long)]
        broker_group: String,
        /// Queues moving at once.
        #[arg(long, default_value_t = 4)]
        in_flight: usize,
        /// Longest wait for one round of moves to switch, ms.
        #[arg(long, default_value_t = 600_000)]
        wait_ms: u64,
    },
}

#[derive(Subcommand)]
enum MessageAction {
    /// The message with this id, as JSON with its topic, queue, offset and timestamp.
    Get {
        /// 32 hex digits, as producers report and consumers print it.
        #[arg(long)]
        id: String,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// The messages of a topic with this key, one JSON object per line.
    Find {
        #[arg(long)]
        topic: String,
        #[arg(long)]
        key: String,
        #[command(flatten)]
        broker: BrokerArg,
    },
}

#[derive(Subcommand)]
enum DlqAction {
    /// One line per dead letter: offset, message id, origin topic, tries, tag, value.
    List {
        #[arg(long)]
        group: String,
        /// First offset to list.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Most dead letters to list.
        #[arg(long, default_value_t = 100)]
        max: usize,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// One dead letter as JSON, with its headers.
    Show {
        #[arg(long)]
        group: String,
        #[arg(long)]
        offset: u64,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Send dead letters back to the topic they were first produced to (same message id).
    Redrive {
        #[arg(long)]
        group: String,
        /// The dead letter to redrive.
        #[arg(long, conflicts_with = "all", required_unless_present = "all")]
        offset: Option<u64>,
        /// Every dead letter of the group.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        broker: BrokerArg,
    },
}

#[derive(Args, Clone)]
struct BrokerArg {
    /// Any shard's address.
    #[arg(long, default_value = "127.0.0.1:9292")]
    broker: String,
    /// Connect with TLS.
    #[arg(long)]
    tls: bool,
    /// The CA (PEM) that signs the broker's certificate (implies --tls) [default: the system's roots]
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// A client certificate to present, PEM (implies --tls)
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Log in as this user (SASL); the password is the first line of --password-file, or $RINGMQ_PASSWORD
    #[arg(long)]
    user: Option<String>,
    #[arg(long, requires = "user")]
    password_file: Option<PathBuf>,
    /// SCRAM-SHA-256, SCRAM-SHA-512, or PLAIN (only over TLS)
    #[arg(long, default_value = "SCRAM-SHA-256", requires = "user")]
    sasl_mechanism: String,
}

impl BrokerArg {
    /// The client's settings: the broker and its TLS.
    fn client_config(&self) -> Result<ClientConfig, String> {
        let mut config = ClientConfig::new(&self.broker);
        if self.tls || self.tls_ca.is_some() || self.tls_cert.is_some() {
            let files = ClientFiles { ca: self.tls_ca.clone(), cert: self.tls_cert.clone(), key: self.tls_key.clone() };
            config.tls = Some(ClientTls::load(&files).map_err(|e| format!("TLS: {e}"))?);
        }
        if let Some(user) = &self.user {
            let mechanism = SaslMechanism::from_name(&self.sasl_mechanism).ok_or_else(|| {
                format!("--sasl-mechanism {:?}: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", self.sasl_mechanism)
            })?;
            config.sasl = Some(SaslLogin::new(mechanism, user, self.password()?));
        }
        Ok(config)
    }

    /// The login password: the first line of --password-file, else $RINGMQ_PASSWORD.
    fn password(&self) -> Result<String, String> {
        read_password(self.password_file.as_deref())
    }
}

/// A user's password: the first line of `file`, or $RINGMQ_PASSWORD.
fn read_password(file: Option<&std::path::Path>) -> Result<String, String> {
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            Ok(text.lines().next().unwrap_or_default().to_string())
        }
        None => std::env::var("RINGMQ_PASSWORD")
            .map_err(|_| "--user needs a password: --password-file FILE or RINGMQ_PASSWORD".to_string()),
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    /// Wait for each message to be durable.
    Sync,
    /// Batch and pipeline; wait for all at the end.
    Async,
    /// No acknowledgement.
    Oneway,
}

#[derive(Args)]
struct ProduceArgs {
    topic: String,
    /// Key of every message (messages with a key go to the queue its hash picks).
    #[arg(long)]
    key: Option<String>,
    /// Tag of every message.
    #[arg(long)]
    tag: Option<String>,
    /// Header name=value, repeatable.
    #[arg(long = "header", value_parser = cli::name_value)]
    headers: Vec<(String, String)>,
    /// Send one tombstone (a message with no value) for --key instead of
    /// reading lines: on a compacted topic it deletes the key.
    #[arg(long, requires = "key")]
    tombstone: bool,
    #[arg(long, value_enum, default_value_t = Mode::Sync)]
    mode: Mode,
    #[command(flatten)]
    broker: BrokerArg,
}

#[derive(Args)]
struct ConsumeArgs {
    topic: String,
    /// earliest, latest, committed, or an offset.
    #[arg(long, default_value = "earliest")]
    from: String,
    /// Consumer group: start from and commit its offsets.
    #[arg(long)]
    group: Option<String>,
    /// Join the group as a member (its queues come from rebalancing; a new
    /// group starts as --from says, earliest or latest) instead of reading
    /// every queue.
    #[arg(long, requires = "group")]
    subscribe: bool,
    /// Only messages whose tag matches: `*` or tags joined by `||` (the broker filters).
    #[arg(long, default_value = "*")]
    tags: String,
    /// Stop after this many messages.
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this many milliseconds without a message.
    #[arg(long)]
    idle_exit_ms: Option<u64>,
    /// Read on past batches the broker finds damaged (CorruptData) instead of
    /// stopping at them; each skip is logged and the total printed at the end.
    #[arg(long)]
    skip_corrupt: bool,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[command(flatten)]
    broker: BrokerArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// The value, one per line.
    Text,
    /// One JSON object per line.
    Json,
}

fn main() -> ExitCode {
    server::prepare_process();
    let matches = Cli::command().get_matches_from(cli::renamed::flags(std::env::args_os()));
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Whether a serve setting was given as a flag (it then wins over --config).
    let serve_matches = matches
        .subcommand_matches("serve")
        .or_else(|| matches.subcommand_matches("tiered").and_then(|t| t.subcommand_matches("check")));
    let on_command_line = |id: &str| serve_matches.and_then(|m| m.value_source(id)) == Some(ValueSource::CommandLine);
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let result = match cli.command {
        Command::Serve(a) => a.merge(on_command_line).map_err(|e| e.to_string()).and_then(serve),
        Command::Topic { action } => cli::topics::run(action),
        Command::Produce(a) => produce(a),
        Command::Consume(a) => consume(a),
        Command::Doctor(a) => cli::doctor::run(a),
        Command::Message { action } => message(action),
        Command::Dlq { action } => dlq(action),
        Command::Cluster { action } => cluster(action),
        Command::User { action } => cli::users::run(action),
        Command::Acl { action } => cli::acls::run(action),
        Command::Quota { action } => cli::quotas::run(action),
        Command::Group { action } => cli::groups::run(action),
        Command::Trace(args) => cli::trace::run(args),
        Command::Top(args) => cli::top::run(args),
        Command::Tiered { action } => cli::tiered::run(action, on_command_line),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn serve(settings: Settings) -> Result<(), String> {
    let cluster = settings.cluster().map_err(|e| e.to_string())?;
    let cfg = settings.server_config().map_err(|e| e.to_string())?;
    let failed: Vec<_> = ringmq::doctor::run(&cfg.data_dir, &cfg.cores, cfg.connections_max, disk_needs(&cfg))
        .into_iter()
        .filter(|c| c.failed())
        .collect();
    if !failed.is_empty() {
        let lines: Vec<String> = failed.iter().map(|c| format!("  {}: {}", c.name, c.detail)).collect();
        return Err(format!("this host cannot run the broker (see `ringmq doctor`):\n{}", lines.join("\n")));
    }
    match cluster {
        None => serve_single(cfg),
        Some(c) => serve_in_cluster(cfg, c, settings.replication()),
    }
}

/// A single node: serves until a signal.
fn serve_single(cfg: ServerConfig) -> Result<(), String> {
    let cfg_tls = cfg.tls.clone();
    let server = server::start(cfg).map_err(|e| e.to_string())?;
    // Installed once serving: until then a signal ends the process at once
    // (start-up writes nothing a crash would not also leave).
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(|e| format!("installing signal handlers: {e}"))?;
    let addrs: Vec<String> = server.addrs.iter().map(|a| a.to_string()).collect();
    println!("ringmq listening on {} (shards: {})", addrs[0], addrs.join(" "));
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let signal = signals.forever().find(|&signal| signal != SIGHUP || !reload_tls(&cfg_tls));
    eprintln!("ringmq: shutting down (signal {})", signal.unwrap_or_default());
    server.stop();
    Ok(())
}

/// SIGHUP: the TLS files read again (new connections use them, those up
/// keep theirs); true, so the broker serves on either way.
fn reload_tls(tls: &Option<ServerTls>) -> bool {
    match tls {
        None => eprintln!("ringmq: SIGHUP: no TLS to reload"),
        Some(tls) => match tls.reload() {
            Ok(()) => eprintln!("ringmq: SIGHUP: TLS certificate and key reloaded"),
            Err(e) => eprintln!("ringmq: SIGHUP: TLS not reloaded, the files in use stay: {e}"),
        },
    }
    true
}

/// Why a cluster node's server stops.
/// A cluster node's shards, started in each role `ringmq::cluster::node::serve` gives them.
struct BrokerData {
    cfg: ServerConfig,
    /// What every role shares (group, node, replication, links); `lead` and `epoch` change.
    base: server::ClusterRole,
    server: Option<server::Server>,
    /// The role the shards serve in, as the listening line names it.
    role: String,
}

impl ringmq::cluster::node::Data for BrokerData {
    fn shards(&self) -> usize {
        self.cfg.cores.len()
    }

    fn last_epoch(&self) -> Result<u64, ringmq::cluster::node::DataError> {
        Ok(ringmq::cluster::local_epoch::load(&self.cfg.data_dir)?)
    }

    fn start(&mut self, epoch: u64, role: Role) -> Result<Vec<u64>, ringmq::cluster::node::DataError> {
        let (lead, named) = match role {
            Role::Leader => (server::Lead::Leader, "leader".to_string()),
            Role::Follower { leader, cuts } => {
                let addr = leader
                    .advertise
                    .parse()
                    .map_err(|e| format!("the leader's address {:?}: {e}", leader.advertise))?;
                let named = format!("follower of {}", leader.node);
                (server::Lead::Follower { leader: leader.node, addr, cuts }, named)
            }
        };
        let mut cfg = self.cfg.clone();
        cfg.cluster = Some(server::ClusterRole { epoch, lead, ..self.base.clone() });
        let server = server::start(cfg)?;
        let log_ends = server.log_ends.clone();
        self.server = Some(server);
        self.role = format!("{named} in epoch {epoch}");
        Ok(log_ends)
    }

    fn serving(&mut self) {
        let Some(server) = &self.server else { return };
        let addrs: Vec<String> = server.addrs.iter().map(|a| a.to_string()).collect();
        // Whoever started the node may have stopped reading (a closed pipe is no reason to stop).
        let mut out = std::io::stdout();
        let _ = writeln!(out, "ringmq listening on {} (shards: {}) as {}", addrs[0], addrs.join(" "), self.role);
        let _ = out.flush();
    }

    fn store_epoch(&mut self, epoch: u64) -> Result<(), ringmq::cluster::node::DataError> {
        Ok(ringmq::cluster::local_epoch::store(&self.cfg.data_dir, epoch)?)
    }

    fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}

/// A cluster node: registers, then serves in the role each election gives
/// it, starting over in a new role whenever the control plane says the old
/// one is lost, until a signal.
fn serve_in_cluster(
    cfg: ServerConfig,
    mut c: ringmq::cluster::ClusterConfig,
    replication: server::ReplicationConfig,
) -> Result<(), String> {
    use ringmq::cluster::node::Wake;
    if cfg.listen.port() == 0 {
        return Err("cluster mode needs a fixed --listen port: followers reach shard k at its port + k".into());
    }
    if c.advertise.is_empty() {
        if cfg.listen.ip().is_unspecified() {
            return Err(format!("--listen {} is every address: name the one peers reach with --advertise", cfg.listen));
        }
        c.advertise = cfg.listen.to_string();
    }
    let (wake, mut woken) = tokio::sync::mpsc::unbounded_channel();
    let lost = wake.clone();
    let on_lost: ringmq::cluster::OnLost = Box::new(move |why| {
        let _ = lost.send(Wake::RoleLost(why));
    });
    let (group, node) = (c.broker_group.clone(), c.node.clone());
    c.shards = cfg.cores.len();
    let control = ringmq::cluster::ControlPlane::start(c, on_lost).map_err(|e| e.to_string())?;
    let isr = control.isr_link();
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(|e| format!("installing signal handlers: {e}"))?;
    let tls = cfg.tls.clone();
    std::thread::Builder::new()
        .name("ringmq-signals".into())
        .spawn(move || {
            for signal in signals.forever().filter(|&signal| signal != SIGHUP || !reload_tls(&tls)) {
                let _ = wake.send(Wake::Stop(format!("signal {signal}")));
            }
        })
        .map_err(|e| format!("starting the signal thread: {e}"))?;
    let base = server::ClusterRole {
        broker_group: group,
        node: node.clone(),
        epoch: 0,
        replication,
        lead: server::Lead::Leader,
        isr,
        placement: control.placement_link(),
        accounts: control.accounts_link(),
    };
    let mut data = BrokerData { cfg, base, server: None, role: String::new() };
    // The node's life is a few awaits on the control plane: a runtime of its own on this thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("starting the node's runtime: {e}"))?;
    let result = runtime.block_on(ringmq::cluster::node::serve(&control, &node, &mut data, &mut woken));
    control.stop();
    result.map_err(|e| e.to_string())
}

fn cluster(action: ClusterAction) -> Result<(), String> {
    let (cluster, format) = match action {
        ClusterAction::Status { cluster, format } => (cluster, format),
        ClusterAction::TransferLeader { cluster, broker_group: group, to, wait_ms } => {
            let endpoints = ringmq::cluster::parse_endpoints(&cluster).map_err(|e| e.to_string())?;
            let wait = Duration::from_millis(wait_ms);
            let leader =
                ringmq::cluster::transfer_leader(&endpoints, &group, to.as_deref(), wait).map_err(|e| e.to_string())?;
            println!("broker_group={group} leader={} epoch={}", leader.node, leader.epoch);
            return Ok(());
        }
        ClusterAction::Move { cluster, topic, queue, to, shard, cancel, wait_ms } => {
            let endpoints = ringmq::cluster::parse_endpoints(&cluster).map_err(|e| e.to_string())?;
            if cancel {
                ringmq::cluster::cancel_move(&endpoints, &topic, queue).map_err(|e| e.to_string())?;
                println!("topic={topic} queue={queue} move=cancelled");
                return Ok(());
            }
            let to = to.expect("clap requires --to without --cancel");
            let wait = Duration::from_millis(wait_ms);
            let at =
                ringmq::cluster::move_queue(&endpoints, &topic, queue, &to, shard, wait).map_err(|e| e.to_string())?;
            println!("topic={topic} queue={queue} broker_group={} shard={}", at.broker_group, at.shard);
            return Ok(());
        }
        ClusterAction::Rebalance { cluster, dry_run, in_flight, wait_ms, format } => {
            let endpoints = ringmq::cluster::parse_endpoints(&cluster).map_err(|e| e.to_string())?;
            let wait = Duration::from_millis(wait_ms);
            let plan = ringmq::cluster::rebalance(&endpoints, dry_run, in_flight, wait).map_err(|e| e.to_string())?;
            match format {
                Format::Json => println!("{}", serde_json::to_string(&plan).expect("a plan serializes")),
                Format::Text => print_plan(&plan, dry_run),
            }
            return Ok(());
        }
        ClusterAction::Moves { cluster } => {
            let endpoints = ringmq::cluster::parse_endpoints(&cluster).map_err(|e| e.to_string())?;
            for m in ringmq::cluster::list_moves(&endpoints).map_err(|e| e.to_string())? {
                println!("{}", show_move(&m));
            }
            return Ok(());
        }
        ClusterAction::Drain { cluster, broker_group, in_flight, wait_ms } => {
            let endpoints = ringmq::cluster::parse_endpoints(&cluster).map_err(|e| e.to_string())?;
            let wait = Duration::from_millis(wait_ms);
            let moved =
                ringmq::cluster::drain(&endpoints, &broker_group, in_flight, wait).map_err(|e| e.to_string())?;
            for m in &moved {
                println!("{}", show_move(m));
            }
            println!("broker_group={broker_group} queues_moved={}", moved.len());
            return Ok(());
        }
    };
    let endpoints = ringmq::cluster::parse_endpoints(&cluster).map_err(|e| e.to_string())?;
    let id = ringmq::cluster::read_cluster_id(&endpoints).map_err(|e| e.to_string())?;
    match format {
        Format::Text => println!("cluster_id={}", id.as_deref().unwrap_or("-")),
        Format::Json => println!("{}", serde_json::json!({ "cluster_id": id })),
    }
    let nodes = ringmq::cluster::list_nodes(&endpoints).map_err(|e| e.to_string())?;
    for n in &nodes {
        match format {
            Format::Text => {
                let preferred = if n.preferred_leader { " preferred_leader" } else { "" };
                println!(
                    "broker_group={} node={} advertise={} lease={:x}{preferred}",
                    n.broker_group, n.node, n.advertise, n.lease
                )
            }
            Format::Json => println!("{}", n.to_json()),
        }
    }
    if nodes.is_empty() {
        eprintln!("no node is registered");
    }
    for g in ringmq::cluster::list_groups(&endpoints).map_err(|e| e.to_string())? {
        match format {
            Format::Text => {
                let (leader, epoch) = g.leader.as_ref().map_or(("-", 0), |l| (l.node.as_str(), l.epoch));
                let isr = g.isr.as_ref().map(|i| i.members.iter().cloned().collect::<Vec<_>>().join(","));
                println!(
                    "broker_group={} leader={leader} epoch={epoch} isr={}",
                    g.broker_group,
                    isr.unwrap_or_default()
                );
                for (follower, lag) in &g.lags {
                    let (bytes, ms) = (lag.lag_bytes, lag.since_fetch_ms);
                    println!(
                        "broker_group={} follower={follower} lag_bytes={bytes} since_fetch_ms={ms}",
                        g.broker_group
                    );
                }
            }
            Format::Json => println!("{}", serde_json::to_string(&g).expect("a group serializes")),
        }
    }
    Ok(())
}

/// A rebalance plan: its moves, then each group before and after.
fn print_plan(plan: &ringmq::cluster::Plan, dry_run: bool) {
    for m in &plan.moves {
        println!("{}", show_move(m));
    }
    for (before, after) in plan.before.iter().zip(&plan.after) {
        println!(
            "broker_group={} queues={}->{} bytes={}->{} bytes_per_sec={:.0}->{:.0} load_of_mean={:.2}->{:.2}",
            before.broker_group,
            before.queues,
            after.queues,
            before.bytes,
            after.bytes,
            before.bytes_per_sec,
            after.bytes_per_sec,
            before.of_mean,
            after.of_mean
        );
    }
    let even = if plan.even() { "yes" } else { "no" };
    let done = if dry_run { "planned" } else { "moved" };
    println!("moves={} {done} within_{:.0}%_of_mean={even}", plan.moves.len(), ringmq::cluster::EVEN * 100.0);
}

/// One move as `cluster moves` and `cluster drain` print it.
fn show_move(m: &ringmq::cluster::QueueMove) -> String {
    format!(
        "topic={} queue={} from={}/{} to={}/{} frozen={}",
        m.topic, m.queue, m.from.broker_group, m.from.shard, m.to.broker_group, m.to.shard, m.frozen
    )
}

fn disk_needs(cfg: &ServerConfig) -> ringmq::doctor::DiskNeeds {
    ringmq::doctor::DiskNeeds {
        segment_bytes: cfg.segment_bytes,
        retention_bytes: cfg.retention_bytes,
        segment_pool_max: cfg.segment_pool_max as u64,
    }
}

pub(crate) fn connect(b: &BrokerArg) -> Result<std::sync::Arc<Client>, String> {
    Client::connect(b.client_config()?).map_err(|e| e.to_string())
}

fn produce(a: ProduceArgs) -> Result<(), String> {
    let client = connect(&a.broker)?;
    let selector = if a.key.is_some() { ringmq::client::QueueSelector::KeyHash } else { Default::default() };
    let producer = Producer::new(client, ProducerConfig { selector, ..Default::default() });
    if a.tombstone {
        let mut m = Message::new(Vec::new());
        (m.key, m.value) = (a.key.clone().map(String::into_bytes), None);
        let r = producer.send(&a.topic, &m).map_err(|e| e.to_string())?;
        eprintln!("sent a tombstone {} to queue {} offset {}", r.message_id, r.queue, r.offset);
        return Ok(());
    }
    let mut pending = Vec::new();
    let mut sent = 0u64;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let mut m = Message::new(line.into_bytes());
        m.key = a.key.clone().map(String::into_bytes);
        m.tag = a.tag.clone();
        m.headers = a.headers.iter().map(|(k, v)| (k.clone(), Some(v.clone().into_bytes()))).collect();
        match a.mode {
            Mode::Sync => {
                let r = producer.send(&a.topic, &m).map_err(|e| e.to_string())?;
                eprintln!("sent {} to queue {} offset {}", r.message_id, r.queue, r.offset);
            }
            Mode::Async => pending.push(producer.send_async(&a.topic, m)),
            Mode::Oneway => {
                producer.send_oneway(&a.topic, &m).map_err(|e| e.to_string())?;
            }
        }
        sent += 1;
    }
    for p in pending {
        p.wait().map_err(|e| e.to_string())?;
    }
    eprintln!("sent {sent} messages");
    Ok(())
}

fn consume(a: ConsumeArgs) -> Result<(), String> {
    let client = connect(&a.broker)?;
    let start = match a.from.as_str() {
        "earliest" => StartFrom::Earliest,
        "latest" => StartFrom::Latest,
        "committed" => StartFrom::Committed,
        n => StartFrom::Offset(
            n.parse().map_err(|_| format!("--from {n:?}: expected earliest, latest, committed or an offset"))?,
        ),
    };
    let mut consumer = match (&a.group, a.subscribe) {
        (Some(group), true) => {
            let start_new = if start == StartFrom::Latest { StartNew::Latest } else { StartNew::Earliest };
            let mut config =
                GroupConfig { start_new, client_id: "ringmq-cli".into(), ..GroupConfig::new(group, &[&a.topic]) };
            config.tags.insert(a.topic.clone(), a.tags.clone());
            Consumer::subscribe(client.clone(), config)
        }
        _ => {
            let mut consumer = Consumer::new(client.clone(), a.group.clone());
            consumer.filter_tags(&a.topic, &a.tags);
            consumer.assign_all(&a.topic, start).map_err(|e: ClientError| e.to_string())?;
            consumer
        }
    };
    consumer.set_skip_corrupt(a.skip_corrupt);
    let mut seen = 0u64;
    let mut last = Instant::now();
    // Next offset per queue of what was printed: only that is committed, so a
    // message fetched but not printed (past --count) is not skipped by the group.
    let mut printed: std::collections::BTreeMap<u32, u64> = Default::default();
    let mut out = std::io::stdout().lock();
    while a.count.is_none_or(|c| seen < c) {
        if a.idle_exit_ms.is_some_and(|ms| last.elapsed() >= Duration::from_millis(ms)) {
            break;
        }
        let messages = consumer.poll(Duration::from_millis(500)).map_err(|e| e.to_string())?;
        if !messages.is_empty() {
            last = Instant::now();
        }
        for m in messages.iter().take(a.count.map_or(usize::MAX, |c| (c - seen) as usize)) {
            match a.format {
                Format::Text => writeln!(out, "{}", String::from_utf8_lossy(m.value_or_empty())),
                Format::Json => writeln!(out, "{}", message_json(m, false)),
            }
            .map_err(|e| e.to_string())?;
            printed.insert(m.queue, m.offset + 1);
            seen += 1;
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    if consumer.skipped_corrupt() > 0 {
        eprintln!("ringmq: skipped {} damaged offsets (--skip-corrupt)", consumer.skipped_corrupt());
    }
    if a.group.is_some() {
        // As a member, or (without --subscribe) from outside the group, which
        // the broker takes while the group has no members.
        let positions: Vec<_> = printed.into_iter().map(|(q, next)| (a.topic.clone(), q, next)).collect();
        consumer.commit_offsets(&positions).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A message as one JSON object; `full` adds its topic, tries and headers.
fn message_json(m: &ringmq::client::ConsumedMessage, full: bool) -> String {
    // No key, or no value (a tombstone), is JSON's null.
    let text = |b: &Option<Vec<u8>>| b.as_deref().map(|b| String::from_utf8_lossy(b).into_owned());
    let full = full.then(|| FullJson {
        topic: &m.topic,
        origin_topic: m.origin_topic(),
        reconsume_times: m.reconsume_times(),
        headers: HeadersJson(&m.headers),
    });
    let json = MessageJson {
        queue: m.queue,
        offset: m.offset,
        id: m.message_id.to_string(),
        key: text(&m.key),
        tag: &m.tag,
        timestamp_ms: m.timestamp_ms,
        value: text(&m.value),
        full,
    };
    serde_json::to_string(&json).expect("a message serializes")
}

/// The fields of a message every JSON line has.
#[derive(serde::Serialize)]
struct MessageJson<'a> {
    queue: u32,
    offset: u64,
    id: String,
    key: Option<String>,
    tag: &'a str,
    timestamp_ms: i64,
    value: Option<String>,
    #[serde(flatten)]
    full: Option<FullJson<'a>>,
}

/// What `message get`, `message find` and `dlq show` add.
#[derive(serde::Serialize)]
struct FullJson<'a> {
    topic: &'a str,
    origin_topic: String,
    reconsume_times: u32,
    headers: HeadersJson<'a>,
}

/// Headers as an object, in their order (a repeated name repeats).
struct HeadersJson<'a>(&'a [(String, Option<Vec<u8>>)]);

impl serde::Serialize for HeadersJson<'_> {
    /// In order, a repeated name written again, a null value as null.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v.as_deref().map(String::from_utf8_lossy))))
    }
}

fn message(action: MessageAction) -> Result<(), String> {
    let (found, what) = match action {
        MessageAction::Get { id, broker } => {
            let id: ringmq::client::MessageId = id.parse().map_err(|e: ringmq::client::BadMessageId| e.to_string())?;
            (connect(&broker)?.find_by_id(id).map_err(|e| e.to_string())?, format!("message id {id}"))
        }
        MessageAction::Find { topic, key, broker } => {
            let client = connect(&broker)?;
            (client.find_by_key(&topic, key.as_bytes()).map_err(|e| e.to_string())?, format!("key {key:?} in {topic}"))
        }
    };
    for m in &found.messages {
        println!("{}", message_json(m, true));
    }
    match (found.messages.is_empty(), found.removed) {
        (true, 0) => Err(format!("no message with {what}: never stored, or removed by retention")),
        (true, n) => Err(format!("{n} message(s) with {what} were removed by retention")),
        (false, _) => Ok(()),
    }
}

fn dlq(action: DlqAction) -> Result<(), String> {
    let e = |e: ClientError| e.to_string();
    match action {
        DlqAction::List { group, from, max, broker } => {
            for m in ringmq::dlq::list(&connect(&broker)?, &group, from, max).map_err(e)? {
                println!(
                    "offset={} id={} origin={} tries={} tag={} value={}",
                    m.offset,
                    m.message_id,
                    m.origin_topic(),
                    m.reconsume_times(),
                    json_string(&m.tag),
                    json_string(&String::from_utf8_lossy(m.value_or_empty())),
                );
            }
        }
        DlqAction::Show { group, offset, broker } => {
            println!("{}", message_json(&ringmq::dlq::show(&connect(&broker)?, &group, offset).map_err(e)?, true));
        }
        // `--all` is what clap requires when no offset is given.
        DlqAction::Redrive { group, offset, all: _, broker } => {
            let client = connect(&broker)?;
            let letters = match offset {
                Some(o) => vec![ringmq::dlq::show(&client, &group, o).map_err(e)?],
                None => ringmq::dlq::list(&client, &group, 0, usize::MAX).map_err(e)?,
            };
            let origin: Vec<String> = letters.iter().map(|m| m.origin_topic()).collect();
            for ((offset, sent), topic) in ringmq::dlq::redrive(&client, &letters).map_err(e)?.into_iter().zip(origin) {
                println!(
                    "redrove offset={offset} id={} to {topic}/{} at offset {}",
                    sent.message_id, sent.queue, sent.offset
                );
            }
        }
    }
    Ok(())
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// --header (and --config, --set) take any text without panicking.
        #[test]
        fn no_header_text_makes_the_parser_panic(text in "\\PC{0,120}") {
            let _ = cli::name_value(&text);
        }
    }
}
