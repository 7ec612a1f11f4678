//! The admin edge: an HTTP listener on shard 0 (`--admin-listen`) for
//! operators and their tools: Prometheus metrics of every shard
//! (`scrape.rs`), health and readiness for orchestrators, and the web
//! console. It calls the core and the features as the other edges do, and
//! never the wire or the Kafka edge.

pub mod api;
pub mod console;
pub mod http;
pub mod listener;
pub mod login;
pub mod scrape;
