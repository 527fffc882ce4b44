//! Strict JSON reading for what clients send: every HTTP API body and every WebSocket command.
//!
//! serde's derive reads a JSON array into a struct field by field, so `{"limits":[5,7]}` would
//! be read as `{"limits":{"max_devices":5,"max_connections":7}}` and `{"limits":[null,null]}`
//! as "no limits": no client means that. [`from_slice`] and [`from_str`] read like
//! `serde_json::from_slice` and `serde_json::from_str`, through an adapter that wraps
//! serde_json's deserializer at every depth (each nested value, `Option`, newtype, array
//! element, map entry and enum variant) and refuses an array wherever a struct, a map or a
//! struct variant is expected: `limits: expected an object, not an array`.
//!
//! `null` is refused where an `Option` is read (`name: null is not allowed: leave the field
//! out`): the document has a field's type, and `null` is not a string or a number. A field that
//! takes `null` on purpose (a device patch's `user: null` removes the user) reads it through
//! [`nullable`], which the document marks `nullable: true`; a field whose type is any JSON
//! value (`serde_json::Value`, `RawValue`) reads `null` as that value.
//!
//! The error names where it went wrong (`messages[0].target`), found by
//! [`serde_path_to_error`] on a second read made only after the first one failed, so a good
//! document is read once, without path bookkeeping.
//!
//! What the adapter cannot see: serde buffers `#[serde(untagged)]` enums and
//! `#[serde(flatten)]` fields into its private `Content` and reads that with its own
//! deserializer, so a struct inside either is still read from an array. No body or command of
//! Herald has one (the one untagged enum read from clients, an app's `Rate`, holds a number or
//! a string); a new type that adds one must refuse arrays itself.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};
use serde::Deserialize;

/// What an array where an object belongs is answered with.
pub const NOT_AN_ARRAY: &str = "expected an object, not an array";

/// What `null` where an optional field's value belongs is answered with.
pub const NOT_NULL: &str = "null is not allowed: leave the field out";

/// The newtype name [`nullable`] asks for, which [`Strict`] reads as an `Option` that takes
/// `null`.
const NULLABLE: &str = "$herald::strict_json::Nullable";

/// `#[serde(default, deserialize_with = "herald_proto::strict_json::nullable")]` on an
/// `Option<Option<T>>` field that takes `null` on purpose: absent is `None`, `null` is
/// `Some(None)`, a value is `Some(Some(value))`. Read by any deserializer; the strict one lets
/// `null` through here only.
pub fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct NullableVisitor<T>(std::marker::PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Visitor<'de> for NullableVisitor<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a value or null")
        }

        fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
            T::deserialize(d).map(Some)
        }

        /// Another deserializer than [`Strict`] hands the newtype on as it is.
        fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
            Option::<T>::deserialize(d)
        }
    }

    d.deserialize_newtype_struct(NULLABLE, NullableVisitor(std::marker::PhantomData))
        .map(Some)
}

/// A document [`from_slice`] or [`from_str`] refused: serde_json's error, and where.
#[derive(Debug)]
pub struct Error {
    path: String,
    inner: serde_json::Error,
}

impl Error {
    /// Where the error is, as `limits` or `messages[0].target`; empty at the top level or when
    /// the document is not JSON.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// serde_json's own error.
    pub fn inner(&self) -> &serde_json::Error {
        &self.inner
    }
}

impl fmt::Display for Error {
    /// `path: message` (without serde_json's "at line L column C", which the path replaces);
    /// serde_json's message with its position when there is no path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            return write!(f, "{}", self.inner);
        }
        let text = self.inner.to_string();
        let position = format!(
            " at line {} column {}",
            self.inner.line(),
            self.inner.column()
        );
        let message = text.strip_suffix(&position).unwrap_or(&text);
        write!(f, "{}: {message}", self.path)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.inner)
    }
}

/// Reads `T` from JSON bytes, refusing an array where an object is expected (at any depth)
/// and anything after the value but whitespace.
pub fn from_slice<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, Error> {
    read(|| serde_json::Deserializer::from_slice(bytes))
}

/// [`from_slice`] for text.
pub fn from_str<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, Error> {
    read(|| serde_json::Deserializer::from_str(text))
}

