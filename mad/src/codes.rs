//! Coded values: enumerations whose wire code, specification name and short name are
//! declared once, in one table per type, with `coded_enum!`. Everything that prints,
//! parses, serializes or compares such a value reads that table, so adding a state or a
//! node type is one line.
//!
//! A code the table does not name is kept as `Unknown(code)`: decoding never fails on a
//! value a newer specification (or a buggy device) sends, and it survives a round trip.

/// Declare a coded enumeration.
///
/// Each line is `Variant = code, "Spec name", "short";`. The macro adds an
/// `Unknown(code)` variant and generates `from_code`, `code`, `name` (the specification's
/// name, as smpquery prints it), `short` (for narrow columns), `parse` (either name, any
/// case), `KNOWN` (every named value in table order), `Display` (the name) and serde: a
/// value is written as its name (`"Unknown(7)"` for an unnamed code) and read from a name,
/// a short name, `"Unknown(N)"` or, for snapshots written before names, the bare code.
/// Variants are declared in rank order: the derived `Ord` compares by it.
///
/// ```
/// ibscope_mad::coded_enum! {
///     /// Example.
///     pub enum Colour: u8 {
///         Red = 1, "Red", "R";
///         Green = 2, "Green", "G";
///     }
/// }
/// assert_eq!(Colour::from_code(2), Colour::Green);
/// assert_eq!(Colour::from_code(9), Colour::Unknown(9));
/// assert_eq!(Colour::parse("g"), Some(Colour::Green));
/// assert_eq!(Colour::Unknown(9).to_string(), "Unknown(9)");
/// ```
#[macro_export]
macro_rules! coded_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident : $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal, $spec:literal, $short:literal; )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A code the specification table of this type does not name.
            Unknown($repr),
        }

        impl $name {
            /// Every named value, in table (rank) order.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),+];

            /// The value of a wire code; codes the table does not name are `Unknown`.
            pub const fn from_code(code: $repr) -> Self {
                match code {
                    $( $code => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
            /// The wire code.
            pub const fn code(self) -> $repr {
                match self {
                    $( $name::$variant => $code, )+
                    $name::Unknown(c) => c,
                }
            }
            /// The specification's name ("Unknown" for an unnamed code).
            pub const fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $spec, )+
                    $name::Unknown(_) => "Unknown",
                }
            }
            /// A short name for narrow columns.
            pub const fn short(self) -> &'static str {
                match self {
                    $( $name::$variant => $short, )+
                    $name::Unknown(_) => "?",
                }
            }
            /// The name of a value that may not have been read: "Unknown" where it was not.
            pub const fn name_of(value: Option<Self>) -> &'static str {
                match value {
                    Some(v) => v.name(),
                    None => "Unknown",
                }
            }
            /// Whether the table names this value.
            pub const fn is_known(self) -> bool {
                !matches!(self, $name::Unknown(_))
            }
            /// A named value from its name or short name, any case; also `Unknown(N)`.
            pub fn parse(text: &str) -> Option<Self> {
                let t = text.trim();
                if let Some(v) = Self::KNOWN
                    .iter()
                    .find(|v| v.name().eq_ignore_ascii_case(t) || v.short().eq_ignore_ascii_case(t))
                {
                    return Some(*v);
                }
                let inner = t.strip_prefix("Unknown(")?.strip_suffix(')')?;
                inner.parse::<$repr>().ok().map(Self::from_code)
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match self {
                    $name::Unknown(c) => write!(f, "Unknown({c})"),
                    other => f.write_str(other.name()),
                }
            }
        }

        impl $crate::__serde::Serialize for $name {
            fn serialize<S: $crate::__serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> $crate::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Visit;
                impl<'de> $crate::__serde::de::Visitor<'de> for Visit {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        write!(f, "a {} name or code", stringify!($name))
                    }
                    fn visit_str<E: $crate::__serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::parse(v).ok_or_else(|| {
                            E::custom(format!("{v:?} is not a {}", stringify!($name)))
                        })
                    }
                    fn visit_u64<E: $crate::__serde::de::Error>(self, v: u64) -> Result<$name, E> {
                        <$repr>::try_from(v).map($name::from_code).map_err(|_| {
                            E::custom(format!("{v} is out of range for {}", stringify!($name)))
                        })
                    }
                    fn visit_i64<E: $crate::__serde::de::Error>(self, v: i64) -> Result<$name, E> {
                        <$repr>::try_from(v).map($name::from_code).map_err(|_| {
                            E::custom(format!("{v} is out of range for {}", stringify!($name)))
                        })
                    }
                }
                d.deserialize_any(Visit)
            }
        }
    };
}

/// GUIDs in text and JSON: `0x` and 16 hex digits. JSON numbers above 2^53 are rounded by
/// common tools (jq, JavaScript), and every real GUID is above it, so a GUID is a string.
pub mod guid {
    use serde::{Deserialize, Deserializer, Serializer};

    /// `0x0002c90300000001`.
    pub fn text(guid: u64) -> String {
        text_in(guid, &mut [0; 18]).to_string()
    }

    /// [`text`] written into `buf`: JSON and the exporter's labels write a GUID per port
    /// reference, millions in a sweep's document or page, without a String each.
    pub fn text_in(guid: u64, buf: &mut [u8; 18]) -> &str {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        buf[..2].copy_from_slice(b"0x");
        for (i, b) in buf[2..].iter_mut().enumerate() {
            *b = DIGITS[((guid >> (60 - 4 * i)) & 0xf) as usize];
        }
        // ASCII by construction.
        std::str::from_utf8(buf).unwrap_or_default()
    }

