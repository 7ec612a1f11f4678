//! Bodies of the security APIs: SASL authentication (a handshake naming
//! the mechanism, then tokens until the mechanism is done, as Kafka's
//! SaslHandshake v1 / SaslAuthenticate) and user management (SCRAM
//! credentials derived by the client, so the broker never sees a password).

use super::codec::{DecodeError, Reader, Writer};
use crate::security::scram::{Credential, Mechanism};

/// AlterUser: set a user's credentials (a new user, or new passwords), or delete the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterUser {
    Upsert { user: String, credentials: Vec<(Mechanism, Credential)> },
    Delete { user: String },
}

const UPSERT: u8 = 0;
const DELETE: u8 = 1;

impl AlterUser {
    pub fn user(&self) -> &str {
        match self {
            AlterUser::Upsert { user, .. } | AlterUser::Delete { user } => user,
        }
    }

    pub fn encode(&self, w: &mut Writer) {
        match self {
            AlterUser::Upsert { user, credentials } => {
                w.u8(UPSERT).string(user).u32(credentials.len() as u32);
                for (mechanism, c) in credentials {
                    w.string(mechanism.name()).bytes(&c.salt).u32(c.iterations);
                    w.bytes(&c.stored_key).bytes(&c.server_key);
                }
            }
            AlterUser::Delete { user } => {
                w.u8(DELETE).string(user);
            }
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        match r.u8()? {
            UPSERT => {
                let user = r.string()?;
                let credentials = (0..r.count(2 + 4 + 4 + 4 + 4)?)
                    .map(|_| {
                        let mechanism =
                            Mechanism::from_name(&r.string()?).ok_or(DecodeError("unknown SCRAM mechanism"))?;
                        let salt = r.bytes()?.to_vec();
                        let iterations = r.u32()?;
                        let (stored_key, server_key) = (r.bytes()?.to_vec(), r.bytes()?.to_vec());
                        Ok((mechanism, Credential { salt, iterations, stored_key, server_key }))
                    })
                    .collect::<Result<_, DecodeError>>()?;
                Ok(AlterUser::Upsert { user, credentials })
            }
            DELETE => Ok(AlterUser::Delete { user: r.string()? }),
            _ => Err(DecodeError("unknown AlterUser operation")),
        }
    }
}

/// ListUsers response: each user and the mechanisms it has credentials for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserList(pub Vec<(String, Vec<Mechanism>)>);

impl UserList {
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.0.len() as u32);
        for (user, mechanisms) in &self.0 {
            w.string(user).u32(mechanisms.len() as u32);
            for m in mechanisms {
                w.string(m.name());
            }
        }
    }

    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let users = (0..r.count(2 + 4)?)
            .map(|_| {
                let user = r.string()?;
                let mechanisms = (0..r.count(2)?)
                    .map(|_| Mechanism::from_name(&r.string()?).ok_or(DecodeError("unknown SCRAM mechanism")))
                    .collect::<Result<_, _>>()?;
                Ok((user, mechanisms))
            })
            .collect::<Result<_, DecodeError>>()?;
        Ok(UserList(users))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::scram::ITERATIONS_MIN;

    #[test]
    fn user_changes_and_lists_round_trip() {
        let m = Mechanism::ScramSha512;
        let upsert = AlterUser::Upsert {
            user: "alice".into(),
            credentials: vec![(m, Credential::new(m, "pw", ITERATIONS_MIN).unwrap())],
        };
        for change in [upsert, AlterUser::Delete { user: "bob".into() }] {
            let mut w = Writer::default();
            change.encode(&mut w);
            assert_eq!(AlterUser::decode(&mut Reader::new(&w.buf)).unwrap(), change);
        }
        let list = UserList(vec![("alice".into(), vec![Mechanism::ScramSha256, m])]);
        let mut w = Writer::default();
        list.encode(&mut w);
        assert_eq!(UserList::decode(&mut Reader::new(&w.buf)).unwrap(), list);
    }
}
