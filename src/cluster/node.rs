//! A cluster node's life: registered, it serves in the role each election
//! gives it, and starts over in a new role whenever the control plane says
//! the old one is lost, until it is told to stop. What serving means is the
//! node's [`Data`]: the broker's shards, or the simulator's model of them.
//!
//! A follower first cuts its logs back to where they leave the new leader's
//! history (`cut_for`, from the epoch starts leaders recorded); a leader
//! stores its epoch and records where its logs begin it before it takes a
//! write, so no node holds data of an epoch nobody can cut back to.

use super::control_plane::{ControlPlane, Elected};
use super::election::{cut_for, EpochStart, Leadership};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// Longest a follower waits for its new leader to record where its epoch began.
const EPOCH_START_WAIT: Duration = Duration::from_secs(30);
/// How often a follower looks for that record.
const EPOCH_START_POLL: Duration = Duration::from_millis(100);
/// Pause before another election after one failed.
const ELECT_AGAIN: Duration = Duration::from_secs(1);

/// The role a node's data serves in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Following `leader`, each shard's log first cut back to its `cuts` entry (None: kept whole).
    Follower {
        leader: Leadership,
        cuts: Vec<Option<u64>>,
    },
}

/// What ends the role a node serves in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Stop serving and leave (a signal).
    Stop(String),
    /// The control plane says the role is lost: serve in the next one.
    RoleLost(String),
}

/// A data error, as the data's own type.
pub type DataError = Box<dyn std::error::Error + Send + Sync>;

/// What a node serves with.
pub trait Data {
    /// Shards per node.
    fn shards(&self) -> usize;
    /// The newest epoch this node's logs hold data of (0: none).
    fn last_epoch(&self) -> Result<u64, DataError>;
    /// Starts serving `epoch` in `role`: where each shard's log ends then.
    fn start(&mut self, epoch: u64, role: Role) -> Result<Vec<u64>, DataError>;
    /// Notes that the logs hold data of `epoch` from now on.
    fn store_epoch(&mut self, epoch: u64) -> Result<(), DataError>;
    /// The role serves now (a leader's epoch start is recorded).
    fn serving(&mut self);
    /// Stops serving.
    fn stop(&mut self);
}

/// Why a node stopped other than when told to.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Data(DataError),
    #[error("nothing can tell this node to stop any more (its signal thread and control plane are gone)")]
    Orphaned,
}

/// What a wake means for the node's life.
fn after(woken: Option<Wake>) -> Option<Result<(), NodeError>> {
    match woken {
        Some(Wake::RoleLost(why)) => {
            tracing::warn!(%why, "restarting in the role the next election gives");
            None
        }
        Some(Wake::Stop(why)) => {
            tracing::info!(%why, "stopping");
            Some(Ok(()))
        }
        None => Some(Err(NodeError::Orphaned)),
    }
}

/// Waits `limit` for a wake: what it means, if one came.
async fn pause(wakes: &mut UnboundedReceiver<Wake>, limit: Duration) -> Option<Option<Result<(), NodeError>>> {
    tokio::time::timeout(limit, wakes.recv()).await.ok().map(after)
}

/// Serves in one role after another until `wakes` says stop. A store that
/// does not answer only delays a role; only the data failing stops the node.
pub async fn serve(
    control: &ControlPlane,
    node: &str,
    data: &mut impl Data,
    wakes: &mut UnboundedReceiver<Wake>,
) -> Result<(), NodeError> {
    'roles: loop {
        let elected = match control.elect().await {
            Ok(elected) => elected,
            Err(error) => {
                // No member of the in-sync set leads yet (or the store is away): try again until told to stop.
                tracing::warn!(%error, "no role yet; trying again");
                if let Some(Some(end)) = pause(wakes, ELECT_AGAIN).await {
                    return end;
                }
                continue;
            }
        };
        let (epoch, role) = match elected {
            Elected::Leader { epoch } => (epoch, Role::Leader),
            Elected::Follower(leader) => match follower_cuts(control, data, leader.epoch).await? {
                Some(cuts) => (leader.epoch, Role::Follower { leader, cuts }),
                None => {
                    tracing::warn!(
                        epoch = leader.epoch,
                        "the leader did not record where its epoch began; electing again"
                    );
                    continue;
                }
            },
        };
        let leads = role == Role::Leader;
        // The epoch before this one in a leader's logs' history: unknown
        // (None) when the node already stored this epoch, leading it before
        // a record that did not reach the store.
        let last = data.last_epoch().map_err(NodeError::Data)?;
        let previous = Some(last).filter(|&last| leads && last < epoch);
        let log_ends = data.start(epoch, role).map_err(NodeError::Data)?;
        if let Err(error) = data.store_epoch(epoch) {
            data.stop();
            return Err(NodeError::Data(error));
        }
        if leads {
            // The control plane lets the shards take writes only once this is recorded.
            let start = EpochStart { leader: node.to_string(), starts: log_ends, previous };
            while let Err(error) = control.record_start(epoch, start.clone()).await {
                tracing::warn!(%error, epoch, "recording where this epoch begins failed; trying again");
                if let Some(next) = pause(wakes, ELECT_AGAIN).await {
                    data.stop();
                    match next {
                        Some(end) => return end,
                        None => continue 'roles,
                    }
                }
            }
        }
        data.serving();
        let woken = wakes.recv().await;
        data.stop();
        if let Some(end) = after(woken) {
            return end;
        }
    }
}

/// Where each shard's log must be cut before this node follows `epoch`;
/// None if its leader did not record where it began in time.
async fn follower_cuts(
    control: &ControlPlane,
    data: &impl Data,
    epoch: u64,
) -> Result<Option<Vec<Option<u64>>>, NodeError> {
    let deadline = tokio::time::Instant::now() + EPOCH_START_WAIT;
    let starts = loop {
        match control.epoch_starts().await {
            Ok(starts) if starts.contains_key(&epoch) => break starts,
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "reading the epoch starts failed; trying again"),
        }
        if tokio::time::Instant::now() > deadline {
            return Ok(None);
        }
        tokio::time::sleep(EPOCH_START_POLL).await;
    };
    let last = data.last_epoch().map_err(NodeError::Data)?;
    let cuts: Vec<Option<u64>> = (0..data.shards()).map(|k| cut_for(&starts, last, epoch, k)).collect();
    if last > 0 && cuts.iter().any(Option::is_some) {
        tracing::warn!(
            last,
            epoch,
            ?cuts,
            "this node's logs hold data the new leader's history does not: cutting them back"
        );
    }
    Ok(Some(cuts))
}
