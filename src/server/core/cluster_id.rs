//! The cluster's id, as Kafka clients read it (Metadata v2+, DescribeCluster):
//! made once for the cluster's life, in Kafka's form (16 random bytes,
//! base64url without padding: 22 characters). A single node keeps it in its
//! data directory (`node/cluster_id.rs`), a cluster in etcd
//! (`cluster/cluster_id.rs`), so every node gives the same one.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// The bytes an id is made from.
const ID_BYTES: usize = 16;

/// A new cluster id.
pub fn new_cluster_id() -> String {
    let mut bytes = [0u8; ID_BYTES];
    getrandom::getrandom(&mut bytes).expect("the operating system's random source");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether `text` is a cluster id in Kafka's form.
pub fn is_cluster_id(text: &str) -> bool {
    URL_SAFE_NO_PAD.decode(text).is_ok_and(|bytes| bytes.len() == ID_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_id_is_in_kafkas_form_and_differs_from_the_last() {
        let (a, b) = (new_cluster_id(), new_cluster_id());
        assert_eq!(a.len(), 22, "{a}");
        assert!(is_cluster_id(&a) && is_cluster_id(&b));
        assert_ne!(a, b);
        for bad in ["", "short", "MkU3OEVBNTcwNTJENDM2Qg==", "MkU3OEVBNTcwNTJENDM2Q!", "MkU3OEVBNTcwNTJENDM2QgAA"] {
            assert!(!is_cluster_id(bad), "{bad}");
        }
        assert!(is_cluster_id("MkU3OEVBNTcwNTJENDM2Qg"), "the id of Kafka's own quickstart");
    }
}
