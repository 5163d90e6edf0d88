//! The compile-time check that a closure (or an [`InlineValue`](crate::InlineValue)'s value)
//! fits its inline space, and the message it fails with.
//!
//! The check is a constant of [`Fit`], evaluated where a generic `new::<F>` is instantiated
//! for the caller's type (a post-monomorphization error: the crate's docs, "When the size
//! check runs"). Its message names the numbers (the closure's size or alignment, the
//! space's) and the ways out, with the type names a user writes. Stable Rust cannot format
//! in a constant, so [`Message`] writes the text into a byte buffer by hand and the constant
//! panics with it (`panic!("{}", text)` with a `&str` is allowed in a constant).

use core::marker::PhantomData;
use core::mem;

/// What a failed check is about: the words of its message.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// A closure for [`InlineCallback`](crate::InlineCallback) (and [`Callback`](crate::Callback)).
    Callback,
    /// A closure for [`InlineCallbackWith`](crate::InlineCallbackWith).
    CallbackWith,
    /// A value for [`InlineValue`](crate::InlineValue).
    Value,
}

/// The checks of a type `F` against a space `S`, one constant per [`Kind`]: each
/// evaluates to `()` if `F` fits `S` and fails to compile, with [`message`]'s text,
/// otherwise.
pub(crate) struct Fit<F, S>(PhantomData<fn() -> (F, S)>);

impl<F, S> Fit<F, S> {
    /// Whether `F` fits `S`, in size and in alignment.
    pub(crate) const FITS: bool =
        mem::size_of::<F>() <= mem::size_of::<S>() && mem::align_of::<F>() <= mem::align_of::<S>();

    /// The check of a closure for an `InlineCallback<S>`.
    pub(crate) const CALLBACK: () = check::<F, S>(Kind::Callback);

    /// The check of a closure for an `InlineCallbackWith<_, _, S>`.
    pub(crate) const CALLBACK_WITH: () = check::<F, S>(Kind::CallbackWith);

    /// The check of a value for an `InlineValue<S>`.
    pub(crate) const VALUE: () = check::<F, S>(Kind::Value);
}

/// Panics (at compile time, where it is a constant) with [`message`]'s text unless `F`
/// fits `S`.
const fn check<F, S>(kind: Kind) {
    if !Fit::<F, S>::FITS {
        let message = message(
            kind,
            (mem::size_of::<F>(), mem::align_of::<F>()),
            (mem::size_of::<S>(), mem::align_of::<S>()),
        );
        panic!("{}", message.as_str());
    }
}

/// The message of a failed check of a type of `(size, align)` bytes against a space of
/// `(size, align)`: what does not fit, by how much, and the ways out.
pub(crate) const fn message(kind: Kind, item: (usize, usize), space: (usize, usize)) -> Message {
    let (size, align) = item;
    let (space_size, space_align) = space;
    let mut m = Message::new();
    m = m.text(match kind {
        Kind::Callback | Kind::CallbackWith => "zerodispatch: this closure is ",
        Kind::Value => "zerodispatch: this value is ",
    });
    let too_large = size > space_size;
    if too_large {
        m = m
            .number(size)
            .text(" bytes, more than the ")
            .number(space_size);
        m = m.text(" bytes of its inline space");
    } else {
        m = m
            .text("aligned to ")
            .number(align)
            .text(", more than its inline space");
    }
    m = m.text(" (");
    m = m.space(space_size, space_align).text("). ");
    // The space that would hold it: as aligned as both, and as large as the item.
    let align = if align > space_align {
        align
    } else {
        space_align
    };
    let size = if size > space_size { size } else { space_size };
    let size = size.div_ceil(align).saturating_mul(align);
    let larger = if too_large {
        "use a larger space: `"
    } else {
        "Use a more aligned space: `"
    };
    match kind {
        Kind::Callback | Kind::CallbackWith => {
            if too_large {
                m = m.text("Capture less (an index, a handle or an `Arc` rather than the data), ");
            }
            m = m.text(larger);
            m = match kind {
                Kind::Callback => m.text("InlineCallback::<"),
                _ => m.text("InlineCallbackWith::<T, C, "),
            };
            m = m.space(size, align).text(">::new(f)`, or `");
            match kind {
                Kind::Callback => m.text("Callback::spill(f)"),
                _ => m.text("InlineCallbackWith::spill(f)"),
            }
            .text("`, which allocates")
        }
        Kind::Value => {
            if too_large {
                m = m.text("Return less (a handle, an index, or a `Box` of your own), or ");
            }
            m.text(larger)
                .text("InlineValue::<")
                .space(size, align)
                .text(">::new(v)`")
        }
    }
}

