//! The data path of topics: produce (all of a request or none of it),
//! fetch (one queue, or many with one long poll), tag filtering, and lookup
//! by message id or key.

pub mod fetch;
pub mod lookup;
pub mod produce;
pub mod tag_filter;
