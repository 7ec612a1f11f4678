//! CreateAcls: ACL rules added, on shard 0 (which stores the change, or asks etcd to in a
//! cluster); every shard's snapshot is replaced after.

use super::{Api, At, Need, Route};
use crate::protocol::acl::Acl;
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::security::decode_acls;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Alter;
use crate::security::change::AccountsChange;
use crate::server::auth::authorizer::cluster;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct CreateAcls;

impl Api for CreateAcls {
    const KEY: ApiKey = ApiKey::CreateAcls;
    const BODIES: (&'static str, &'static str) = ("[acl]", "(empty)");
    type Request<'a> = Vec<Acl>;

    fn decode(r: &mut Reader, _: u16) -> Result<Vec<Acl>, DecodeError> {
        decode_acls(r)
    }

    fn authorize(_: &Vec<Acl>, need: &mut Need) -> Result<(), Failure> {
        need(Alter, cluster())
    }

    fn route(_: &Vec<Acl>) -> Route<'_> {
        Route::Shard(0)
    }

    async fn serve(s: &Services, change: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.core.change_accounts(AccountsChange::AddAcls(change)).await.map(drop)
    }
}