/// A message written at compile time: text and numbers in a fixed buffer.
pub(crate) struct Message {
    bytes: [u8; Message::CAPACITY],
    len: usize,
}

impl Message {
    /// Room for the longest message [`message`] writes, with twenty-digit numbers.
    const CAPACITY: usize = 512;

    const fn new() -> Self {
        Self {
            bytes: [0; Self::CAPACITY],
            len: 0,
        }
    }

    /// `self` followed by `text`; cut short, never past the buffer, if it does not fit.
    const fn text(mut self, text: &str) -> Self {
        let text = text.as_bytes();
        let mut i = 0;
        while i < text.len() && self.len < Self::CAPACITY {
            self.bytes[self.len] = text[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// `self` followed by `n` in decimal.
    const fn number(self, mut n: usize) -> Self {
        let mut digits = [0_u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            // `n % 10` is below 10: the cast keeps it whole.
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let (_, digits) = digits.split_at(start);
        match core::str::from_utf8(digits) {
            Ok(digits) => self.text(digits),
            Err(_) => panic!("decimal digits are UTF-8"),
        }
    }

    /// `self` followed by the name of the space of `size` bytes aligned to `align`, as a
    /// user writes it (`Align8<32>`); a space of another alignment is named by its numbers.
    const fn space(self, size: usize, align: usize) -> Self {
        match align {
            0..=8 => self.text("Align8<").number(size).text(">"),
            16 => self.text("Align16<").number(size).text(">"),
            _ => self
                .number(size)
                .text(" bytes aligned to ")
                .number(align)
                .text(", a space of your own"),
        }
    }

    /// The text written so far.
    pub(crate) const fn as_str(&self) -> &str {
        let (written, _) = self.bytes.split_at(self.len);
        match core::str::from_utf8(written) {
            Ok(text) => text,
            // Only whole `&str`s are written; a cut at the capacity could split a character,
            // but every message is ASCII.
            Err(_) => "zerodispatch: the value does not fit its inline space",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers and the ways out are in the message, for each kind.
    #[test]
    fn the_message_names_the_sizes_and_the_ways_out() {
        let too_large = message(Kind::Callback, (40, 8), (32, 8));
        assert_eq!(
            too_large.as_str(),
            "zerodispatch: this closure is 40 bytes, more than the 32 bytes of its inline \
             space (Align8<32>). Capture less (an index, a handle or an `Arc` rather than the \
             data), use a larger space: `InlineCallback::<Align8<40>>::new(f)`, or \
             `Callback::spill(f)`, which allocates"
        );
        let over_aligned = message(Kind::Callback, (16, 16), (32, 8));
        assert!(
            over_aligned.as_str().starts_with(
                "zerodispatch: this closure is aligned to 16, more than its inline space \
                 (Align8<32>)."
            ),
            "{}",
            over_aligned.as_str()
        );
        assert!(over_aligned.as_str().ends_with(
            "(Align8<32>). Use a more aligned space: `InlineCallback::<Align16<32>>::new(f)`, \
             or `Callback::spill(f)`, which allocates"
        ));
        let with = message(Kind::CallbackWith, (33, 1), (32, 8));
        assert!(
            with.as_str()
                .contains("`InlineCallbackWith::<T, C, Align8<40>>::new(f)`")
        );
        let value = message(Kind::Value, (64, 8), (32, 8));
        assert!(
            value
                .as_str()
                .contains("this value is 64 bytes, more than the 32 bytes")
        );
        assert!(
            value
                .as_str()
                .contains("`InlineValue::<Align8<64>>::new(v)`")
        );
        let odd = message(Kind::Value, (8, 64), (32, 8));
        assert!(
            odd.as_str()
                .contains("64 bytes aligned to 64, a space of your own")
        );
        assert!(
            message(Kind::Value, (usize::MAX, 8), (32, 8))
                .as_str()
                .contains(&usize::MAX.to_string())
        );
    }

    #[test]
    fn fits_is_size_and_alignment() {
        const {
            assert!(Fit::<[u64; 4], crate::DefaultSpace>::FITS);
            assert!(!Fit::<[u64; 5], crate::DefaultSpace>::FITS);
            assert!(!Fit::<u8, crate::Align8<0>>::FITS);
            assert!(!Fit::<u128, crate::Align8<8>>::FITS);
        }
    }
}
