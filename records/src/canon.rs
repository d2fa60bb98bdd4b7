//! Canonical JSON written straight from typed values, with no `serde_json::Value` in between.
//!
//! The canonical form is the one the seal, the events chain and the audit log hash
//! ([`write_canonical`]): compact, every object's members
//! sorted by key (byte order), a key given twice kept once with its last value, scalars as
//! `serde_json` writes them. [`write`] produces exactly the bytes `write_canonical` writes for
//! `serde_json::to_value` of the same value, without building that value: each object's member
//! values are written once, then put in order.
//!
//! [`Raw`] puts text that is already canonical in place (a column written before), and
//! [`members`] hands back an object's members one by one (the events chain hashes an event's
//! members apart from its envelope).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::Serialize;
use serde::ser::{self, Impossible};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Why a value has no canonical JSON: a map key that is not text or a number, or what the
/// value's own `Serialize` refused.
#[derive(Debug)]
pub(crate) struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

type Result<T = ()> = std::result::Result<T, Error>;

/// Appends the canonical JSON of `value` to `out`.
///
/// # Errors
/// When the value has no JSON form (see [`Error`]); `out` then holds part of it.
pub(crate) fn write<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result {
    value.serialize(Canonical::into(out))
}

/// The canonical JSON of `value` as text.
///
/// # Errors
/// As [`write`].
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut out = Vec::with_capacity(1024);
    write(value, &mut out)?;
    // Everything written is JSON text, and JSON text is UTF-8.
    String::from_utf8(out).map_err(|e| Error(e.to_string()))
}

/// Text that is already the canonical JSON of a value, put in place as it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Raw<'a>(pub(crate) &'a str);

/// The name [`Raw`] passes itself under, which [`Canonical`] recognises.
const RAW: &str = "$harness::canon::Raw";

/// The struct a `serde_json::Number` serialises as when `serde_json`'s `arbitrary_precision` is
/// on (a dependency turns it on): one member, the number's text.
const NUMBER: &str = "$serde_json::private::Number";

impl Serialize for Raw<'_> {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_newtype_struct(RAW, self.0)
    }
}

/// An object's members in canonical order, each value's canonical JSON.
#[derive(Debug, Default)]
pub(crate) struct Members {
    text: Vec<u8>,
    entries: Vec<(Cow<'static, str>, Range<usize>)>,
}

impl Members {
    /// The members, sorted by key, each with its value's canonical JSON.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.entries
            .iter()
            .map(|(key, range)| (key.as_ref(), &self.text[range.clone()]))
    }

    /// The canonical JSON of member `key`'s value.
    pub(crate) fn get(&self, key: &str) -> Option<&[u8]> {
        self.entries
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| &self.text[self.entries[i].1.clone()])
    }

    /// Appends the object of the members `keep` keeps, canonical.
    pub(crate) fn write_object(&self, out: &mut Vec<u8>, keep: impl Fn(&str) -> bool) {
        out.push(b'{');
        let mut first = true;
        for (key, value) in self.iter().filter(|(key, _)| keep(key)) {
            if !first {
                out.push(b',');
            }
            first = false;
            write_key(key, out);
            out.extend_from_slice(value);
        }
        out.push(b'}');
    }
}

/// The members of `value`, which serialises as an object.
///
/// # Errors
/// When it is not an object, or has no JSON form.
pub(crate) fn members<T: Serialize + ?Sized>(value: &T) -> Result<Members> {
    let mut members = Members {
        text: Vec::with_capacity(512),
        entries: Vec::new(),
    };
    value.serialize(Canonical {
        out: &mut members.text,
        capture: Some(&mut members.entries),
        raw: false,
    })?;
    // An object leaves its members in `entries` (an empty one, nothing at all); anything else
    // writes its text.
    if members.entries.is_empty() && !members.text.is_empty() {
        return Err(Error("not an object".to_owned()));
    }
    Ok(members)
}

