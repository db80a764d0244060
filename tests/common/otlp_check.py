"""Reads `proctrace render -d otlp` output (one OTLP/JSON request per line)
from the file named by argv[1] and parses every line with the official
OTLP schema (opentelemetry-proto) into an ExportTraceServiceRequest,
refusing unknown fields. Prints one JSON line per span for the Rust test
to compare with the recording: ids, times, pid and status.

OTLP/JSON writes trace and span ids in hex where the protobuf JSON mapping
has base64 for bytes, so the ids are turned into base64 before parsing
(and must then be 16 and 8 bytes long).
"""

import base64
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def hex_ids_to_base64(span):
    for field in ID_FIELDS:
        if field in span:
            span[field] = base64.b64encode(bytes.fromhex(span[field])).decode()


def main(path):
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            request = json.loads(line)
            for resource in request["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        hex_ids_to_base64(span)
            parsed = json_format.Parse(
                json.dumps(request), ExportTraceServiceRequest()
            )
            for resource in parsed.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        print(json.dumps(summary(number, span)))


def summary(line, span):
    assert len(span.trace_id) == 16, span.trace_id
    assert len(span.span_id) == 8, span.span_id
    assert len(span.parent_span_id) in (0, 8), span.parent_span_id
    attributes = {a.key: json_format.MessageToDict(a.value) for a in span.attributes}
    return {
        "line": line,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "pid": int(attributes["process.pid"]["intValue"]),
        "status": span.status.code,
        "events": [event.name for event in span.events],
        "attributes": attributes,
    }


if __name__ == "__main__":
    main(sys.argv[1])
