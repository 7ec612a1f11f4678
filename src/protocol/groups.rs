//! What the broker says about consumer groups: ListGroups (the groups a
//! shard coordinates) and DescribeGroup (a group's state, members with
//! their queues, and committed offsets), for `ringmq group` and the console.

use super::codec::{DecodeError, Reader, Writer};
use super::messages::Assignment;

/// One group a shard coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group: String,
    /// Stable, PreparingRebalance, CompletingRebalance, or Empty (no members; offsets only).
    pub state: String,
    pub members: u32,
}

/// A group member and the queues it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member: String,
    pub client_id: String,
    pub assignment: Assignment,
}

/// A consumer group as its coordinator knows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupDescription {
    pub group: String,
    pub state: String,
    /// `ringmq` for the SDK's groups, `consumer` for Kafka clients'.
    pub protocol_type: String,
    /// The assignment protocol of the current generation.
    pub protocol: String,
    pub generation: u32,
    pub leader: String,
    pub members: Vec<MemberDescription>,
    /// Committed offsets: (topic, queue, offset).
    pub offsets: Vec<(String, u32, u64)>,
}

pub fn encode_listings(groups: &[GroupListing], w: &mut Writer) {
    w.u32(groups.len() as u32);
    for g in groups {
        w.string(&g.group).string(&g.state).u32(g.members);
    }
}

pub fn decode_listings(r: &mut Reader) -> Result<Vec<GroupListing>, DecodeError> {
    (0..r.count(12)?).map(|_| Ok(GroupListing { group: r.string()?, state: r.string()?, members: r.u32()? })).collect()
}

impl GroupDescription {
    pub fn encode(&self, w: &mut Writer) {
        w.string(&self.group).string(&self.state).string(&self.protocol_type).string(&self.protocol);
        w.u32(self.generation).string(&self.leader).u32(self.members.len() as u32);
        for m in &self.members {
            w.string(&m.member).string(&m.client_id).bytes(&m.assignment.encode());
        }
        w.u32(self.offsets.len() as u32);
        for (topic, queue, offset) in &self.offsets {
            w.string(topic).u32(*queue).u64(*offset);
        }
    }

    pub fn decode(r: &mut Reader) -> Result<GroupDescription, DecodeError> {
        let (group, state, protocol_type, protocol) = (r.string()?, r.string()?, r.string()?, r.string()?);
        let (generation, leader) = (r.u32()?, r.string()?);
        let members = (0..r.count(12)?)
            .map(|_| {
                let (member, client_id) = (r.string()?, r.string()?);
                Ok(MemberDescription { member, client_id, assignment: Assignment::decode(r.bytes()?)? })
            })
            .collect::<Result<_, DecodeError>>()?;
        let offsets = (0..r.count(14)?).map(|_| Ok((r.string()?, r.u32()?, r.u64()?))).collect::<Result<_, _>>()?;
        Ok(GroupDescription { group, state, protocol_type, protocol, generation, leader, members, offsets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_and_listings_round_trip() {
        let d = GroupDescription {
            group: "billing".into(),
            state: "Stable".into(),
            protocol_type: "ringmq".into(),
            protocol: "ringmq".into(),
            generation: 3,
            leader: "c-1".into(),
            members: vec![MemberDescription {
                member: "c-1".into(),
                client_id: "c".into(),
                assignment: Assignment { topics: vec![("orders".into(), vec![0, 2])] },
            }],
            offsets: vec![("orders".into(), 0, 42)],
        };
        let mut w = Writer::default();
        d.encode(&mut w);
        let mut r = Reader::new(&w.buf);
        assert_eq!(GroupDescription::decode(&mut r), Ok(d));
        r.finish().unwrap();
        let listings = vec![GroupListing { group: "g".into(), state: "Empty".into(), members: 0 }];
        let mut w = Writer::default();
        encode_listings(&listings, &mut w);
        assert_eq!(decode_listings(&mut Reader::new(&w.buf)), Ok(listings));
    }
}
