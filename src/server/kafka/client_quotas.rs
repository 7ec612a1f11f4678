//! What the client-quota APIs share: a ringmq quota entry in Kafka's terms.
//! An entity is a user and a client id, each a name or Kafka's default
//! (ringmq's "every"): {user=alice} is alice with every client, {client-id=c}
//! every user with client c, {user=<default>} every user and client. The
//! limits are Kafka's `producer_byte_rate` and `consumer_byte_rate`, and
//! ringmq's requests per second under `ringmq_requests_per_sec` (Kafka's
//! `request_percentage` meters time, which ringmq does not).

use crate::security::quota::{Entity, Limits};

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
const PRODUCE: &str = "producer_byte_rate";
const FETCH: &str = "consumer_byte_rate";
const REQUESTS: &str = "ringmq_requests_per_sec";

/// An entity's components, as Kafka names them: (type, name; None: the default).
pub type Components = Vec<(String, Option<String>)>;

/// A Kafka entity as ringmq's.
pub fn entity(components: &Components) -> Result<Entity, String> {
    if components.is_empty() {
        return Err("an entity names a user, a client id or both".into());
    }
    let mut entity = Entity { user: None, client_id: None };
    for (kind, name) in components {
        match kind.as_str() {
            USER => entity.user = name.clone(),
            CLIENT_ID => entity.client_id = name.clone(),
            other => return Err(format!("entity type {other:?}: ringmq's quotas are for a user and a client-id")),
        }
    }
    Ok(entity)
}

/// A ringmq entity as Kafka's components.
pub fn components(entity: &Entity) -> Components {
    let mut out = Vec::new();
    if entity.user.is_some() || entity.client_id.is_none() {
        out.push((USER.to_string(), entity.user.clone()));
    }
    if entity.client_id.is_some() {
        out.push((CLIENT_ID.to_string(), entity.client_id.clone()));
    }
    out
}

/// The limits as Kafka's keys and values.
pub fn values(limits: &Limits) -> Vec<(&'static str, f64)> {
    let all = [
        (PRODUCE, limits.produce_bytes_per_sec),
        (FETCH, limits.fetch_bytes_per_sec),
        (REQUESTS, limits.requests_per_sec),
    ];
    all.into_iter().filter_map(|(key, value)| Some((key, value? as f64))).collect()
}

/// `limits` with one key set (Some) or removed (None).
pub fn with_value(mut limits: Limits, key: &str, value: Option<f64>) -> Result<Limits, String> {
    let value = match value {
        Some(v) if !(v >= 1.0 && v <= u64::MAX as f64) => return Err(format!("{key}={v}: a rate of at least 1")),
        v => v.map(|v| v as u64),
    };
    match key {
        PRODUCE => limits.produce_bytes_per_sec = value,
        FETCH => limits.fetch_bytes_per_sec = value,
        REQUESTS => limits.requests_per_sec = value,
        other => return Err(format!("quota key {other:?}: ringmq's are {PRODUCE}, {FETCH} and {REQUESTS}")),
    }
    Ok(limits)
}

/// A filter component: the type, and how a name matches (Kafka's match types).
pub enum Match {
    Exact(String),
    Default,
    Any,
}

/// Whether an entry's components pass the filter (strict: no other types).
pub fn selected(entry: &Components, filter: &[(String, Match)], strict: bool) -> bool {
    let passes = filter.iter().all(|(kind, how)| {
        entry.iter().any(|(k, name)| {
            k == kind
                && match how {
                    Match::Exact(n) => name.as_deref() == Some(n.as_str()),
                    Match::Default => name.is_none(),
                    Match::Any => true,
                }
        })
    });
    passes && (!strict || entry.iter().all(|(k, _)| filter.iter().any(|(kind, _)| kind == k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_and_limits_map_both_ways_and_filters_select_as_kafkas() {
        for e in [
            Entity { user: Some("alice".into()), client_id: None },
            Entity { user: None, client_id: Some("c".into()) },
            Entity { user: Some("alice".into()), client_id: Some("c".into()) },
            Entity { user: None, client_id: None },
        ] {
            assert_eq!(entity(&components(&e)).unwrap(), e);
        }
        assert!(entity(&vec![("ip".into(), None)]).is_err() && entity(&vec![]).is_err());
        let limits = with_value(Limits::default(), PRODUCE, Some(1024.0)).unwrap();
        assert_eq!(values(&limits), [(PRODUCE, 1024.0)]);
        assert_eq!(with_value(limits, PRODUCE, None).unwrap(), Limits::default());
        assert!(with_value(limits, "request_percentage", Some(5.0)).is_err());
        assert!(with_value(limits, FETCH, Some(0.5)).is_err());

        let alice = components(&Entity { user: Some("alice".into()), client_id: Some("c".into()) });
        assert!(selected(&alice, &[(USER.into(), Match::Exact("alice".into()))], false));
        assert!(!selected(&alice, &[(USER.into(), Match::Exact("alice".into()))], true), "strict: client-id too");
        assert!(selected(&alice, &[(USER.into(), Match::Any), (CLIENT_ID.into(), Match::Any)], true));
        assert!(!selected(&alice, &[(USER.into(), Match::Default)], false));
    }
}