fn write_key(key: &str, out: &mut Vec<u8>) {
    // Writing a string into a vector cannot fail.
    let _ = serde_json::to_writer(&mut *out, key);
    out.push(b':');
}

/// A scalar as `serde_json` writes it.
fn scalar<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result {
    serde_json::to_writer(out, value).map_err(|e| Error(e.to_string()))
}

/// Scalar methods of [`Canonical`]: each value as `serde_json` writes it.
macro_rules! written_as_serde_json_writes {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result {
            scalar(&v, self.out)
        }
    )*};
}

/// Scalar methods of [`KeyText`]: each value written out as text.
macro_rules! written_out {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<String> {
            Ok(v.to_string())
        }
    )*};
}

/// The serializer: writes into `out`; an object at the top of a [`members`] call leaves its
/// member values unsorted in `out` and their keys and places in `capture`.
struct Canonical<'a> {
    out: &'a mut Vec<u8>,
    capture: Option<&'a mut Vec<(Cow<'static, str>, Range<usize>)>>,
    /// The text of a [`Raw`] comes next.
    raw: bool,
}

impl<'a> Canonical<'a> {
    /// Writes a value into `out`.
    fn into(out: &'a mut Vec<u8>) -> Self {
        Canonical {
            out,
            capture: None,
            raw: false,
        }
    }

    fn object(self, len: Option<usize>) -> Object<'a> {
        let start = self.out.len();
        Object {
            out: self.out,
            start,
            entries: Vec::with_capacity(len.unwrap_or(8)),
            key: None,
            capture: self.capture,
            variant: None,
            number: false,
        }
    }

    fn array(self) -> Array<'a> {
        self.out.push(b'[');
        Array {
            out: self.out,
            first: true,
            variant: false,
        }
    }

    /// `{"variant":` … for an enum's newtype, tuple and struct variants.
    fn open_variant(&mut self, variant: &str) {
        self.out.push(b'{');
        write_key(variant, self.out);
    }
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    written_as_serde_json_writes! {
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128
    }
    fn serialize_f32(self, v: f32) -> Result {
        // As a `Value` holds it (widened to f64, or its own shortest text under
        // `arbitrary_precision`; non-finite is `null`).
        scalar(
            &serde_json::to_value(v).map_err(|e| Error(e.to_string()))?,
            self.out,
        )
    }
    written_as_serde_json_writes! { serialize_f64: f64, serialize_char: char }
    fn serialize_str(self, v: &str) -> Result {
        if self.raw {
            self.out.extend_from_slice(v.as_bytes());
            return Ok(());
        }
        scalar(v, self.out)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result {
        scalar(v, self.out)
    }
    fn serialize_none(self) -> Result {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result {
        scalar(variant, self.out)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result {
        let raw = name == RAW;
        value.serialize(Canonical { raw, ..self })
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.open_variant(variant);
        value.serialize(Canonical::into(self.out))?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Array<'a>> {
        Ok(self.array())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Array<'a>> {
        Ok(self.array())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Array<'a>> {
        Ok(self.array())
    }
    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Array<'a>> {
        self.open_variant(variant);
        let mut array = Canonical::into(self.out).array();
        array.variant = true;
        Ok(array)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Object<'a>> {
        Ok(self.object(len))
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Object<'a>> {
        let mut object = self.object(Some(len));
        object.number = name == NUMBER;
        Ok(object)
    }
    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Object<'a>> {
        self.open_variant(variant);
        let mut object = Canonical::into(self.out).object(Some(len));
        object.variant = Some(());
        Ok(object)
    }
}

/// An array being written.
pub(crate) struct Array<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// Closes an enum variant's `{"variant":` too.
    variant: bool,
}

impl Array<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Canonical::into(self.out))
    }

    fn close(self) {
        self.out.push(b']');
        if self.variant {
            self.out.push(b'}');
        }
    }
}

