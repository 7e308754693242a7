// The subset of Perfetto's trace schema the Perfetto exporter writes: field
// numbers and enum values, by message. Sources (github.com/google/perfetto,
// protos/perfetto/): trace/trace.proto, trace/trace_packet.proto,
// trace/trace_packet_defaults.proto, trace/clock_snapshot.proto,
// common/builtin_clock.proto, trace/interned_data/interned_data.proto,
// trace/profiling/profile_common.proto (InternedString),
// trace/track_event/{track_event,track_descriptor,process_descriptor,
// thread_descriptor,counter_descriptor,debug_annotation}.proto.
//
// Field numbers 1..15 take a one-byte key, 16..2047 two: the schema puts the
// per-event fields low, which is why a TrackEvent's extra_counter_track_uuids
// (31) cost a byte more each than its extra_counter_values (12).
#pragma once

#include <cstdint>

namespace psc::perfetto {

// Each message's numbers are one unnamed enum (or a few, by kind): field
// numbers first, then the values of its enums.

namespace trace {
enum : uint32_t { kPacket = 1 };
}

namespace packet {  // TracePacket
enum : uint32_t { kClockSnapshot = 6, kTimestamp = 8, kTrustedSequenceId = 10, kTrackEvent = 11 };
enum : uint32_t { kInternedData = 12, kSequenceFlags = 13 };
// bytes: a zlib stream (RFC 1950: deflate inside zlib's header and Adler-32
// trailer) of a serialized Trace, its packets each framed as Trace.packet (1).
// The tracing service writes it with deflateInit (src/tracing/service/
// zlib_compressor.cc); trace_processor inflates with windowBits 32 + 15, which
// takes a zlib or gzip header but not raw deflate (src/trace_processor/util/
// gzip_utils.cc), then parses each packet in its place. trace_packet.proto:
// each such outer packet "should be less than 512KB".
enum : uint32_t { kCompressedPackets = 50 };
// kDefaults: TracePacketDefaults.
enum : uint32_t { kTimestampClockId = 58, kDefaults = 59, kTrackDescriptor = 60 };
// TracePacket.SequenceFlags
enum : uint32_t { kIncrementalStateCleared = 1, kNeedsIncrementalState = 2 };
}  // namespace packet

namespace defaults {  // TracePacketDefaults
enum : uint32_t { kTimestampClockId = 58, kTrackEventDefaults = 11 };
}

namespace track_event_defaults {  // TrackEventDefaults: the TrackEvent's own numbers
enum : uint32_t { kTrackUuid = 11, kExtraCounterTrackUuids = 31 };
}

namespace clock_snapshot {  // ClockSnapshot
enum : uint32_t { kClocks = 1, kPrimaryTraceClock = 2 };
}

namespace clock {  // ClockSnapshot.Clock
enum : uint32_t { kId = 1, kTimestamp = 2, kIsIncremental = 3 };
// BuiltinClock; ids 64..127 are the writer's own, scoped to its sequence.
enum : uint32_t { kRealtime = 1, kMonotonic = 3, kFirstSequenceClock = 64 };
}  // namespace clock

namespace track {  // TrackDescriptor
enum : uint32_t { kUuid = 1, kName = 2, kProcess = 3, kThread = 4, kParentUuid = 5, kCounter = 8 };
}

namespace process {  // ProcessDescriptor
enum : uint32_t { kPid = 1, kName = 6 };
}

namespace thread {  // ThreadDescriptor
enum : uint32_t { kPid = 1, kTid = 2, kName = 5 };
}

namespace counter {  // CounterDescriptor
enum : uint32_t { kUnit = 3, kUnitSizeBytes = 3 };
}

namespace event {  // TrackEvent
enum : uint32_t { kDebugAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11, kExtraCounterValues = 12 };
enum : uint32_t { kName = 23, kCounterValue = 30, kExtraCounterTrackUuids = 31 };
// TrackEvent.Type
enum : uint32_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4 };
}  // namespace event

namespace annotation {  // DebugAnnotation; kStringIid: InternedData.debug_annotation_string_values
enum : uint32_t { kNameIid = 1, kUint = 3, kPointer = 7, kStringIid = 17 };
}

// InternedData and its entries: EventName, DebugAnnotationName, InternedString.
namespace interned {
enum : uint32_t { kEventNames = 2, kAnnotationNames = 3, kAnnotationStringValues = 29 };
// In all three; kName is EventName.name, DebugAnnotationName.name, InternedString.str.
enum : uint32_t { kIid = 1, kName = 2 };
}  // namespace interned

}  // namespace psc::perfetto
