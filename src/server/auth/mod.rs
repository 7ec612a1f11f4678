//! Who a connection is: SASL authentication (SCRAM-SHA-256/512, PLAIN over
//! TLS) or a verified client certificate, per connection (`session.rs`);
//! what it may do (`authorizer.rs`, over the ACLs); how fast it may go
//! (`quotas.rs`: token buckets per user and client id); the changes of the
//! users, ACLs and quotas (`admin.rs`: shard 0's files, or etcd in a
//! cluster). Both protocol edges use it.

pub mod admin;
pub mod authorizer;
pub mod quotas;
pub mod session;
