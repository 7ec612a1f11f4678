//! Who a connection is: SASL authentication (SCRAM-SHA-256/512, PLAIN over
//! TLS) or a verified client certificate, per connection (`session.rs`),
//! and the users it is checked against (`users.rs`: changed on shard 0,
//! stored in `DATA_DIR/users`, shared by every shard). Both protocol edges
//! use it.

pub mod session;
pub mod users;
