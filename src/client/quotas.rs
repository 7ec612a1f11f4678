//! Quota management from the SDK.

use super::client::Client;
use super::error::ClientError;
use ringmq_protocol::quota::Entry;
use ringmq_protocol::security::{decode_quotas, encode_quota};
use ringmq_protocol::{ApiKey, Reader, Writer};

impl Client {
    /// Sets an entry's limits (all None: removes the entry).
    pub fn set_quota(&self, entry: &Entry) -> Result<(), ClientError> {
        let mut w = Writer::default();
        encode_quota(entry, &mut w);
        self.call_addr(&self.control_addr(), ApiKey::AlterQuotas, &w.buf)?;
        Ok(())
    }

    /// Every quota entry.
    pub fn list_quotas(&self) -> Result<Vec<Entry>, ClientError> {
        let reply = self.call_addr(&self.control_addr(), ApiKey::ListQuotas, &[])?;
        Ok(decode_quotas(&mut Reader::new(&reply.body))?)
    }
}
