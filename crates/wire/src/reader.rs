//! A cursor over a frame body that reads little-endian fields and never reads past its
//! end: each read is `None` when the bytes are not there, and consumes nothing then.

use crate::ids::{DeliveryToken, Guid};

/// Reads fields from the front of a byte slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    /// What is left to read.
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { rest: buf }
    }

    /// The next `n` bytes, borrowed from the slice.
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.rest.len() {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.bytes(N)?.try_into().ok()
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|[b]| b)
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    pub(crate) fn guid(&mut self) -> Option<Guid> {
        self.array().map(Guid)
    }

    pub(crate) fn token(&mut self) -> Option<DeliveryToken> {
        self.u32().map(DeliveryToken)
    }

    /// What is left, consumed.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_fields_and_stops_at_the_end() {
        let mut r = Reader::new(&[1, 2, 0, 3, 0, 0, 0, 9]);
        assert_eq!(r.u8(), Some(1));
        assert_eq!(r.u16(), Some(2));
        assert_eq!(r.u32(), Some(3));
        assert_eq!(r.u16(), None, "one byte left: nothing read");
        assert_eq!(r.u8(), Some(9));
        assert!(r.is_empty());
        assert_eq!(r.bytes(0), Some(&[][..]));
        assert_eq!(r.bytes(1), None);
    }
}