    /// Parse `0x` + 1..=16 hex digits (or a decimal number): nothing after the digits.
    pub fn parse(text: &str) -> Option<u64> {
        let t = text.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) if !hex.is_empty() && hex.len() <= 16 => u64::from_str_radix(hex, 16).ok(),
            Some(_) => None,
            None => t.parse().ok(),
        }
    }

    /// serde `with` for a `u64` GUID: writes the hex string, reads it or a bare number
    /// (snapshots of schema version 1).
    pub fn serialize<S: Serializer>(guid: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(text_in(*guid, &mut [0; 18]))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        GuidRepr::deserialize(d)?.get()
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum GuidRepr {
        Number(u64),
        Text(String),
    }

    impl GuidRepr {
        fn get<E: serde::de::Error>(self) -> Result<u64, E> {
            match self {
                GuidRepr::Number(n) => Ok(n),
                GuidRepr::Text(t) => {
                    parse(&t).ok_or_else(|| E::custom(format!("{t:?} is not a GUID (0x + hex)")))
                }
            }
        }
    }

    /// serde `with` for `Vec<u64>` GUIDs.
    pub mod list {
        use super::GuidRepr;
        use serde::ser::SerializeSeq;
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(guids: &[u64], s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(guids.len()))?;
            for g in guids {
                seq.serialize_element(&super::text(*g))?;
            }
            seq.end()
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
            Vec::<GuidRepr>::deserialize(d)?
                .into_iter()
                .map(GuidRepr::get)
                .collect()
        }
    }

    /// serde `with` for `Option<u64>` GUIDs.
    pub mod option {
        use super::GuidRepr;
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(guid: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
            match guid {
                Some(g) => s.serialize_some(&super::text(*g)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            Option::<GuidRepr>::deserialize(d)?
                .map(GuidRepr::get)
                .transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::guid;

    crate::coded_enum! {
        /// Test table.
        pub enum TestCode: u8 {
            One = 1, "One", "1";
            Two = 2, "Two", "2";
        }
    }

    #[test]
    fn table_round_trips() {
        for code in 0..=255u8 {
            assert_eq!(TestCode::from_code(code).code(), code);
        }
        assert_eq!(TestCode::KNOWN, &[TestCode::One, TestCode::Two]);
        assert_eq!(TestCode::parse("two"), Some(TestCode::Two));
        assert_eq!(TestCode::parse("Unknown(9)"), Some(TestCode::Unknown(9)));
        assert_eq!(TestCode::parse("Three"), None);
        assert!(TestCode::One.is_known() && !TestCode::Unknown(3).is_known());
        assert_eq!(
            (
                TestCode::name_of(Some(TestCode::One)),
                TestCode::name_of(None)
            ),
            ("One", "Unknown")
        );
        assert_eq!(
            (TestCode::Two.short(), TestCode::Unknown(3).short()),
            ("2", "?")
        );
        assert!(TestCode::One < TestCode::Two && TestCode::Two < TestCode::Unknown(0));
    }

    #[test]
    fn serde_names_and_codes() {
        assert_eq!(serde_json::to_string(&TestCode::Two).unwrap(), "\"Two\"");
        assert_eq!(
            serde_json::to_string(&TestCode::Unknown(7)).unwrap(),
            "\"Unknown(7)\""
        );
        for text in ["\"Two\"", "\"2\"", "2"] {
            assert_eq!(
                serde_json::from_str::<TestCode>(text).unwrap(),
                TestCode::Two
            );
        }
        assert_eq!(
            serde_json::from_str::<TestCode>("\"Unknown(7)\"").unwrap(),
            TestCode::Unknown(7)
        );
        assert!(serde_json::from_str::<TestCode>("300").is_err());
        assert!(serde_json::from_str::<TestCode>("\"Nine\"").is_err());
    }

    #[test]
    fn guid_text_is_0x_and_16_lower_hex_digits() {
        for g in [0, 1, 0xe09d7303007a4bd8, u64::MAX, 0x0002_c903_0000_0001] {
            assert_eq!(guid::text(g), format!("{g:#018x}"));
        }
    }

    #[test]
    fn guids_are_hex_strings() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct G {
            #[serde(with = "guid")]
            g: u64,
            #[serde(with = "guid::list")]
            l: Vec<u64>,
        }
        let v = G {
            g: 0xe09d7303007a4bd8,
            l: vec![1],
        };
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(
            text,
            r#"{"g":"0xe09d7303007a4bd8","l":["0x0000000000000001"]}"#
        );
        assert_eq!(serde_json::from_str::<G>(&text).unwrap(), v);
        // Schema version 1 wrote bare numbers.
        let old: G = serde_json::from_str(r#"{"g":16185219092569541592,"l":[1]}"#).unwrap();
        assert_eq!(old, v);
        assert!(serde_json::from_str::<G>(r#"{"g":"0x9c05<x>","l":[]}"#).is_err());
        assert_eq!(guid::parse("0x9c05zz"), None);
        assert_eq!(guid::parse("0x00000000000000001"), None);
        assert_eq!(guid::text(0x2c9), "0x00000000000002c9");
    }
}
