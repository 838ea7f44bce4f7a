//! Bit-field access in InfiniBand wire order and the `wire_struct!` macro that turns a table
//! of (field, bit offset, bit length, specification name) into a typed struct with `decode`,
//! `encode_into`, the table itself ([`FieldSpec`] rows) and one [`Slot`] per field.
//!
//! The IB specification numbers bits from the most significant bit of byte 0, and every
//! multi-byte field is big-endian; offsets below are in that numbering, so a layout can be
//! checked line by line against the specification's attribute tables. A field's name is the
//! one libibmad's field table gives it (what smpquery and perfquery print) where libibmad has
//! the field, else the specification's (SA records, MAD framing), else the C header's (the
//! umad header).

use std::marker::PhantomData;

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
    if bit_off % 8 == 0 && bits % 8 == 0 {
        // Whole bytes (most fields): big-endian bytes as they are, loaded at their width.
        // Copying a field of some length into a word first cost a call and a stalled load
        // per field, which showed at millions of counters a sweep.
        return Ok(match *slice {
            [b] => u64::from(b),
            [a, b] => u64::from(u16::from_be_bytes([a, b])),
            [a, b, c, d] => u64::from(u32::from_be_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
            _ => slice.iter().fold(0, |acc, &b| (acc << 8) | u64::from(b)),
        });
    }
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
    if bit_off % 8 == 0 && bits % 8 == 0 {
        let n = slice.len();
        slice.copy_from_slice(&value.to_be_bytes()[8 - n..]);
        return Ok(());
    }
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

/// What a field is, beyond its place in the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A value: a number, flag, key, nested structure or framed region.
    Value,
    /// A counter of a PerfMgt counters attribute: its kind and the PMA capability it needs.
    Counter(crate::attr::counter_facts::Counter),
}

/// One row of a layout table: where a field lies and what the specification calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// The field's name as libibmad's table (smpquery, perfquery) or the specification
    /// writes it, e.g. "SymbolErrorCounter", "LinkSpeedExtActive".
    pub name: &'static str,
    /// The Rust field name, e.g. "symbol_error_counter".
    pub rust_name: &'static str,
    /// Offset in IB bit numbering (0 = most significant bit of byte 0).
    pub bit_offset: usize,
    pub bit_width: usize,
    pub role: Role,
}

impl FieldSpec {
    /// The bytes the field touches.
    pub const fn bytes(&self) -> std::ops::Range<usize> {
        self.bit_offset / 8..(self.bit_offset + self.bit_width).div_ceil(8)
    }
    /// The largest value the field holds: a counter of this width stops there.
    pub const fn max(&self) -> u64 {
        if self.bit_width >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bit_width) - 1
        }
    }
    /// The counter facts of a counter field.
    pub const fn counter(&self) -> Option<crate::attr::counter_facts::Counter> {
        match self.role {
            Role::Counter(c) => Some(c),
            Role::Value => None,
        }
    }
}

/// The slot one field occupies in its layout: reads or writes that field in a buffer without
/// decoding the rest (the engine patches a MAD's TID and M_Key this way). `wire_struct!`
/// makes one per field, named as the field: `MadHeader::transaction_id`.
pub struct Slot<T> {
    pub spec: FieldSpec,
    /// "Struct.field", for encode errors.
    what: &'static str,
    _type: PhantomData<fn() -> T>,
}

impl<T> Slot<T> {
    pub const fn new(spec: FieldSpec, what: &'static str) -> Self {
        Slot {
            spec,
            what,
            _type: PhantomData,
        }
    }
}

impl<T: Field> Slot<T> {
    /// Read the field from `buf` (laid out as the whole structure).
    #[inline]
    pub fn read(&self, buf: &[u8]) -> Result<T, DecodeError> {
        T::read(buf, self.spec.bit_offset, self.spec.bit_width)
    }
    /// Write the field into `buf`; every other bit is kept.
    #[inline]
    pub fn write(&self, buf: &mut [u8], value: &T) -> Result<(), EncodeError> {
        value.write(buf, self.spec.bit_offset, self.spec.bit_width, self.what)
    }
}