fn read<'de, R, T>(start: impl Fn() -> serde_json::Deserializer<R>) -> Result<T, Error>
where
    R: serde_json::de::Read<'de>,
    T: Deserialize<'de>,
{
    let mut de = start();
    let inner = match T::deserialize(Strict(&mut de)).and_then(|value| de.end().map(|()| value)) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    // Read again, tracking the path, to say where. The same input fails at the same place; a
    // second read that succeeds failed only after the value (trailing characters): no path.
    let mut de = start();
    let mut track = serde_path_to_error::Track::new();
    let path = match T::deserialize(Strict(serde_path_to_error::Deserializer::new(
        &mut de, &mut track,
    ))) {
        Ok(_) => String::new(),
        Err(_) => track.path().to_string(),
    };
    let path = if path == "." { String::new() } else { path };
    Err(Error { path, inner })
}

/// The deserializer adapter: `D`, with every visitor it is given wrapped in [`Wrap`].
struct Strict<D>(D);

/// Forwards `deserialize_*` methods to the wrapped deserializer with the visitor wrapped.
macro_rules! forward {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Wrap::any(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit,
        deserialize_seq,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    /// serde_json refuses an array for a map itself, in its own words ("invalid type:
    /// sequence, expected a map"); read through `deserialize_any`, which answers an object
    /// exactly as `deserialize_map` does, the array reaches [`Wrap`] and is refused in the same
    /// words as for a struct. (This adapter only ever wraps serde_json.)
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(Wrap::object(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_struct(name, fields, Wrap::object(visitor))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, Wrap::any(visitor))
    }

    /// An optional field's value: `null` is refused (see the module's documentation).
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_option(Wrap::not_null(visitor))
    }

    /// [`nullable`]'s newtype is an `Option` that takes `null`; any other newtype is read as
    /// serde_json reads it.
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if name == NULLABLE {
            return self.0.deserialize_option(Wrap::any(visitor));
        }
        self.0.deserialize_newtype_struct(name, Wrap::any(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrap::any(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_tuple_struct(name, len, Wrap::any(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Wrap::any(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A visitor that hands on what it is given wrapped again (a nested deserializer, the elements
/// of an array, the entries of a map, an enum's variant), and, for a struct or a map
/// (`object`), refuses an array; for an optional field's value (`not_null`), refuses `null`.
struct Wrap<V> {
    inner: V,
    object: bool,
    not_null: bool,
}

impl<V> Wrap<V> {
    fn any(inner: V) -> Self {
        Wrap {
            inner,
            object: false,
            not_null: false,
        }
    }

    fn object(inner: V) -> Self {
        Wrap {
            inner,
            object: true,
            not_null: false,
        }
    }

    fn not_null(inner: V) -> Self {
        Wrap {
            inner,
            object: false,
            not_null: true,
        }
    }
}

/// Forwards `visit_*` methods of plain values to the wrapped visitor.
macro_rules! visit {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        if self.not_null {
            return Err(E::custom(NOT_NULL));
        }
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        if self.not_null {
            return Err(E::custom(NOT_NULL));
        }
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Strict(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Strict(d))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        if self.object {
            return Err(de::Error::custom(NOT_AN_ARRAY));
        }
        self.inner.visit_seq(Elements(seq))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Entries(map))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(Variants(data))
    }
}

/// A seed whose deserializer is wrapped in [`Strict`].
struct Seed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

/// An array's elements, each read strictly.
struct Elements<A>(A);

impl<'de, A: de::SeqAccess<'de>> de::SeqAccess<'de> for Elements<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// A map's (or struct's) entries, each key and value read strictly.
struct Entries<A>(A);

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for Entries<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Seed(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// An enum's variant name and content, read strictly: a struct variant refuses an array.
struct Variants<A>(A);

impl<'de, A: de::EnumAccess<'de>> de::EnumAccess<'de> for Variants<A> {
    type Error = A::Error;
    type Variant = Variants<A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(Seed(seed))?;
        Ok((value, Variants(variant)))
    }
}

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for Variants<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Seed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap::any(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Wrap::object(visitor))
    }
}

#[cfg(test)]
mod tests;
