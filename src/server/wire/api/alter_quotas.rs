//! AlterQuotas: a quota set, or removed, on shard 0 (which stores the change, or asks etcd to in a
//! cluster); every shard's snapshot is replaced after.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::quota::Entry;
use crate::protocol::security::decode_quota;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Alter;
use crate::security::change::AccountsChange;
use crate::server::auth::authorizer::cluster;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct AlterQuotas;

impl Api for AlterQuotas {
    const KEY: ApiKey = ApiKey::AlterQuotas;
    const BODIES: (&'static str, &'static str) = ("quota (every limit absent: removes the entry)", "(empty)");
    type Request<'a> = Entry;

    fn decode(r: &mut Reader, _: u16) -> Result<Entry, DecodeError> {
        decode_quota(r)
    }

    fn authorize(_: &Entry, need: &mut Need) -> Result<(), Failure> {
        need(Alter, cluster())
    }

    fn route(_: &Entry) -> Route<'_> {
        Route::Shard(0)
    }

    async fn serve(s: &Services, change: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.core.change_accounts(AccountsChange::Quota(change)).await.map(drop)
    }
}