/// The `serde` traits of a list-like value, each one item at a time.
macro_rules! array_traits {
    ($($trait:ident: $method:ident),*) => {$(
        impl ser::$trait for Array<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
                self.item(value)
            }
            fn end(self) -> Result {
                self.close();
                Ok(())
            }
        }
    )*};
}

array_traits!(
    SerializeSeq: serialize_element,
    SerializeTuple: serialize_element,
    SerializeTupleStruct: serialize_field,
    SerializeTupleVariant: serialize_field
);

/// An object being written: its member values go to `out` as they come, then are put in key
/// order when it ends.
pub(crate) struct Object<'a> {
    out: &'a mut Vec<u8>,
    /// Where its text starts in `out`.
    start: usize,
    entries: Vec<(Cow<'static, str>, Range<usize>)>,
    /// The key of the member whose value comes next (`serialize_key`, then `serialize_value`).
    key: Option<Cow<'static, str>>,
    capture: Option<&'a mut Vec<(Cow<'static, str>, Range<usize>)>>,
    /// Closes an enum variant's `{"variant":` too.
    variant: Option<()>,
    /// A `serde_json::Number` (see [`NUMBER`]): its one member is its text, written as it is.
    number: bool,
}

impl Object<'_> {
    fn member<T: Serialize + ?Sized>(&mut self, key: Cow<'static, str>, value: &T) -> Result {
        if self.number {
            return value.serialize(Canonical {
                raw: true,
                ..Canonical::into(self.out)
            });
        }
        let from = self.out.len();
        value.serialize(Canonical::into(self.out))?;
        self.entries.push((key, from..self.out.len()));
        Ok(())
    }

    fn close(mut self) {
        if self.number {
            return;
        }
        // Sorted by key, stably: of a key given twice, the last is kept (as a `Value` keeps it).
        self.entries.sort_by(|(a, _), (b, _)| a.cmp(b));
        self.entries.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                std::mem::swap(later, earlier);
                true
            } else {
                false
            }
        });
        if let Some(capture) = self.capture {
            *capture = self.entries;
            return;
        }
        let values = self.out.split_off(self.start);
        self.out.reserve(values.len() + self.entries.len() * 16 + 2);
        self.out.push(b'{');
        for (i, (key, range)) in self.entries.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            write_key(key, self.out);
            let values = &values[range.start - self.start..range.end - self.start];
            self.out.extend_from_slice(values);
        }
        self.out.push(b'}');
        if self.variant.is_some() {
            self.out.push(b'}');
        }
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result {
        self.key = Some(Cow::Owned(key.serialize(KeyText)?));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        let key = self
            .key
            .take()
            .ok_or_else(|| Error("a map value without its key".to_owned()))?;
        self.member(key, value)
    }
    fn end(self) -> Result {
        self.close();
        Ok(())
    }
}

/// The `serde` traits of a value with named members.
macro_rules! struct_traits {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Object<'_> {
            type Ok = ();
            type Error = Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result {
                self.member(Cow::Borrowed(key), value)
            }
            fn end(self) -> Result {
                self.close();
                Ok(())
            }
        }
    )*};
}

struct_traits!(SerializeStruct, SerializeStructVariant);

/// A map key as the text `serde_json` makes of it: text as it is, numbers, booleans and
/// characters written out, a unit variant by its name.
struct KeyText;

