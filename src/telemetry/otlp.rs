//! OTLP/HTTP span export that encodes the SDK's [`SpanData`] straight into protobuf bytes.
//!
//! The stock exporter first converts every span into `opentelemetry-proto`'s message structs
//! (copying each attribute key and string into a fresh `String`), then encodes them and drops
//! them: about half the CPU that exporting spans cost the harness. This writes the same
//! `ExportTraceServiceRequest` directly, field by field, from the spans as they are. The unit
//! tests check it byte-for-meaning against the stock conversion.
//!
//! Configuration is the standard environment, as for the stock exporter: the URL (see
//! [`traces_url`]), `OTEL_EXPORTER_OTLP_TRACES_HEADERS` or `OTEL_EXPORTER_OTLP_HEADERS`
//! (`key=value` pairs separated by commas, values URL-encoded). Requests use the process's
//! shared HTTP client ([`super::RuntimeHttp`]), whose timeout bounds each export.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue, USER_AGENT};
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_http::HttpClient as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use super::RuntimeHttp;

/// Exports spans as `application/x-protobuf` POSTs to one OTLP/HTTP traces URL.
#[derive(Debug)]
pub struct HttpSpanExporter {
    http: RuntimeHttp,
    url: http::Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The encoded `Resource` message and its schema URL, set by the span processor.
    resource: Vec<u8>,
    resource_schema: String,
}

/// The traces URL: a `--otlp-endpoint` base URL or `OTEL_EXPORTER_OTLP_ENDPOINT` with
/// `/v1/traces` appended, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is (the OTLP rules).
pub fn traces_url(flag: Option<&str>) -> Option<String> {
    let base = |url: &str| format!("{}/v1/traces", url.trim_end_matches('/'));
    if let Some(url) = flag {
        return Some(base(url));
    }
    super::env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| super::env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|url| base(&url)))
}

impl HttpSpanExporter {
    /// An exporter posting to `url`, with the headers the environment names.
    pub fn new(http: RuntimeHttp, url: &str) -> Result<Self, String> {
        let url: http::Uri = url
            .parse()
            .map_err(|e| format!("the traces URL {url:?} is not a valid URL: {e}"))?;
        if !matches!(url.scheme_str(), Some("http" | "https")) {
            return Err(format!(
                "the traces URL {url} must start with http:// or https://"
            ));
        }
        let compression = super::env("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION")
            .or_else(|| super::env("OTEL_EXPORTER_OTLP_COMPRESSION"));
        if let Some(other) = compression.filter(|c| c != "none") {
            return Err(format!(
                "OTLP compression {other:?} is not supported (unset OTEL_EXPORTER_OTLP_COMPRESSION or set it to none)"
            ));
        }
        let mut headers = vec![(
            USER_AGENT,
            HeaderValue::from_static(concat!("harness/", env!("CARGO_PKG_VERSION"))),
        )];
        let configured = super::env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| super::env("OTEL_EXPORTER_OTLP_HEADERS"));
        if let Some(list) = configured {
            headers.extend(parse_headers(&list)?);
        }
        let mut exporter = HttpSpanExporter {
            http,
            url,
            headers,
            resource: Vec::new(),
            resource_schema: String::new(),
        };
        exporter.set_resource(&Resource::builder_empty().build());
        Ok(exporter)
    }
}

/// Parses `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs separated by commas, each value
/// percent-decoded. A pair that is not `key=value`, or a header name or value HTTP cannot carry,
/// is an error naming it.
fn parse_headers(list: &str) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let mut headers = Vec::new();
    for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!(
                "OTLP header {pair:?} is not key=value (OTEL_EXPORTER_OTLP_HEADERS takes k1=v1,k2=v2)"
            ));
        };
        let value = percent_encoding::percent_decode_str(value.trim()).decode_utf8_lossy();
        let name = HeaderName::from_bytes(key.trim().as_bytes()).map_err(|_| {
            format!(
                "OTLP header name {:?} is not a valid header name",
                key.trim()
            )
        })?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| format!("the value of OTLP header {name} is not a valid header value"))?;
        headers.push((name, value));
    }
    Ok(headers)
}

