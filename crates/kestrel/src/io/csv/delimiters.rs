//! Finding the delimiters of unquoted CSV a machine word at a time.

/// Positions of the commas and line ends in `bytes`, found eight bytes at a time
/// (exact zero-byte test on `word ^ delimiter`, no false positives).
pub(crate) struct Delimiters<'a> {
    bytes: &'a [u8],
    /// Start of the word whose matches are in `mask`.
    at: usize,
    /// One high bit per matching byte of the current word.
    mask: u64,
}

impl<'a> Delimiters<'a> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        let mut d = Delimiters {
            bytes,
            at: 0,
            mask: 0,
        };
        d.mask = d.word_mask(0);
        d
    }

    /// High bit set in each byte of `x` that is zero.
    #[inline(always)]
    fn zero_bytes(x: u64) -> u64 {
        !(((x & Self::LOW7).wrapping_add(Self::LOW7)) | x | Self::LOW7)
    }

    #[inline(always)]
    fn word_mask(&self, at: usize) -> u64 {
        let x = match self
            .bytes
            .get(at..at + 8)
            .and_then(|w| <[u8; 8]>::try_from(w).ok())
        {
            Some(w) => u64::from_le_bytes(w),
            None => {
                // The last, partial word, padded with zeros (which match no delimiter).
                let rest = &self.bytes[at.min(self.bytes.len())..];
                let mut w = [0u8; 8];
                w[..rest.len()].copy_from_slice(rest);
                u64::from_le_bytes(w)
            }
        };
        Self::zero_bytes(x ^ (Self::ONES * b',' as u64))
            | Self::zero_bytes(x ^ (Self::ONES * b'\n' as u64))
    }
}

impl Iterator for Delimiters<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.at += 8;
            if self.at >= self.bytes.len() {
                return None;
            }
            self.mask = self.word_mask(self.at);
        }
        let k = (self.mask.trailing_zeros() / 8) as usize;
        self.mask &= self.mask - 1;
        Some(self.at + k)
    }
}