impl KeyText {
    fn refuse(what: &str) -> Error {
        Error(format!("a map key must be text or a number, not {what}"))
    }
}

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = Impossible<String, Error>;
    type SerializeTuple = Impossible<String, Error>;
    type SerializeTupleStruct = Impossible<String, Error>;
    type SerializeTupleVariant = Impossible<String, Error>;
    type SerializeMap = Impossible<String, Error>;
    type SerializeStruct = Impossible<String, Error>;
    type SerializeStructVariant = Impossible<String, Error>;

    written_out! {
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_char: char
    }
    fn serialize_f32(self, _v: f32) -> Result<String> {
        Err(Self::refuse("a float"))
    }
    fn serialize_f64(self, _v: f64) -> Result<String> {
        Err(Self::refuse("a float"))
    }
    fn serialize_str(self, v: &str) -> Result<String> {
        Ok(v.to_owned())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<String> {
        Err(Self::refuse("bytes"))
    }
    fn serialize_none(self) -> Result<String> {
        Err(Self::refuse("null"))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String> {
        Err(Self::refuse("an option"))
    }
    fn serialize_unit(self) -> Result<String> {
        Err(Self::refuse("null"))
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String> {
        Err(Self::refuse("null"))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String> {
        Err(Self::refuse("an enum variant with a value"))
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(Self::refuse("a list"))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(Self::refuse("a list"))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(Self::refuse("a list"))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(Self::refuse("a list"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(Self::refuse("an object"))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(Self::refuse("an object"))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(Self::refuse("an object"))
    }
}

/// The `prev_hash` of the first audit row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The canonical JSON of `value`: object keys sorted, no whitespace — the bytes a hash covers.
pub fn canonical(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // Only JSON text was written: UTF-8 by construction.
    String::from_utf8(out).unwrap_or_default()
}

/// Writes `value` as canonical JSON — compact, every object's keys in byte order — to `out`:
/// what [`canonical`] returns, streamed (into a hash, say) without a sorted copy of the value.
pub(crate) fn write_canonical(value: &Value, out: &mut impl std::io::Write) {
    match value {
        Value::Object(map) => {
            // The members sorted by key as they are, not the keys sorted and each looked up.
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by_key(|(k, _)| *k);
            write_object(members.into_iter().map(|(k, v)| (k.as_str(), v)), out);
        }
        Value::Array(items) => {
            let _ = out.write_all(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                write_canonical(item, out);
            }
            let _ = out.write_all(b"]");
        }
        // A scalar is written as `to_string` writes it.
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// Writes an object of `members`, given in the order they are to appear (sorted, for canonical
/// JSON), each value canonical.
pub(crate) fn write_object<'v>(
    members: impl Iterator<Item = (&'v str, &'v Value)>,
    out: &mut impl std::io::Write,
) {
    let _ = out.write_all(b"{");
    for (i, (key, value)) in members.enumerate() {
        if i > 0 {
            let _ = out.write_all(b",");
        }
        let _ = serde_json::to_writer(&mut *out, key);
        let _ = out.write_all(b":");
        write_canonical(value, out);
    }
    let _ = out.write_all(b"}");
}

/// A hash that canonical JSON is written into (what [`write_canonical`] writes, hashed as it
/// goes).
pub(crate) struct Hashing(pub(crate) Sha256);

impl std::io::Write for Hashing {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::collections::BTreeMap;

    /// What the seal has always hashed: the value made a `Value`, written canonically.
    fn through_value<T: Serialize>(value: &T) -> String {
        let mut out = Vec::new();
        write_canonical(&serde_json::to_value(value).expect("a value"), &mut out);
        String::from_utf8(out).expect("UTF-8")
    }

    fn direct<T: Serialize>(value: &T) -> String {
        to_string(value).expect("canonical")
    }

    #[derive(Serialize)]
    struct Envelope {
        zeta: u32,
        alpha: &'static str,
        #[serde(flatten)]
        event: Happening,
        middle: Option<f64>,
    }

    #[derive(Serialize)]
    #[serde(tag = "type")]
    enum Happening {
        Started {
            plan: Vec<String>,
            citations: bool,
        },
        Ended {
            outcome: String,
            extra: BTreeMap<u32, Vec<f32>>,
        },
    }

    #[derive(Serialize)]
    enum External {
        Unit,
        Newtype(Value),
        Tuple(i8, String),
        Struct { b: bool, a: Option<u128> },
    }

    #[test]
    fn writes_what_the_canonical_writer_writes_of_the_same_value() {
        let values = [
            json!(null),
            json!({}),
            json!([]),
            json!({"b": 1, "a": [3, {"z": null, "y": "tab\there \u{0} \u{2603} \"q\""}], "": -0.0}),
            json!({"ratios": [0.1, 0.30000000000000004, 5e-324, 1.7976931348623157e308, 161739.68473952299]}),
            json!({"big": u64::MAX, "neg": i64::MIN, "é": "ü", "e": 1, "\u{7f}": true}),
        ];
        for value in &values {
            assert_eq!(direct(value), through_value(value), "{value}");
        }
        let typed = vec![
            Envelope {
                zeta: 7,
                alpha: "a",
                event: Happening::Started {
                    plan: vec!["read".into(), "write".into()],
                    citations: true,
                },
                middle: Some(f64::NAN),
            },
            Envelope {
                zeta: 0,
                alpha: "",
                event: Happening::Ended {
                    outcome: "passed".into(),
                    extra: BTreeMap::from([(10, vec![0.1, f32::INFINITY]), (2, vec![])]),
                },
                middle: None,
            },
        ];
        assert_eq!(direct(&typed), through_value(&typed));
        let variants = [
            External::Unit,
            External::Newtype(json!({"y": 1, "x": 2})),
            External::Tuple(-3, "t".into()),
            External::Struct {
                b: false,
                a: Some(u128::from(u64::MAX)),
            },
        ];
        for variant in &variants {
            assert_eq!(direct(variant), through_value(variant));
        }
    }

    #[test]
    fn a_key_given_twice_keeps_its_last_value_as_a_value_does() {
        #[derive(Serialize)]
        struct Twice {
            #[serde(flatten)]
            first: BTreeMap<&'static str, u8>,
            #[serde(flatten)]
            second: BTreeMap<&'static str, u8>,
        }
        let twice = Twice {
            first: BTreeMap::from([("k", 1), ("a", 0)]),
            second: BTreeMap::from([("k", 2)]),
        };
        assert_eq!(direct(&twice), r#"{"a":0,"k":2}"#);
        assert_eq!(direct(&twice), through_value(&twice));
    }

    #[test]
    fn raw_text_is_put_in_place_and_members_come_sorted() {
        let inner = direct(&json!({"b": [1], "a": "x"}));
        let outer = json!({"z": 1});
        let mut out = Vec::new();
        write(&BTreeMap::from([("in", Raw(&inner))]), &mut out).expect("canonical");
        assert_eq!(out, br#"{"in":{"a":"x","b":[1]}}"#);
        assert_eq!(direct(&outer), r#"{"z":1}"#);

        let event = json!({"seq": 3, "run_id": "d-1", "type": "X", "data_key": {"q": 1, "p": 2}});
        let members = members(&event).expect("an object");
        let keys: Vec<&str> = members.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["data_key", "run_id", "seq", "type"]);
        assert_eq!(members.get("data_key"), Some(&br#"{"p":2,"q":1}"#[..]));
        assert_eq!(members.get("attempt"), None);
        let mut rest = Vec::new();
        members.write_object(&mut rest, |k| k != "run_id" && k != "seq");
        assert_eq!(rest, br#"{"data_key":{"p":2,"q":1},"type":"X"}"#);
        assert!(super::members(&json!([1])).is_err());
        assert_eq!(super::members(&json!({})).expect("empty").iter().count(), 0);
    }

    #[test]
    fn a_key_that_is_not_text_or_a_number_is_refused() {
        let mut map = BTreeMap::new();
        map.insert(vec![1], 2);
        assert!(to_string(&map).is_err());
        assert_eq!(
            direct(&BTreeMap::from([(true, 1), (false, 0)])),
            r#"{"false":0,"true":1}"#
        );
    }
}
