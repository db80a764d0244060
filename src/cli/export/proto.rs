//! The spans of `render -d otlp` as the OTLP protobuf messages
//! (opentelemetry-proto's prost types): the same spans, another encoding.

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;

use proctrace::render::otlp::{self, batches, Export};

/// The export as encoded `ExportTraceServiceRequest`s within a
/// collector's limits, each with how many spans it holds.
pub fn requests(export: &Export) -> Vec<(usize, Vec<u8>)> {
    let spans: Vec<Span> = export.spans.iter().map(span).collect();
    let resource = Resource {
        attributes: export.resource.iter().map(key_value).collect(),
        ..Resource::default()
    };
    let batches = batches(spans.iter().map(Message::encoded_len));
    let mut spans = spans.into_iter();
    let requests = batches.into_iter().map(|batch| {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(resource.clone()),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "proctrace".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..InstrumentationScope::default()
                    }),
                    spans: spans.by_ref().take(batch.len()).collect(),
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        (batch.len(), request.encode_to_vec())
    });
    requests.collect()
}

/// The spans a response says were rejected, and why.
pub fn rejected(response: &[u8]) -> (u64, Option<String>) {
    let partial = ExportTraceServiceResponse::decode(response)
        .ok()
        .and_then(|r| r.partial_success);
    match partial {
        Some(p) => {
            let message = Some(p.error_message).filter(|m| !m.is_empty());
            (u64::try_from(p.rejected_spans).unwrap_or(0), message)
        }
        None => (0, None),
    }
}

fn span(span: &otlp::Span) -> Span {
    Span {
        trace_id: span.trace_id.to_vec(),
        span_id: span.span_id.to_vec(),
        parent_span_id: span
            .parent_span_id
            .map(|id| id.to_vec())
            .unwrap_or_default(),
        trace_state: span.trace_state.clone().unwrap_or_default(),
        name: span.name.to_string(),
        kind: i32::from(span.kind),
        start_time_unix_nano: span.start_time_unix_nano,
        end_time_unix_nano: span.end_time_unix_nano,
        attributes: span.attributes.iter().map(key_value).collect(),
        events: span.events.iter().map(event).collect(),
        dropped_events_count: u32::try_from(span.dropped_events_count).unwrap_or(u32::MAX),
        status: span.status.as_ref().map(|status| Status {
            code: i32::from(status.code),
            message: status.message.clone(),
        }),
        ..Span::default()
    }
}

fn event(event: &otlp::Event) -> span::Event {
    span::Event {
        time_unix_nano: event.time_unix_nano,
        name: event.name.to_string(),
        attributes: event.attributes.iter().map(key_value).collect(),
        ..span::Event::default()
    }
}

fn key_value(kv: &otlp::KeyValue) -> KeyValue {
    KeyValue {
        key: kv.key.to_string(),
        value: Some(any_value(&kv.value)),
    }
}

fn any_value(value: &otlp::AnyValue) -> AnyValue {
    let value = match value {
        otlp::AnyValue::Text(text) => any_value::Value::StringValue(text.to_string()),
        otlp::AnyValue::Int(int) => any_value::Value::IntValue(*int),
        otlp::AnyValue::Bool(bool) => any_value::Value::BoolValue(*bool),
        otlp::AnyValue::Array { values } => any_value::Value::ArrayValue(ArrayValue {
            values: values.iter().map(any_value).collect(),
        }),
    };
    AnyValue { value: Some(value) }
}
