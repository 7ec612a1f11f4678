//! A set of offsets marked done above a moving cursor.

use std::collections::VecDeque;

/// Offsets marked done at or above a cursor, as a bitmap; the cursor moves
/// past every marked offset at its front (delivered timers, resolved
/// transactions).
pub struct Marks {
    /// Every offset below is marked.
    pub cursor: u64,
    /// Bit i of word w: offset base + 64 w + i.
    base: u64,
    words: VecDeque<u64>,
}

impl Marks {
    pub fn new(cursor: u64) -> Self {
        Marks { cursor, base: cursor - cursor % 64, words: VecDeque::new() }
    }

    pub fn mark(&mut self, offset: u64) {
        if offset < self.cursor {
            return;
        }
        let bit = offset - self.base;
        let word = (bit / 64) as usize;
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << (bit % 64);
        while self.is_marked(self.cursor) {
            self.cursor += 1;
            if self.cursor - self.base == 64 {
                self.words.pop_front();
                self.base += 64;
            }
        }
    }

    pub fn is_marked(&self, offset: u64) -> bool {
        if offset < self.cursor {
            return true;
        }
        let bit = offset - self.base;
        self.words.get((bit / 64) as usize).is_some_and(|w| w & (1 << (bit % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_moves_past_every_delivered_offset_at_its_front() {
        let mut d = Marks::new(130);
        for o in [131, 200, 129, 132] {
            d.mark(o);
        }
        assert_eq!(d.cursor, 130, "130 is still pending");
        assert!(d.is_marked(129) && d.is_marked(131) && d.is_marked(200) && !d.is_marked(133));
        d.mark(130);
        assert_eq!(d.cursor, 133);
        for o in 133..200 {
            d.mark(o);
        }
        assert_eq!(d.cursor, 201);
        assert!(d.words.len() <= 2, "words below the cursor are dropped");
    }
}
