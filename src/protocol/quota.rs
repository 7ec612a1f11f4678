//! Client quotas' entries: produce and fetch bytes per second and requests
//! per second, for a user (or every user) and a client id (or every client),
//! as Kafka's. The broker keeps and applies them; clients set and list them.

/// The limits of one entry; None: no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Limits {
    pub produce_bytes_per_sec: Option<u64>,
    pub fetch_bytes_per_sec: Option<u64>,
    pub requests_per_sec: Option<u64>,
}

/// Who an entry is for: a user (None: every user) and a client id (None: every client).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Entity {
    pub user: Option<String>,
    pub client_id: Option<String>,
}

/// An entry: who it is for and their limits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Entry {
    pub entity: Entity,
    pub limits: Limits,
}
