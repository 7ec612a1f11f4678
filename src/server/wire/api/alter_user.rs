//! AlterUser: a user created, its credentials replaced, or deleted, on shard 0 (which stores the change, or asks etcd to in a
//! cluster); every shard's snapshot is replaced after.

use super::{Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::security;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Alter;
use crate::security::change::AccountsChange;
use crate::server::auth::authorizer::cluster;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct AlterUser;

impl Api for AlterUser {
    const KEY: ApiKey = ApiKey::AlterUser;
    const BODIES: (&'static str, &'static str) = ("u8 op (0 upsert: string user, [string mechanism, bytes salt, u32 iterations, bytes stored_key, bytes server_key]; 1 delete: string user)", "(empty)");
    type Request<'a> = security::AlterUser;

    fn decode(r: &mut Reader, _: u16) -> Result<security::AlterUser, DecodeError> {
        security::AlterUser::decode(r)
    }

    fn authorize(_: &security::AlterUser, need: &mut Need) -> Result<(), Failure> {
        need(Alter, cluster())
    }

    fn route(_: &security::AlterUser) -> Route<'_> {
        Route::Shard(0)
    }

    async fn serve(s: &Services, change: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.core.change_accounts(AccountsChange::User(change)).await.map(drop)
    }
}