impl SpanExporter for HttpSpanExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let body = encode_request(&batch, &self.resource, &self.resource_schema);
        drop(batch);
        let mut request = http::Request::post(self.url.clone())
            .header(CONTENT_TYPE, "application/x-protobuf")
            .body(Bytes::from(body))
            .map_err(|e| OTelSdkError::InternalFailure(e.to_string()))?;
        for (name, value) in &self.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        let response = self.http.send_bytes(request).await.map_err(|e| {
            OTelSdkError::InternalFailure(format!("OTLP export to {} failed: {e}", self.url))
        })?;
        if response.status().is_success() {
            Ok(())
        } else {
            let body = response.body();
            let excerpt = String::from_utf8_lossy(&body[..body.len().min(200)]);
            Err(OTelSdkError::InternalFailure(format!(
                "OTLP receiver at {} answered HTTP {}: {excerpt}",
                self.url,
                response.status()
            )))
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource.clear();
        for (key, value) in resource.iter() {
            put_key_value(&mut self.resource, 1, key.as_str(), value);
        }
        self.resource_schema = resource.schema_url().unwrap_or_default().to_owned();
    }
}

// Field numbers, from opentelemetry/proto/{collector/trace/v1/trace_service,trace/v1/trace,
// common/v1/common}.proto.
mod field {
    pub const REQUEST_RESOURCE_SPANS: u32 = 1;
    pub const RESOURCE_SPANS_RESOURCE: u32 = 1;
    pub const RESOURCE_SPANS_SCOPE_SPANS: u32 = 2;
    pub const RESOURCE_SPANS_SCHEMA_URL: u32 = 3;
    pub const SCOPE_SPANS_SCOPE: u32 = 1;
    pub const SCOPE_SPANS_SPANS: u32 = 2;
    pub const SCOPE_SPANS_SCHEMA_URL: u32 = 3;
    pub const SCOPE_NAME: u32 = 1;
    pub const SCOPE_VERSION: u32 = 2;
    pub const SCOPE_ATTRIBUTES: u32 = 3;
    pub const SPAN_TRACE_ID: u32 = 1;
    pub const SPAN_SPAN_ID: u32 = 2;
    pub const SPAN_TRACE_STATE: u32 = 3;
    pub const SPAN_PARENT_SPAN_ID: u32 = 4;
    pub const SPAN_NAME: u32 = 5;
    pub const SPAN_KIND: u32 = 6;
    pub const SPAN_START: u32 = 7;
    pub const SPAN_END: u32 = 8;
    pub const SPAN_ATTRIBUTES: u32 = 9;
    pub const SPAN_DROPPED_ATTRIBUTES: u32 = 10;
    pub const SPAN_EVENTS: u32 = 11;
    pub const SPAN_DROPPED_EVENTS: u32 = 12;
    pub const SPAN_LINKS: u32 = 13;
    pub const SPAN_DROPPED_LINKS: u32 = 14;
    pub const SPAN_STATUS: u32 = 15;
    pub const SPAN_FLAGS: u32 = 16;
    pub const EVENT_TIME: u32 = 1;
    pub const EVENT_NAME: u32 = 2;
    pub const EVENT_ATTRIBUTES: u32 = 3;
    pub const EVENT_DROPPED_ATTRIBUTES: u32 = 4;
    pub const LINK_TRACE_ID: u32 = 1;
    pub const LINK_SPAN_ID: u32 = 2;
    pub const LINK_TRACE_STATE: u32 = 3;
    pub const LINK_ATTRIBUTES: u32 = 4;
    pub const LINK_DROPPED_ATTRIBUTES: u32 = 5;
    pub const LINK_FLAGS: u32 = 6;
    pub const STATUS_MESSAGE: u32 = 2;
    pub const STATUS_CODE: u32 = 3;
    pub const KEY_VALUE_KEY: u32 = 1;
    pub const KEY_VALUE_VALUE: u32 = 2;
    pub const ANY_STRING: u32 = 1;
    pub const ANY_BOOL: u32 = 2;
    pub const ANY_INT: u32 = 3;
    pub const ANY_DOUBLE: u32 = 4;
    pub const ANY_ARRAY: u32 = 5;
    pub const ARRAY_VALUES: u32 = 1;
}

