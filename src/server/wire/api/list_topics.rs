//! ListTopics: the names of the topics the caller may describe.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::encode_names;
use crate::protocol::{ApiKey, Writer};
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct ListTopics;

impl Api for ListTopics {
    const KEY: ApiKey = ApiKey::ListTopics;
    const BODIES: (&'static str, &'static str) = ("(empty)", "[string name]");
    type Request<'a> = ();

    fn decode(_: &mut Reader, _: u16) -> Result<(), DecodeError> {
        Ok(())
    }

    /// Filtered instead: a caller sees the topics it may describe.
    fn authorize(_: &(), _: &mut Need) -> Result<(), Failure> {
        Ok(())
    }

    async fn serve(s: &Services, _: Self::Request<'_>, at: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let core = &s.core;
        let names: Vec<String> = core.metadata().topics.keys().filter(|t| at.caller.sees(core, t)).cloned().collect();
        encode_names(&names, w);
        Ok(())
    }
}
