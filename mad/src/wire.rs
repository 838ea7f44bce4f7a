//! Bit-field access in InfiniBand wire order and the `wire_struct!` macro that turns a table
//! of (field, bit offset, bit length) into a typed struct with `decode` and `encode`.
//!
//! The IB specification numbers bits from the most significant bit of byte 0, and every
//! multi-byte field is big-endian; offsets below are in that numbering, so a layout can be
//! checked line by line against the specification's attribute tables.

use crate::error::{DecodeError, EncodeError};

/// Fail unless `buf` holds at least `need` bytes.
pub fn need(buf: &[u8], need: usize, what: &'static str) -> Result<(), DecodeError> {
    if buf.len() < need {
        Err(DecodeError::Truncated {
            what,
            need,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Read `bits` (1..=64) bits starting at bit `bit_off` (0 = MSB of byte 0), big-endian.
pub fn get_bits(buf: &[u8], bit_off: usize, bits: usize) -> Result<u64, DecodeError> {
    debug_assert!((1..=64).contains(&bits));
    let first = bit_off / 8;
    let end_bit = bit_off + bits;
    let last = end_bit.div_ceil(8);
    let slice = buf.get(first..last).ok_or(DecodeError::Truncated {
        what: "bit field",
        need: last,
        got: buf.len(),
    })?;
    let mut acc: u128 = 0;
    for &b in slice {
        acc = (acc << 8) | u128::from(b);
    }
    let shift = last * 8 - end_bit;
    let mask: u128 = (1u128 << bits) - 1;
    Ok(((acc >> shift) & mask) as u64)
}

/// Write `bits` bits of `value` at `bit_off`; other bits of the touched bytes are kept.
pub fn put_bits(
    buf: &mut [u8],
    bit_off: usize,
    bits: usize,
    value: u64,
    what: &'static str,
) -> Result<(), EncodeError> {
    debug_assert!((1..=64).contains(&bits));
    if bits < 64 && value >> bits != 0 {
        return Err(EncodeError::Overflow { what, value, bits });
    }
    let first = bit_off / 8;
    let end_bit = bit_off + bits;
    let last = end_bit.div_ceil(8);
    let got = buf.len();
    let slice = buf
        .get_mut(first..last)
        .ok_or(EncodeError::BufferTooSmall {
            what,
            need: last,
            got,
        })?;
    let mut acc: u128 = 0;
    for &b in slice.iter() {
        acc = (acc << 8) | u128::from(b);
    }
    let shift = last * 8 - end_bit;
    let mask: u128 = ((1u128 << bits) - 1) << shift;
    acc = (acc & !mask) | ((u128::from(value) << shift) & mask);
    for (i, b) in slice.iter_mut().rev().enumerate() {
        *b = (acc >> (8 * i)) as u8;
    }
    Ok(())
}

/// A type that can live in a bit field of a wire structure.
pub trait Field: Sized {
    fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError>;
    fn write(
        &self,
        buf: &mut [u8],
        bit_off: usize,
        bits: usize,
        what: &'static str,
    ) -> Result<(), EncodeError>;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError> {
                // `bits` never exceeds the type's width in a layout table, so this cannot truncate.
                Ok(get_bits(buf, bit_off, bits)? as $t)
            }
            fn write(&self, buf: &mut [u8], bit_off: usize, bits: usize, what: &'static str)
                -> Result<(), EncodeError> {
                put_bits(buf, bit_off, bits, u64::from(*self), what)
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64);

impl Field for bool {
    fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError> {
        Ok(get_bits(buf, bit_off, bits)? != 0)
    }
    fn write(
        &self,
        buf: &mut [u8],
        bit_off: usize,
        bits: usize,
        what: &'static str,
    ) -> Result<(), EncodeError> {
        put_bits(buf, bit_off, bits, u64::from(*self), what)
    }
}

/// Byte arrays (GIDs, keys) must start on a byte boundary; `bits` is `8 * N`.
impl<const N: usize> Field for [u8; N] {
    fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError> {
        debug_assert!(bit_off % 8 == 0 && bits == 8 * N);
        let start = bit_off / 8;
        let src = buf.get(start..start + N).ok_or(DecodeError::Truncated {
            what: "byte array",
            need: start + N,
            got: buf.len(),
        })?;
        let mut out = [0u8; N];
        out.copy_from_slice(src);
        Ok(out)
    }
    fn write(
        &self,
        buf: &mut [u8],
        bit_off: usize,
        _bits: usize,
        what: &'static str,
    ) -> Result<(), EncodeError> {
        let start = bit_off / 8;
        let got = buf.len();
        let dst = buf
            .get_mut(start..start + N)
            .ok_or(EncodeError::BufferTooSmall {
                what,
                need: start + N,
                got,
            })?;
        dst.copy_from_slice(self);
        Ok(())
    }
}

/// Declare a wire structure as a layout table. Generates the struct (Debug, Clone, PartialEq,
/// Eq, Default, serde) plus `WIRE_LEN`, `decode(&[u8])`, `encode_into(&mut [u8])` and
/// `to_bytes()`. Bits not named in the table (reserved) decode as ignored and encode as zero.
///
/// ```
/// ibscope_mad::wire_struct! {
///     /// Example.
///     pub struct Pair (4) {
///         /// High nibble of byte 0.
///         pub hi: u8 = 0, 4;
///         pub word: u16 = 16, 16;
///     }
/// }
/// let p = Pair::decode(&[0xa5, 0, 0x12, 0x34]).unwrap();
/// assert_eq!((p.hi, p.word), (0xa, 0x1234));
/// assert_eq!(p.to_bytes(), [0xa0, 0, 0x12, 0x34]);
/// ```
#[macro_export]
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident ($len:expr) {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty = $off:expr, $bits:expr; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default, $crate::__serde::Serialize, $crate::__serde::Deserialize)]
        #[serde(crate = "::ibscope_mad::__serde")]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            /// Size of the structure on the wire, in bytes.
            pub const WIRE_LEN: usize = $len;

            /// Decode from untrusted bytes (at least `WIRE_LEN`; more is ignored).
            pub fn decode(buf: &[u8]) -> ::core::result::Result<Self, $crate::DecodeError> {
                $crate::wire::need(buf, Self::WIRE_LEN, stringify!($name))?;
                Ok(Self {
                    $( $field: <$ty as $crate::wire::Field>::read(buf, $off, $bits)?, )*
                })
            }

            /// Encode into the first `WIRE_LEN` bytes of `buf`, zeroing reserved bits.
            pub fn encode_into(&self, buf: &mut [u8]) -> ::core::result::Result<(), $crate::EncodeError> {
                if buf.len() < Self::WIRE_LEN {
                    return Err($crate::EncodeError::BufferTooSmall {
                        what: stringify!($name), need: Self::WIRE_LEN, got: buf.len() });
                }
                buf[..Self::WIRE_LEN].fill(0);
                $( <$ty as $crate::wire::Field>::write(&self.$field, buf, $off, $bits,
                    concat!(stringify!($name), ".", stringify!($field)))?; )*
                Ok(())
            }

            /// Encode to a fresh array. Fails only if a field holds more bits than its slot.
            pub fn to_bytes(&self) -> [u8; $len] {
                let mut out = [0u8; $len];
                // Every field slot lies inside WIRE_LEN; an oversized value is masked by
                // debug builds' tests, so report it rather than panic in release.
                if let Err(e) = self.encode_into(&mut out) {
                    $crate::__tracing::warn!("encoding {}: {}", stringify!($name), e);
                }
                out
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_across_bytes() {
        let buf = [0b1010_1100, 0b0101_0011, 0xff];
        assert_eq!(get_bits(&buf, 0, 4).unwrap(), 0b1010);
        assert_eq!(get_bits(&buf, 4, 8).unwrap(), 0b1100_0101);
        assert_eq!(get_bits(&buf, 0, 24).unwrap(), 0xac53ff);
        assert!(get_bits(&buf, 20, 8).is_err());
    }

    #[test]
    fn put_keeps_neighbours() {
        let mut buf = [0xffu8; 3];
        put_bits(&mut buf, 4, 8, 0, "t").unwrap();
        assert_eq!(buf, [0xf0, 0x0f, 0xff]);
        assert!(put_bits(&mut buf, 0, 4, 16, "t").is_err());
        assert!(put_bits(&mut buf, 20, 8, 1, "t").is_err());
    }

    #[test]
    fn sixty_four_bits_unaligned() {
        let mut buf = [0u8; 9];
        put_bits(&mut buf, 4, 64, u64::MAX - 1, "t").unwrap();
        assert_eq!(get_bits(&buf, 4, 64).unwrap(), u64::MAX - 1);
    }
}
