//! Bodies of the security APIs: SASL authentication (a handshake naming
//! the mechanism, then tokens until the mechanism is done, as Kafka's
//! SaslHandshake v1 / SaslAuthenticate) and user management (SCRAM
//! credentials derived by the client, so the broker never sees a password).

use super::codec::{DecodeError, Reader, Writer};
use crate::acl::{Acl, AclFilter, Operation, PatternType, Permission, ResourceType};
use crate::quota::{Entity, Entry, Limits};
use crate::scram::{Credential, Mechanism};

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

/// A wire code of an ACL field: its place in the type's `ALL`.
fn code<T: PartialEq + Copy>(all: &[T], value: T) -> u8 {
    all.iter().position(|v| *v == value).expect("every value is in ALL") as u8
}

fn of_code<T: Copy>(all: &[T], code: u8, what: &'static str) -> Result<T, DecodeError> {
    all.get(usize::from(code)).copied().ok_or(DecodeError(what))
}

/// An ACL rule on the wire: principal, resource type, pattern, name, operation, permission.
pub fn encode_acl(acl: &Acl, w: &mut Writer) {
    w.string(&acl.principal).u8(code(ResourceType::ALL, acl.resource)).u8(code(PatternType::ALL, acl.pattern));
    w.string(&acl.name).u8(code(Operation::ALL, acl.operation)).u8(code(Permission::ALL, acl.permission));
}

pub fn decode_acl(r: &mut Reader) -> Result<Acl, DecodeError> {
    Ok(Acl {
        principal: r.string()?,
        resource: of_code(ResourceType::ALL, r.u8()?, "unknown ACL resource type")?,
        pattern: of_code(PatternType::ALL, r.u8()?, "unknown ACL pattern type")?,
        name: r.string()?,
        operation: of_code(Operation::ALL, r.u8()?, "unknown ACL operation")?,
        permission: of_code(Permission::ALL, r.u8()?, "unknown ACL permission")?,
    })
}

/// A list of rules (CreateAcls request, ListAcls response).
pub fn encode_acls(acls: &[Acl], w: &mut Writer) {
    w.u32(acls.len() as u32);
    acls.iter().for_each(|a| encode_acl(a, w));
}

pub fn decode_acls(r: &mut Reader) -> Result<Vec<Acl>, DecodeError> {
    (0..r.count(2 + 1 + 1 + 2 + 1 + 1)?).map(|_| decode_acl(r)).collect()
}

/// A filter (ListAcls, DeleteAcls): each field a presence byte, then the value if present.
pub fn encode_filter(f: &AclFilter, w: &mut Writer) {
    opt_string(&f.principal, w);
    opt_code(f.resource.map(|v| code(ResourceType::ALL, v)), w);
    opt_code(f.pattern.map(|v| code(PatternType::ALL, v)), w);
    opt_string(&f.name, w);
    opt_code(f.operation.map(|v| code(Operation::ALL, v)), w);
    opt_code(f.permission.map(|v| code(Permission::ALL, v)), w);
}

fn opt_code(v: Option<u8>, w: &mut Writer) {
    match v {
        Some(v) => w.u8(1).u8(v),
        None => w.u8(0),
    };
}

pub fn decode_filter(r: &mut Reader) -> Result<AclFilter, DecodeError> {
    let string =
        |r: &mut Reader| -> Result<Option<String>, DecodeError> { present(r)?.then(|| r.string()).transpose() };
    fn coded<T: Copy>(r: &mut Reader, all: &[T], what: &'static str) -> Result<Option<T>, DecodeError> {
        if present(r)? {
            Ok(Some(of_code(all, r.u8()?, what)?))
        } else {
            Ok(None)
        }
    }
    Ok(AclFilter {
        principal: string(r)?,
        resource: coded(r, ResourceType::ALL, "unknown ACL resource type")?,
        pattern: coded(r, PatternType::ALL, "unknown ACL pattern type")?,
        name: string(r)?,
        operation: coded(r, Operation::ALL, "unknown ACL operation")?,
        permission: coded(r, Permission::ALL, "unknown ACL permission")?,
    })
}

fn opt_string(v: &Option<String>, w: &mut Writer) {
    match v {
        Some(v) => w.u8(1).string(v),
        None => w.u8(0),
    };
}

fn opt_u64(v: Option<u64>, w: &mut Writer) {
    match v {
        Some(v) => w.u8(1).u64(v),
        None => w.u8(0),
    };
}

fn present(r: &mut Reader) -> Result<bool, DecodeError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError("a presence byte other than 0 or 1")),
    }
}

/// A quota entry (AlterQuotas request: all limits absent removes it; ListQuotas response).
pub fn encode_quota(e: &Entry, w: &mut Writer) {
    opt_string(&e.entity.user, w);
    opt_string(&e.entity.client_id, w);
    opt_u64(e.limits.produce_bytes_per_sec, w);
    opt_u64(e.limits.fetch_bytes_per_sec, w);
    opt_u64(e.limits.requests_per_sec, w);
}

pub fn decode_quota(r: &mut Reader) -> Result<Entry, DecodeError> {
    let string =
        |r: &mut Reader| -> Result<Option<String>, DecodeError> { present(r)?.then(|| r.string()).transpose() };
    let number = |r: &mut Reader| -> Result<Option<u64>, DecodeError> { present(r)?.then(|| r.u64()).transpose() };
    let entity = Entity { user: string(r)?, client_id: string(r)? };
    let limits =
        Limits { produce_bytes_per_sec: number(r)?, fetch_bytes_per_sec: number(r)?, requests_per_sec: number(r)? };
    Ok(Entry { entity, limits })
}

pub fn encode_quotas(entries: &[Entry], w: &mut Writer) {
    w.u32(entries.len() as u32);
    entries.iter().for_each(|e| encode_quota(e, w));
}

pub fn decode_quotas(r: &mut Reader) -> Result<Vec<Entry>, DecodeError> {
    (0..r.count(5)?).map(|_| decode_quota(r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::ITERATIONS_MIN;

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
        let acl = Acl {
            principal: "User:alice".into(),
            resource: ResourceType::Group,
            pattern: PatternType::Prefixed,
            name: "g-".into(),
            operation: Operation::Read,
            permission: Permission::Deny,
        };
        let mut w = Writer::default();
        encode_acls(std::slice::from_ref(&acl), &mut w);
        assert_eq!(decode_acls(&mut Reader::new(&w.buf)).unwrap(), vec![acl]);
        let filter = AclFilter { name: Some("t".into()), operation: Some(Operation::Write), ..AclFilter::default() };
        let mut w = Writer::default();
        encode_filter(&filter, &mut w);
        assert_eq!(decode_filter(&mut Reader::new(&w.buf)).unwrap(), filter);
        let quota = Entry {
            entity: Entity { user: Some("alice".into()), client_id: None },
            limits: Limits {
                produce_bytes_per_sec: Some(1 << 20),
                fetch_bytes_per_sec: None,
                requests_per_sec: Some(5),
            },
        };
        let mut w = Writer::default();
        encode_quotas(std::slice::from_ref(&quota), &mut w);
        assert_eq!(decode_quotas(&mut Reader::new(&w.buf)).unwrap(), vec![quota]);
        let list = UserList(vec![("alice".into(), vec![Mechanism::ScramSha256, m])]);
        let mut w = Writer::default();
        list.encode(&mut w);
        assert_eq!(UserList::decode(&mut Reader::new(&w.buf)).unwrap(), list);
    }
}