/// `SpanFlags`: the flags field always says whether the parent is remote.
const FLAGS_HAS_IS_REMOTE: u32 = 0x100;
const FLAGS_IS_REMOTE: u32 = 0x200;

/// Encodes one `ExportTraceServiceRequest` holding `spans`, grouped by instrumentation scope in
/// order of first appearance, under the resource `resource` (an encoded `Resource` body).
pub fn encode_request(spans: &[SpanData], resource: &[u8], resource_schema: &str) -> Vec<u8> {
    // Scopes in order of first appearance, each with the sizes of its spans.
    let mut scopes: Vec<(&InstrumentationScope, Vec<(usize, &SpanData)>)> = Vec::new();
    for span in spans {
        let size = span_len(span);
        match scopes
            .iter_mut()
            .find(|(scope, _)| **scope == span.instrumentation_scope)
        {
            Some((_, members)) => members.push((size, span)),
            None => scopes.push((&span.instrumentation_scope, vec![(size, span)])),
        }
    }
    let scope_spans_len = |scope: &InstrumentationScope, members: &[(usize, &SpanData)]| {
        message_len(field::SCOPE_SPANS_SCOPE, scope_len(scope))
            + members
                .iter()
                .map(|(size, _)| message_len(field::SCOPE_SPANS_SPANS, *size))
                .sum::<usize>()
            + string_len(
                field::SCOPE_SPANS_SCHEMA_URL,
                scope.schema_url().unwrap_or_default(),
            )
    };
    let resource_spans_len = message_len(field::RESOURCE_SPANS_RESOURCE, resource.len())
        + scopes
            .iter()
            .map(|(scope, members)| {
                message_len(
                    field::RESOURCE_SPANS_SCOPE_SPANS,
                    scope_spans_len(scope, members),
                )
            })
            .sum::<usize>()
        + string_len(field::RESOURCE_SPANS_SCHEMA_URL, resource_schema);

    let mut buf = Vec::with_capacity(message_len(
        field::REQUEST_RESOURCE_SPANS,
        resource_spans_len,
    ));
    put_message_header(&mut buf, field::REQUEST_RESOURCE_SPANS, resource_spans_len);
    put_message_header(&mut buf, field::RESOURCE_SPANS_RESOURCE, resource.len());
    buf.extend_from_slice(resource);
    for (scope, members) in &scopes {
        put_message_header(
            &mut buf,
            field::RESOURCE_SPANS_SCOPE_SPANS,
            scope_spans_len(scope, members),
        );
        put_message_header(&mut buf, field::SCOPE_SPANS_SCOPE, scope_len(scope));
        put_scope(&mut buf, scope);
        for (size, span) in members {
            put_message_header(&mut buf, field::SCOPE_SPANS_SPANS, *size);
            put_span(&mut buf, span);
        }
        put_string(
            &mut buf,
            field::SCOPE_SPANS_SCHEMA_URL,
            scope.schema_url().unwrap_or_default(),
        );
    }
    put_string(&mut buf, field::RESOURCE_SPANS_SCHEMA_URL, resource_schema);
    buf
}

// Each message has a `*_len` (the size of its body) and a `put_*` (writes its body); a message
// field is its key, its body's size, then its body. Scalars at their default value are left
// out, as protobuf 3 does, except inside `AnyValue`'s oneof, where the value is the point.

fn message_len(field: u32, body: usize) -> usize {
    key_len(field) + encoded_len_varint(body as u64) + body
}

fn put_message_header(buf: &mut Vec<u8>, field: u32, body: usize) {
    encode_key(field, WireType::LengthDelimited, buf);
    encode_varint(body as u64, buf);
}

