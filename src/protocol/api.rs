//! API keys and error codes of the native protocol (docs/PROTOCOL.md).

/// A `u16` wire enum numbered 0, 1, 2... in declaration order, with `ALL`
/// (every variant in wire order), `from_wire` and `name`.
macro_rules! wire_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum $name {
            $($(#[$vmeta])* $variant = $value,)+
        }

        impl $name {
            /// Every variant, in wire order (the value is the index).
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The variant of a wire value, if there is one.
            pub fn from_wire(v: u16) -> Option<$name> {
                $name::ALL.get(usize::from(v)).copied()
            }

            /// The variant's name, as written here (metrics label values).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant),)+
                }
            }
        }
    };
}

wire_enum! {
    /// Requests the broker understands.
    pub enum ApiKey {
        ApiVersions = 0,
        Metadata = 1,
        CreateTopic = 2,
        DeleteTopic = 3,
        ListTopics = 4,
        Produce = 5,
        Fetch = 6,
        ListOffsets = 7,
        CommitOffset = 8,
        FetchOffset = 9,
        JoinGroup = 10,
        SyncGroup = 11,
        Heartbeat = 12,
        LeaveGroup = 13,
        SendBack = 14,
        AdvanceClock = 15,
        LockQueues = 16,
        UnlockQueues = 17,
        ProduceDelayed = 18,
        LookupMessages = 19,
        ProduceHalf = 20,
        EndTransaction = 21,
        PollChecks = 22,
        ProduceMany = 23,
        FetchMany = 24,
        ReplicaFetch = 25,
        SaslHandshake = 26,
        SaslAuthenticate = 27,
        AlterUser = 28,
        ListUsers = 29,
        CreateAcls = 30,
        DeleteAcls = 31,
        ListAcls = 32,
        AlterQuotas = 33,
        ListQuotas = 34,
        ListGroups = 35,
        DescribeGroup = 36,
        AlterTopic = 37,
        DescribeTopicConfigs = 38,
        AddQueues = 39,
        DeleteRecords = 40,
        QueueCopy = 41,
    }
}

/// The shard that coordinates `group` and stores its offsets (any shard
/// forwards a group request there).
pub fn coordinator_of(group: &str, shards: usize) -> usize {
    crc32fast::hash(group.as_bytes()) as usize % shards.max(1)
}

wire_enum! {
    /// Typed errors on the wire; 0 is success.
    pub enum ErrorCode {
        None = 0,
        /// The frame or body does not parse (the connection is closed for framing errors).
        Malformed = 1,
        UnknownApi = 2,
        UnsupportedVersion = 3,
        UnknownTopic = 4,
        UnknownQueue = 5,
        TopicExists = 6,
        InvalidTopic = 7,
        CrcMismatch = 8,
        BatchTooLarge = 9,
        InvalidBatch = 10,
        OffsetOutOfRange = 11,
        StorageFailed = 12,
        ShuttingDown = 13,
        TooManyConnections = 14,
        FrameTooLarge = 15,
        InvalidRequest = 16,
        Internal = 17,
        /// The group is rebalancing: rejoin.
        RebalanceInProgress = 18,
        /// The request's generation is not the group's: the member was fenced (rejoin).
        IllegalGeneration = 19,
        /// The group does not know the member (it left or its session expired): rejoin.
        UnknownMember = 20,
        /// The member commits a queue that is not assigned to it in this generation.
        NotAssigned = 21,
        /// A stored batch fails its check: the offsets it covers are damaged (skip them).
        CorruptData = 22,
        /// The shard's disk is full: nothing was stored; retry once space is freed.
        StorageFull = 23,
        /// This node does not lead the queue's broker group (or leads another epoch): refresh metadata.
        NotLeader = 24,
        /// The follower's log does not continue the leader's: cut it back and fetch again.
        LogDiverged = 25,
        /// Sync replication: too few replicas hold the batch durably (it is stored on the leader).
        NotEnoughReplicas = 26,
        /// Cluster mode: the coordination service (etcd) did not answer a topic change; retry.
        ClusterUnavailable = 27,
        /// The member's client kind or assignment protocols do not match the group's members'.
        InconsistentGroupProtocol = 28,
        /// The broker authenticates clients: SaslHandshake and SaslAuthenticate first.
        AuthenticationRequired = 29,
        /// Wrong user or password (or certificate): the broker closes the connection.
        AuthenticationFailed = 30,
        /// The broker does not enable this SASL mechanism (the response lists those it does).
        UnsupportedSaslMechanism = 31,
        /// The principal may not do this to this resource (an ACL denies it or none allows it).
        NotAuthorized = 32,
        /// A static group member's instance joined again as another member: this one is fenced.
        FencedInstance = 33,
        /// A topic config's name or value the broker does not take (the message says which and why).
        InvalidConfig = 34,
        /// Fewer replicas in sync than the topic's `min.insync.replicas`: nothing was stored; retry later.
        TooFewInSync = 35,
        /// Tiered storage's bucket did not answer a read below the queue's local start: retry.
        RemoteUnavailable = 36,
    }
}

impl ErrorCode {
    /// The code for a wire value (unknown values read as Internal).
    pub fn from_u16(v: u16) -> ErrorCode {
        ErrorCode::from_wire(v).unwrap_or(ErrorCode::Internal)
    }

    /// True if the same request may succeed when retried (after a metadata refresh or a pause).
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            ErrorCode::ShuttingDown
                | ErrorCode::UnknownTopic
                | ErrorCode::UnknownQueue
                | ErrorCode::NotLeader
                | ErrorCode::ClusterUnavailable
                | ErrorCode::TooFewInSync
                | ErrorCode::RemoteUnavailable
        )
    }

    /// True if the member must join the group again.
    pub fn needs_rejoin(self) -> bool {
        matches!(self, ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration | ErrorCode::UnknownMember)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_are_the_declaration_order() {
        for (i, k) in ApiKey::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
            assert_eq!(ApiKey::from_wire(i as u16), Some(*k));
        }
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert_eq!(ErrorCode::from_u16(i as u16), *c);
        }
        assert_eq!(ApiKey::from_wire(ApiKey::ALL.len() as u16), None);
        assert_eq!(ErrorCode::from_u16(999), ErrorCode::Internal);
    }
}