impl Slot<Region> {
    /// The region's bytes in `buf`.
    pub fn bytes<'a>(&self, buf: &'a [u8]) -> Result<&'a [u8], DecodeError> {
        let range = self.spec.bytes();
        let end = range.end;
        buf.get(range).ok_or(DecodeError::Truncated {
            what: self.what,
            need: end,
            got: buf.len(),
        })
    }
    /// The region's bytes in `buf`, to fill in place.
    pub fn bytes_mut<'a>(&self, buf: &'a mut [u8]) -> Result<&'a mut [u8], EncodeError> {
        let range = self.spec.bytes();
        let (need, got) = (range.end, buf.len());
        buf.get_mut(range).ok_or(EncodeError::BufferTooSmall {
            what: self.what,
            need,
            got,
        })
    }
}

/// A decoded field's value, for code that walks a structure by its table (printing, the
/// counters of a counters attribute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// An integer or a flag (0 or 1).
    Uint(u64),
    /// A byte string: a GID, a key, text.
    Bytes(&'a [u8]),
    /// A nested structure's fields, by its own table.
    Struct(Vec<(&'static FieldSpec, FieldValue<'a>)>),
    /// A [`Region`]: framed by the layout, not held by the value.
    Region,
}

impl FieldValue<'_> {
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            FieldValue::Uint(v) => Some(*v),
            _ => None,
        }
    }
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
    /// The value as a table walker sees it.
    fn value(&self) -> FieldValue<'_>;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            #[inline]
            fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError> {
                const N: usize = std::mem::size_of::<$t>();
                // Most fields are whole aligned integers: read them as such (the branch folds
                // away once a slot's constant offset is inlined).
                if bit_off % 8 == 0 && bits == 8 * N {
                    return aligned::<N>(buf, bit_off).map(|b| <$t>::from_be_bytes(*b));
                }
                // `bits` never exceeds the type's width in a layout table, so this cannot truncate.
                Ok(get_bits(buf, bit_off, bits)? as $t)
            }
            #[inline]
            fn write(&self, buf: &mut [u8], bit_off: usize, bits: usize, what: &'static str)
                -> Result<(), EncodeError> {
                const N: usize = std::mem::size_of::<$t>();
                if bit_off % 8 == 0 && bits == 8 * N {
                    *aligned_mut::<N>(buf, bit_off, what)? = self.to_be_bytes();
                    return Ok(());
                }
                put_bits(buf, bit_off, bits, u64::from(*self), what)
            }
            fn value(&self) -> FieldValue<'_> {
                FieldValue::Uint(u64::from(*self))
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
    fn value(&self) -> FieldValue<'_> {
        FieldValue::Uint(u64::from(*self))
    }
}

/// The bytes `N` bytes long at byte-aligned `bit_off`, or the error of a buffer too short.
#[inline]
fn aligned<const N: usize>(buf: &[u8], bit_off: usize) -> Result<&[u8; N], DecodeError> {
    debug_assert!(bit_off % 8 == 0);
    let start = bit_off / 8;
    buf.get(start..start + N)
        .and_then(|s| s.try_into().ok())
        .ok_or(DecodeError::Truncated {
            what: "byte field",
            need: start + N,
            got: buf.len(),
        })
}

#[inline]
fn aligned_mut<'a, const N: usize>(
    buf: &'a mut [u8],
    bit_off: usize,
    what: &'static str,
) -> Result<&'a mut [u8; N], EncodeError> {
    debug_assert!(bit_off % 8 == 0);
    let start = bit_off / 8;
    let got = buf.len();
    buf.get_mut(start..start + N)
        .and_then(|s| s.try_into().ok())
        .ok_or(EncodeError::BufferTooSmall {
            what,
            need: start + N,
            got,
        })
}

