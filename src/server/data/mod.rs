//! The data path of topics: produce (all of a request or none of it),
//! fetch (one queue, or many with one long poll), tag filtering, lookup
//! by message id or key, a topic's own retention and DeleteRecords,
//! tiered storage's bucket check, uploads and restore, and in a cluster the queues'
//! loads reported for rebalancing.

pub mod bucket;
pub mod compaction;
pub mod fetch;
pub mod load;
pub mod lookup;
pub mod produce;
pub mod restore;
pub mod retention;
pub mod tag_filter;
pub mod upload;
