//! What a message carries after its send stamp: filler bytes (`x`, the
//! default: every run before payloads existed), or JSON-like text, an order
//! event of words and numbers as a service would log it, compressible about
//! as much as such text is. A run cycles through `VARIANTS` different JSON
//! texts, so that consecutive messages are not copies of one another (a
//! compressor would otherwise find whole messages repeated).

use clap::ValueEnum;

/// Distinct JSON texts a run cycles through.
const VARIANTS: u64 = 256;

const WORDS: &[&str] = &[
    "express",
    "standard",
    "pending",
    "shipped",
    "paid",
    "refunded",
    "warehouse",
    "berlin",
    "lisbon",
    "osaka",
    "toronto",
    "bolt",
    "washer",
    "bracket",
    "hinge",
    "cable",
    "sensor",
    "panel",
    "valve",
    "gasket",
    "blue",
    "steel",
];

/// The payload kind of `--payload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Payload {
    /// The byte `x` repeated.
    Filler,
    /// JSON-like text (an order event).
    Json,
}

/// The payloads of a run, each `size` bytes (stamp included), picked by sequence.
pub struct Payloads {
    variants: Vec<Vec<u8>>,
}

impl Payloads {
    /// Payloads of `kind`, each `size` bytes.
    pub fn new(kind: Payload, size: usize) -> Payloads {
        let variants = match kind {
            Payload::Filler => vec![vec![b'x'; size]],
            Payload::Json => (0..VARIANTS).map(|v| json(v, size)).collect(),
        };
        Payloads { variants }
    }

    /// The payload of message `seq` (its stamp still to be written).
    pub fn for_seq(&mut self, seq: u64) -> &mut [u8] {
        let n = self.variants.len() as u64;
        &mut self.variants[(seq % n) as usize]
    }
}

/// The JSON-like text of variant `v`, `size` bytes after a space for the stamp.
fn json(v: u64, size: usize) -> Vec<u8> {
    let mut state = v.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        // xorshift64*: cheap, deterministic per variant.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut word = || WORDS[(next() % WORDS.len() as u64) as usize];
    let mut text = String::with_capacity(size + 128);
    text.push_str(&" ".repeat(crate::run::STAMP_BYTES));
    text += &format!(r#"{{"event":"order.{}","order_id":{},"items":["#, word(), 100_000 + v * 7919);
    let mut i = 0;
    while text.len() < size {
        text += &format!(
            r#"{{"sku":"{}-{}-{}","qty":{},"price_cents":{},"warehouse":"{}"}},"#,
            word(),
            word(),
            1000 + i * 37 % 9000,
            1 + i % 7,
            199 + (i * 1543) % 99_000,
            word()
        );
        i += 1;
    }
    let mut bytes = text.into_bytes();
    bytes.truncate(size);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_payloads_have_the_size_asked_and_differ() {
        let mut p = Payloads::new(Payload::Json, 1024);
        let first = p.for_seq(0).to_vec();
        assert_eq!(first.len(), 1024);
        assert_ne!(first, p.for_seq(1).to_vec());
        assert_eq!(first, p.for_seq(VARIANTS).to_vec());
        assert!(std::str::from_utf8(&first[crate::run::STAMP_BYTES..]).unwrap().contains(r#""sku":""#));
    }
}