/// Byte arrays (GIDs, keys) must start on a byte boundary; `bits` is `8 * N`.
impl<const N: usize> Field for [u8; N] {
    fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError> {
        debug_assert!(bits == 8 * N);
        aligned::<N>(buf, bit_off).copied()
    }
    fn write(
        &self,
        buf: &mut [u8],
        bit_off: usize,
        _bits: usize,
        what: &'static str,
    ) -> Result<(), EncodeError> {
        *aligned_mut::<N>(buf, bit_off, what)? = *self;
        Ok(())
    }
    fn value(&self) -> FieldValue<'_> {
        FieldValue::Bytes(self)
    }
}

/// A byte-aligned area a layout frames but a decoded value does not copy (a MAD's attribute
/// payload, a directed route's paths): read it in place with [`Slot::bytes`]. Decoding checks
/// only that it is there; encoding leaves it zero.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Region;

impl Field for Region {
    fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError> {
        let end = (bit_off + bits).div_ceil(8);
        need(buf, end, "region")?;
        Ok(Region)
    }
    fn write(&self, _: &mut [u8], _: usize, _: usize, _: &'static str) -> Result<(), EncodeError> {
        Ok(())
    }
    fn value(&self) -> FieldValue<'_> {
        FieldValue::Region
    }
}

/// An integer in the host's byte order rather than the wire's big-endian, byte-aligned: the
/// kernel's `struct ib_user_mad` keeps its agent, status, timeout, retry and length words
/// (and the P_Key index) so, as netlink and the ethtool ioctl keep all of theirs.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct HostOrder<T>(pub T);

macro_rules! host_field {
    ($($t:ty),*) => {$(
        impl Field for HostOrder<$t> {
            fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError> {
                const N: usize = std::mem::size_of::<$t>();
                debug_assert!(bits == 8 * N);
                aligned::<N>(buf, bit_off).map(|b| HostOrder(<$t>::from_ne_bytes(*b)))
            }
            fn write(&self, buf: &mut [u8], bit_off: usize, _bits: usize, what: &'static str)
                -> Result<(), EncodeError> {
                const N: usize = std::mem::size_of::<$t>();
                *aligned_mut::<N>(buf, bit_off, what)? = self.0.to_ne_bytes();
                Ok(())
            }
            fn value(&self) -> FieldValue<'_> {
                FieldValue::Uint(u64::from(self.0))
            }
        }
    )*};
}
host_field!(u16, u32, u64);

/// A structure with a layout of its own (a `wire_struct!`, or a codec written by hand such
/// as NodeDescription's) nested in another at a byte boundary: a NodeRecord holds a NodeInfo.
pub trait Nested: Sized {
    const WIRE_LEN: usize;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError>;
    fn encode_into(&self, buf: &mut [u8]) -> Result<(), EncodeError>;
    fn value(&self) -> FieldValue<'_>;
}

impl<T: Nested> Field for T {
    fn read(buf: &[u8], bit_off: usize, bits: usize) -> Result<Self, DecodeError> {
        debug_assert!(bit_off % 8 == 0 && bits == 8 * T::WIRE_LEN);
        let start = bit_off / 8;
        need(buf, start + T::WIRE_LEN, "nested structure")?;
        T::decode(&buf[start..])
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
        let dst = buf.get_mut(start..).ok_or(EncodeError::BufferTooSmall {
            what,
            need: start + T::WIRE_LEN,
            got,
        })?;
        self.encode_into(dst)
    }
    fn value(&self) -> FieldValue<'_> {
        Nested::value(self)
    }
}

/// The role of a table row: [`Role::Value`] unless the row names one.
#[doc(hidden)]
#[macro_export]
macro_rules! __wire_role {
    () => {
        $crate::wire::Role::Value
    };
    ($role:expr) => {
        $role
    };
}

