//! DeleteAcls: the ACL rules a filter matches removed, on shard 0 (which stores the change, or asks etcd to in a
//! cluster); every shard's snapshot is replaced after.

use super::{Api, At, Need, Route};
use crate::protocol::acl::AclFilter;
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::security::decode_filter;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Alter;
use crate::security::change::AccountsChange;
use crate::server::auth::authorizer::cluster;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct DeleteAcls;

impl Api for DeleteAcls {
    const KEY: ApiKey = ApiKey::DeleteAcls;
    const BODIES: (&'static str, &'static str) = ("acl filter", "u32 removed");
    type Request<'a> = AclFilter;

    fn decode(r: &mut Reader, _: u16) -> Result<AclFilter, DecodeError> {
        decode_filter(r)
    }

    fn authorize(_: &AclFilter, need: &mut Need) -> Result<(), Failure> {
        need(Alter, cluster())
    }

    fn route(_: &AclFilter) -> Route<'_> {
        Route::Shard(0)
    }

    async fn serve(s: &Services, change: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        w.u32(s.core.change_accounts(AccountsChange::RemoveAcls(change)).await?);
        Ok(())
    }
}
