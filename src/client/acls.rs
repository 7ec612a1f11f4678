//! ACL management from the SDK: rules added, removed by filter, listed.

use super::client::Client;
use super::error::ClientError;
use ringmq_protocol::acl::{Acl, AclFilter};
use ringmq_protocol::security::{decode_acls, encode_acls, encode_filter};
use ringmq_protocol::{ApiKey, Reader, Writer};

impl Client {
    /// Adds rules (those already there are kept once).
    pub fn create_acls(&self, rules: &[Acl]) -> Result<(), ClientError> {
        let mut w = Writer::default();
        encode_acls(rules, &mut w);
        self.call_addr(&self.control_addr(), ApiKey::CreateAcls, &w.buf)?;
        Ok(())
    }

    /// Removes the rules the filter matches; how many went.
    pub fn delete_acls(&self, filter: &AclFilter) -> Result<u32, ClientError> {
        let mut w = Writer::default();
        encode_filter(filter, &mut w);
        let reply = self.call_addr(&self.control_addr(), ApiKey::DeleteAcls, &w.buf)?;
        Ok(Reader::new(&reply.body).u32()?)
    }

    /// The rules the filter matches.
    pub fn list_acls(&self, filter: &AclFilter) -> Result<Vec<Acl>, ClientError> {
        let mut w = Writer::default();
        encode_filter(filter, &mut w);
        let reply = self.call_addr(&self.control_addr(), ApiKey::ListAcls, &w.buf)?;
        Ok(decode_acls(&mut Reader::new(&reply.body))?)
    }
}