/// Declare a wire structure as a layout table. Each row is
/// `pub field: Type = bit_offset, bit_width, "SpecName";` with an optional role after the
/// name (`, counter(Error, ALWAYS)`: see [`Role`]). Generates the struct (Debug, Clone,
/// PartialEq, Eq, Default, serde) plus
/// - `WIRE_LEN`, `decode(&[u8])`, `encode_into(&mut [u8])` (reserved bits zeroed),
///   `write_fields(&mut [u8])` (named fields only: for layouts that overlay another, as MAD
///   framing overlays the common header) and `to_bytes()`;
/// - `FIELDS`, the table as [`FieldSpec`] rows, and one [`Slot`] per field under the
///   field's own name (`Pair::word.read(buf)`);
/// - `fields()`, the decoded value's fields by table row, and `field("SpecName")`;
/// - [`Nested`], so the structure can be a field of another;
/// - with `attribute(Class, id, "Name")` after the length, the
///   [`Attribute`](crate::attribute::Attribute) impl: management class, attribute ID, name.
///
/// Bits not named in the table (reserved) decode as ignored and encode as zero.
///
/// ```
/// ibscope_mad::wire_struct! {
///     /// Example.
///     pub struct Pair (4) {
///         /// High nibble of byte 0.
///         pub hi: u8 = 0, 4, "High";
///         pub word: u16 = 16, 16, "Word";
///     }
/// }
/// let p = Pair::decode(&[0xa5, 0, 0x12, 0x34]).unwrap();
/// assert_eq!((p.hi, p.word), (0xa, 0x1234));
/// assert_eq!(p.to_bytes(), [0xa0, 0, 0x12, 0x34]);
/// assert_eq!(Pair::FIELDS[1].name, "Word");
/// assert_eq!(Pair::word.read(&[0, 0, 0xbe, 0xef]).unwrap(), 0xbeef);
/// assert_eq!(p.field("High").and_then(|v| v.as_u64()), Some(0xa));
/// ```
#[macro_export]
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident ($len:expr)
            $( attribute($class:ty, $id:expr, $attr_name:literal) )?
        {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty = $off:expr, $bits:expr, $spec:literal
                $(, $role:expr)? ; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default, $crate::__serde::Serialize, $crate::__serde::Deserialize)]
        #[serde(crate = "::ibscope_mad::__serde")]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        // One slot per field, named as the field (a value-namespace item beside the field).
        #[allow(non_upper_case_globals)]
        impl $name {
            $(
                #[doc = concat!("Where `", $spec, "` lies: read or write it alone.")]
                pub const $field: $crate::wire::Slot<$ty> = $crate::wire::Slot::new(
                    $crate::wire::FieldSpec {
                        name: $spec,
                        rust_name: stringify!($field),
                        bit_offset: $off,
                        bit_width: $bits,
                        role: $crate::__wire_role!($($role)?),
                    },
                    concat!(stringify!($name), ".", stringify!($field)),
                );
            )*
        }

        impl $name {
            /// Size of the structure on the wire, in bytes.
            pub const WIRE_LEN: usize = $len;

            /// The layout table, in declaration order.
            pub const FIELDS: &'static [$crate::wire::FieldSpec] = &[ $( Self::$field.spec ),* ];

            /// Decode from untrusted bytes (at least `WIRE_LEN`; more is ignored).
            pub fn decode(buf: &[u8]) -> ::core::result::Result<Self, $crate::DecodeError> {
                $crate::wire::need(buf, Self::WIRE_LEN, stringify!($name))?;
                Ok(Self {
                    $( $field: Self::$field.read(buf)?, )*
                })
            }

            /// Encode into the first `WIRE_LEN` bytes of `buf`, zeroing reserved bits.
            pub fn encode_into(&self, buf: &mut [u8]) -> ::core::result::Result<(), $crate::EncodeError> {
                let got = buf.len();
                buf.get_mut(..Self::WIRE_LEN)
                    .ok_or($crate::EncodeError::BufferTooSmall {
                        what: stringify!($name), need: Self::WIRE_LEN, got })?
                    .fill(0);
                self.write_fields(buf)
            }

            /// Write the named fields into `buf`, keeping every other bit.
            pub fn write_fields(&self, buf: &mut [u8]) -> ::core::result::Result<(), $crate::EncodeError> {
                if buf.len() < Self::WIRE_LEN {
                    return Err($crate::EncodeError::BufferTooSmall {
                        what: stringify!($name), need: Self::WIRE_LEN, got: buf.len() });
                }
                $( Self::$field.write(buf, &self.$field)?; )*
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

            /// Every field with its table row, in declaration order.
            pub fn fields(&self) -> impl Iterator<Item = (&'static $crate::wire::FieldSpec, $crate::wire::FieldValue<'_>)> + '_ {
                Self::FIELDS.iter().zip([ $( $crate::wire::Field::value(&self.$field) ),* ])
            }

            /// The field the table calls `name`.
            pub fn field(&self, name: &str) -> Option<$crate::wire::FieldValue<'_>> {
                self.fields().find(|(spec, _)| spec.name == name).map(|(_, v)| v)
            }
        }

        impl $crate::wire::Nested for $name {
            const WIRE_LEN: usize = $len;
            fn decode(buf: &[u8]) -> ::core::result::Result<Self, $crate::DecodeError> {
                Self::decode(buf)
            }
            fn encode_into(&self, buf: &mut [u8]) -> ::core::result::Result<(), $crate::EncodeError> {
                Self::encode_into(self, buf)
            }
            fn value(&self) -> $crate::wire::FieldValue<'_> {
                $crate::wire::FieldValue::Struct(self.fields().collect())
            }
        }

        $(
            impl $crate::attribute::Attribute for $name {
                type Class = $class;
                const ID: u16 = $id;
                const NAME: &'static str = $attr_name;
                fn decode(payload: &[u8]) -> ::core::result::Result<Self, $crate::DecodeError> {
                    Self::decode(payload)
                }
                fn encode_into(&self, payload: &mut [u8]) -> ::core::result::Result<(), $crate::EncodeError> {
                    Self::encode_into(self, payload)
                }
            }
        )?
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
    fn aligned_integers_agree_with_the_bit_path() {
        let buf: Vec<u8> = (1..=16u8).collect();
        for off in [0, 8, 16, 64] {
            let word = <u32 as Field>::read(&buf, off, 32).unwrap();
            assert_eq!(u64::from(word), get_bits(&buf, off, 32).unwrap());
            let long = <u64 as Field>::read(&buf, off, 64).unwrap();
            assert_eq!(long, get_bits(&buf, off, 64).unwrap());
        }
        let (mut fast, mut bitwise) = ([0xffu8; 12], [0xffu8; 12]);
        0x0102_0304u32.write(&mut fast, 32, 32, "t").unwrap();
        put_bits(&mut bitwise, 32, 32, 0x0102_0304, "t").unwrap();
        assert_eq!(fast, bitwise);
        assert!(<u64 as Field>::read(&buf, 72, 64).is_err());
        assert!(7u16.write(&mut fast, 88, 16, "t").is_err());
    }

    proptest::proptest! {
        /// Whole-byte fields of every width (the loads by width and the fold) read what
        /// the bit-by-bit path reads from the same bytes.
        #[test]
        fn whole_byte_fields_read_as_bits(
            buf in proptest::collection::vec(proptest::prelude::any::<u8>(), 8..24),
            at in 0usize..16,
            bytes in 1usize..=8,
        ) {
            let end = at + bytes;
            let got = get_bits(&buf, at * 8, bytes * 8);
            match buf.get(at..end) {
                Some(field) => {
                    let bitwise = field.iter().fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
                    proptest::prop_assert_eq!(got.ok(), Some(bitwise as u64));
                    // Off by one bit, the general path reads the bits after the first.
                    if bytes < 8 && end < buf.len() {
                        let shifted = get_bits(&buf, at * 8 + 1, bytes * 8).unwrap();
                        let next = u128::from(buf[end] >> 7);
                        let want = ((bitwise << 1) | next) & ((1u128 << (bytes * 8)) - 1);
                        proptest::prop_assert_eq!(u128::from(shifted), want);
                    }
                }
                None => proptest::prop_assert!(got.is_err()),
            }
        }
    }

    #[test]
    fn sixty_four_bits_unaligned() {
        let mut buf = [0u8; 9];
        put_bits(&mut buf, 4, 64, u64::MAX - 1, "t").unwrap();
        assert_eq!(get_bits(&buf, 4, 64).unwrap(), u64::MAX - 1);
    }
}