fn bytes_len(field: u32, bytes: &[u8]) -> usize {
    if bytes.is_empty() {
        0
    } else {
        message_len(field, bytes.len())
    }
}

fn put_bytes(buf: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    if !bytes.is_empty() {
        put_message_header(buf, field, bytes.len());
        buf.extend_from_slice(bytes);
    }
}

fn string_len(field: u32, text: &str) -> usize {
    bytes_len(field, text.as_bytes())
}

fn put_string(buf: &mut Vec<u8>, field: u32, text: &str) {
    put_bytes(buf, field, text.as_bytes());
}

fn varint_len(field: u32, value: u64) -> usize {
    if value == 0 {
        0
    } else {
        key_len(field) + encoded_len_varint(value)
    }
}

fn put_varint(buf: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        encode_key(field, WireType::Varint, buf);
        encode_varint(value, buf);
    }
}

fn fixed64_len(field: u32, value: u64) -> usize {
    if value == 0 { 0 } else { key_len(field) + 8 }
}

fn put_fixed64(buf: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        encode_key(field, WireType::SixtyFourBit, buf);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

fn fixed32_len(field: u32, value: u32) -> usize {
    if value == 0 { 0 } else { key_len(field) + 4 }
}

fn put_fixed32(buf: &mut Vec<u8>, field: u32, value: u32) {
    if value != 0 {
        encode_key(field, WireType::ThirtyTwoBit, buf);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// One element of an attribute value: what an `AnyValue` holds.
#[derive(Clone, Copy)]
enum Scalar<'a> {
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(&'a str),
}

fn scalar_len(value: Scalar<'_>) -> usize {
    match value {
        Scalar::Bool(_) => key_len(field::ANY_BOOL) + 1,
        Scalar::Int(i) => key_len(field::ANY_INT) + encoded_len_varint(i as u64),
        Scalar::Double(_) => key_len(field::ANY_DOUBLE) + 8,
        Scalar::Str(s) => message_len(field::ANY_STRING, s.len()),
    }
}

fn put_scalar(buf: &mut Vec<u8>, value: Scalar<'_>) {
    match value {
        Scalar::Bool(b) => {
            encode_key(field::ANY_BOOL, WireType::Varint, buf);
            encode_varint(u64::from(b), buf);
        }
        Scalar::Int(i) => {
            encode_key(field::ANY_INT, WireType::Varint, buf);
            encode_varint(i as u64, buf);
        }
        Scalar::Double(d) => {
            encode_key(field::ANY_DOUBLE, WireType::SixtyFourBit, buf);
            buf.extend_from_slice(&d.to_bits().to_le_bytes());
        }
        Scalar::Str(s) => {
            put_message_header(buf, field::ANY_STRING, s.len());
            buf.extend_from_slice(s.as_bytes());
        }
    }
}

/// Calls `each` with every element of `array`.
fn for_each_element(array: &Array, mut each: impl FnMut(Scalar<'_>)) {
    match array {
        Array::Bool(values) => values.iter().for_each(|v| each(Scalar::Bool(*v))),
        Array::I64(values) => values.iter().for_each(|v| each(Scalar::Int(*v))),
        Array::F64(values) => values.iter().for_each(|v| each(Scalar::Double(*v))),
        Array::String(values) => values.iter().for_each(|v| each(Scalar::Str(v.as_str()))),
        // A kind of array newer than this code: its elements as one string.
        other => each(Scalar::Str(&other.to_string())),
    }
}

fn array_len(array: &Array) -> usize {
    let mut size = 0;
    for_each_element(array, |v| {
        size += message_len(field::ARRAY_VALUES, scalar_len(v))
    });
    size
}

/// The size of the `AnyValue` body holding `value`.
fn any_len(value: &Value) -> usize {
    match value {
        Value::Bool(b) => scalar_len(Scalar::Bool(*b)),
        Value::I64(i) => scalar_len(Scalar::Int(*i)),
        Value::F64(d) => scalar_len(Scalar::Double(*d)),
        Value::String(s) => scalar_len(Scalar::Str(s.as_str())),
        Value::Array(array) => message_len(field::ANY_ARRAY, array_len(array)),
        // A kind of value newer than this code: its text.
        other => scalar_len(Scalar::Str(&other.as_str())),
    }
}

fn put_any(buf: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Bool(b) => put_scalar(buf, Scalar::Bool(*b)),
        Value::I64(i) => put_scalar(buf, Scalar::Int(*i)),
        Value::F64(d) => put_scalar(buf, Scalar::Double(*d)),
        Value::String(s) => put_scalar(buf, Scalar::Str(s.as_str())),
        Value::Array(array) => {
            put_message_header(buf, field::ANY_ARRAY, array_len(array));
            for_each_element(array, |v| {
                put_message_header(buf, field::ARRAY_VALUES, scalar_len(v));
                put_scalar(buf, v);
            });
        }
        other => put_scalar(buf, Scalar::Str(&other.as_str())),
    }
}

fn key_value_len(key: &str, value: &Value) -> usize {
    key_value_body_len(key, any_len(value))
}

/// The length of a `KeyValue` whose `AnyValue` is `any` bytes long.
fn key_value_body_len(key: &str, any: usize) -> usize {
    string_len(field::KEY_VALUE_KEY, key) + message_len(field::KEY_VALUE_VALUE, any)
}

/// Writes one `KeyValue` as field `field` of the enclosing message.
fn put_key_value(buf: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    let any = any_len(value);
    put_message_header(buf, field, key_value_body_len(key, any));
    put_string(buf, field::KEY_VALUE_KEY, key);
    put_message_header(buf, field::KEY_VALUE_VALUE, any);
    put_any(buf, value);
}

fn attributes_len(field: u32, attributes: &[KeyValue]) -> usize {
    attributes
        .iter()
        .map(|kv| message_len(field, key_value_len(kv.key.as_str(), &kv.value)))
        .sum()
}

fn put_attributes(buf: &mut Vec<u8>, field: u32, attributes: &[KeyValue]) {
    for kv in attributes {
        put_key_value(buf, field, kv.key.as_str(), &kv.value);
    }
}

fn scope_len(scope: &InstrumentationScope) -> usize {
    string_len(field::SCOPE_NAME, scope.name())
        + string_len(field::SCOPE_VERSION, scope.version().unwrap_or_default())
        + scope
            .attributes()
            .map(|kv| {
                message_len(
                    field::SCOPE_ATTRIBUTES,
                    key_value_len(kv.key.as_str(), &kv.value),
                )
            })
            .sum::<usize>()
}

fn put_scope(buf: &mut Vec<u8>, scope: &InstrumentationScope) {
    put_string(buf, field::SCOPE_NAME, scope.name());
    put_string(
        buf,
        field::SCOPE_VERSION,
        scope.version().unwrap_or_default(),
    );
    for kv in scope.attributes() {
        put_key_value(buf, field::SCOPE_ATTRIBUTES, kv.key.as_str(), &kv.value);
    }
}

fn kind_number(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

/// The status code and message.
fn status_parts(status: &Status) -> (u64, &str) {
    match status {
        Status::Unset => (0, ""),
        Status::Ok => (1, ""),
        Status::Error { description } => (2, description),
    }
}

fn status_len(status: &Status) -> usize {
    let (code, message) = status_parts(status);
    string_len(field::STATUS_MESSAGE, message) + varint_len(field::STATUS_CODE, code)
}

fn event_len(event: &opentelemetry::trace::Event) -> usize {
    fixed64_len(field::EVENT_TIME, nanos(event.timestamp))
        + string_len(field::EVENT_NAME, &event.name)
        + attributes_len(field::EVENT_ATTRIBUTES, &event.attributes)
        + varint_len(
            field::EVENT_DROPPED_ATTRIBUTES,
            u64::from(event.dropped_attributes_count),
        )
}

fn link_flags(link: &opentelemetry::trace::Link) -> u32 {
    let mut flags = u32::from(link.span_context.trace_flags().to_u8()) | FLAGS_HAS_IS_REMOTE;
    if link.span_context.is_remote() {
        flags |= FLAGS_IS_REMOTE;
    }
    flags
}

fn link_len(link: &opentelemetry::trace::Link) -> usize {
    let context = &link.span_context;
    bytes_len(field::LINK_TRACE_ID, &context.trace_id().to_bytes())
        + bytes_len(field::LINK_SPAN_ID, &context.span_id().to_bytes())
        + string_len(field::LINK_TRACE_STATE, &context.trace_state().header())
        + attributes_len(field::LINK_ATTRIBUTES, &link.attributes)
        + varint_len(
            field::LINK_DROPPED_ATTRIBUTES,
            u64::from(link.dropped_attributes_count),
        )
        + fixed32_len(field::LINK_FLAGS, link_flags(link))
}

fn span_flags(span: &SpanData) -> u32 {
    let mut flags = u32::from(span.span_context.trace_flags().to_u8()) | FLAGS_HAS_IS_REMOTE;
    if span.parent_span_is_remote {
        flags |= FLAGS_IS_REMOTE;
    }
    flags
}

/// The parent id as written: nothing for a root span (whose parent id is all zeros).
fn parent_bytes(id: &[u8; 8]) -> &[u8] {
    if id == &[0; 8] { &[] } else { id }
}

fn span_len(span: &SpanData) -> usize {
    let context = &span.span_context;
    let parent = span.parent_span_id.to_bytes();
    bytes_len(field::SPAN_TRACE_ID, &context.trace_id().to_bytes())
        + bytes_len(field::SPAN_SPAN_ID, &context.span_id().to_bytes())
        + string_len(field::SPAN_TRACE_STATE, &context.trace_state().header())
        + bytes_len(field::SPAN_PARENT_SPAN_ID, parent_bytes(&parent))
        + fixed32_len(field::SPAN_FLAGS, span_flags(span))
        + string_len(field::SPAN_NAME, &span.name)
        + varint_len(field::SPAN_KIND, kind_number(&span.span_kind))
        + fixed64_len(field::SPAN_START, nanos(span.start_time))
        + fixed64_len(field::SPAN_END, nanos(span.end_time))
        + attributes_len(field::SPAN_ATTRIBUTES, &span.attributes)
        + varint_len(
            field::SPAN_DROPPED_ATTRIBUTES,
            u64::from(span.dropped_attributes_count),
        )
        + span
            .events
            .iter()
            .map(|e| message_len(field::SPAN_EVENTS, event_len(e)))
            .sum::<usize>()
        + varint_len(
            field::SPAN_DROPPED_EVENTS,
            u64::from(span.events.dropped_count),
        )
        + span
            .links
            .iter()
            .map(|l| message_len(field::SPAN_LINKS, link_len(l)))
            .sum::<usize>()
        + varint_len(
            field::SPAN_DROPPED_LINKS,
            u64::from(span.links.dropped_count),
        )
        + message_len(field::SPAN_STATUS, status_len(&span.status))
}

fn put_span(buf: &mut Vec<u8>, span: &SpanData) {
    let context = &span.span_context;
    let parent = span.parent_span_id.to_bytes();
    put_bytes(buf, field::SPAN_TRACE_ID, &context.trace_id().to_bytes());
    put_bytes(buf, field::SPAN_SPAN_ID, &context.span_id().to_bytes());
    put_string(
        buf,
        field::SPAN_TRACE_STATE,
        &context.trace_state().header(),
    );
    put_bytes(buf, field::SPAN_PARENT_SPAN_ID, parent_bytes(&parent));
    put_string(buf, field::SPAN_NAME, &span.name);
    put_varint(buf, field::SPAN_KIND, kind_number(&span.span_kind));
    put_fixed64(buf, field::SPAN_START, nanos(span.start_time));
    put_fixed64(buf, field::SPAN_END, nanos(span.end_time));
    put_attributes(buf, field::SPAN_ATTRIBUTES, &span.attributes);
    put_varint(
        buf,
        field::SPAN_DROPPED_ATTRIBUTES,
        u64::from(span.dropped_attributes_count),
    );
    for event in span.events.iter() {
        put_message_header(buf, field::SPAN_EVENTS, event_len(event));
        put_fixed64(buf, field::EVENT_TIME, nanos(event.timestamp));
        put_string(buf, field::EVENT_NAME, &event.name);
        put_attributes(buf, field::EVENT_ATTRIBUTES, &event.attributes);
        put_varint(
            buf,
            field::EVENT_DROPPED_ATTRIBUTES,
            u64::from(event.dropped_attributes_count),
        );
    }
    put_varint(
        buf,
        field::SPAN_DROPPED_EVENTS,
        u64::from(span.events.dropped_count),
    );
    for link in span.links.iter() {
        let context = &link.span_context;
        put_message_header(buf, field::SPAN_LINKS, link_len(link));
        put_bytes(buf, field::LINK_TRACE_ID, &context.trace_id().to_bytes());
        put_bytes(buf, field::LINK_SPAN_ID, &context.span_id().to_bytes());
        put_string(
            buf,
            field::LINK_TRACE_STATE,
            &context.trace_state().header(),
        );
        put_attributes(buf, field::LINK_ATTRIBUTES, &link.attributes);
        put_varint(
            buf,
            field::LINK_DROPPED_ATTRIBUTES,
            u64::from(link.dropped_attributes_count),
        );
        put_fixed32(buf, field::LINK_FLAGS, link_flags(link));
    }
    put_varint(
        buf,
        field::SPAN_DROPPED_LINKS,
        u64::from(span.links.dropped_count),
    );
    put_message_header(buf, field::SPAN_STATUS, status_len(&span.status));
    let (code, message) = status_parts(&span.status);
    put_string(buf, field::STATUS_MESSAGE, message);
    put_varint(buf, field::STATUS_CODE, code);
    put_fixed32(buf, field::SPAN_FLAGS, span_flags(span));
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::Duration;

    use opentelemetry::trace::{Event, Link, SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use opentelemetry::{Array, KeyValue, StringValue};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message as _;

    use super::*;

    fn context(trace: u128, span: u64, remote: bool) -> SpanContext {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            remote,
            TraceState::NONE,
        )
    }

    fn at(nanos: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(nanos)
    }

    /// Every kind of value, at its edges: negative and huge integers, zero, false, the empty
    /// string, non-ASCII text, each kind of array.
    fn attributes() -> Vec<KeyValue> {
        vec![
            KeyValue::new("text", "widget ✓"),
            KeyValue::new("empty", ""),
            KeyValue::new("zero", 0_i64),
            KeyValue::new("negative", -42_i64),
            KeyValue::new("big", i64::MAX),
            KeyValue::new("float", 2.5_f64),
            KeyValue::new("float.zero", 0.0_f64),
            KeyValue::new("no", false),
            KeyValue::new("yes", true),
            KeyValue::new("bools", Value::Array(Array::Bool(vec![true, false]))),
            KeyValue::new("ints", Value::Array(Array::I64(vec![0, -1, 300]))),
            KeyValue::new("floats", Value::Array(Array::F64(vec![0.5, -1.0]))),
            KeyValue::new(
                "strings",
                Value::Array(Array::String(vec![
                    StringValue::from("a"),
                    StringValue::from(""),
                ])),
            ),
            KeyValue::new("no.values", Value::Array(Array::I64(Vec::new()))),
        ]
    }

    fn span(
        scope: &InstrumentationScope,
        id: u64,
        parent: u64,
        remote_parent: bool,
        status: Status,
    ) -> SpanData {
        let mut events = SpanEvents::default();
        events.events = vec![
            Event::new("retry prompt sent", at(1_500), attributes(), 3),
            Event::new("bare", at(1_600), Vec::new(), 0),
        ];
        events.dropped_count = 7;
        let mut links = SpanLinks::default();
        links.links = vec![Link::new(
            context(0xfeed, 0xbeef, true),
            vec![KeyValue::new("link.kind", "follows")],
            1,
        )];
        links.dropped_count = 2;
        SpanData {
            span_context: context(0x0123_4567_89ab_cdef_0011_2233_4455_6677, id, false),
            parent_span_id: SpanId::from(parent),
            parent_span_is_remote: remote_parent,
            span_kind: if parent == 0 {
                SpanKind::Internal
            } else {
                SpanKind::Client
            },
            name: Cow::Owned(format!("span {id}")),
            start_time: at(1_000),
            end_time: at(2_000_000_000_123),
            attributes: attributes(),
            dropped_attributes_count: 5,
            events,
            links,
            status,
            instrumentation_scope: scope.clone(),
        }
    }

    fn resource() -> Resource {
        Resource::builder_empty()
            .with_schema_url(
                [
                    KeyValue::new("service.name", "harness"),
                    KeyValue::new("host.cores", 2_i64),
                ],
                "https://opentelemetry.io/schemas/1.26.0",
            )
            .build()
    }

    /// Encodes `spans` both ways and decodes ours: the messages must be equal.
    fn assert_same_as_stock(spans: Vec<SpanData>) {
        let resource = resource();
        let mut exporter_resource = Vec::new();
        for (key, value) in resource.iter() {
            put_key_value(&mut exporter_resource, 1, key.as_str(), value);
        }
        let ours = encode_request(
            &spans,
            &exporter_resource,
            resource.schema_url().unwrap_or_default(),
        );
        let decoded = ExportTraceServiceRequest::decode(ours.as_slice())
            .expect("our encoding decodes as an ExportTraceServiceRequest");
        let stock = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(
                spans,
                &ResourceAttributesWithSchema::from(&resource),
            ),
        };
        assert_eq!(decoded, stock);
        // Also the same size: nothing extra or missing on the wire.
        assert_eq!(ours.len(), stock.encoded_len());
    }

    #[test]
    fn spans_encode_as_the_stock_exporter_would() {
        let harness = InstrumentationScope::builder("harness")
            .with_version("0.1.0")
            .build();
        let other = InstrumentationScope::builder("other")
            .with_schema_url("https://example.com/schema")
            .with_attributes([KeyValue::new("scope.attr", 1_i64)])
            .build();
        assert_same_as_stock(vec![
            span(&harness, 1, 0, false, Status::Unset),
            span(&other, 2, 1, false, Status::Ok),
            span(
                &harness,
                3,
                1,
                true,
                Status::error("verification failed: no `id`"),
            ),
            span(&harness, 4, 3, false, Status::error("")),
        ]);
    }

    #[test]
    fn a_large_span_encodes_as_the_stock_exporter_would() {
        // Lengths past one varint byte (128) and two (16,384) at every level.
        let scope = InstrumentationScope::builder("harness").build();
        let mut big = span(&scope, 9, 0, false, Status::Unset);
        big.attributes
            .push(KeyValue::new("prompt", "x".repeat(20_000)));
        big.events
            .events
            .extend((0..200).map(|i| Event::new(format!("line {i}"), at(i), attributes(), 0)));
        assert_same_as_stock(vec![big]);
    }

    #[test]
    fn an_empty_batch_is_a_request_with_only_the_resource() {
        assert_same_as_stock(Vec::new());
    }

    #[test]
    fn headers_are_parsed_and_percent_decoded() {
        let headers = parse_headers("api-key=s3cr%20t , x-tenant=a=b,,").expect("valid");
        let pairs: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().expect("ascii").to_owned()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("api-key".to_owned(), "s3cr t".to_owned()),
                ("x-tenant".to_owned(), "a=b".to_owned()),
            ]
        );
        let err = parse_headers("api-key").expect_err("no value");
        assert!(err.contains("\"api-key\" is not key=value"), "{err}");
        let err = parse_headers("bad key=1").expect_err("space in a name");
        assert!(err.contains("not a valid header name"), "{err}");
    }

    #[test]
    fn traces_url_follows_the_otlp_rules() {
        assert_eq!(
            traces_url(Some("http://127.0.0.1:4318/")).as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
    }
}
