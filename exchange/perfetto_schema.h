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

namespace trace {
constexpr uint32_t kPacket = 1;
}

namespace packet {  // TracePacket
constexpr uint32_t kClockSnapshot = 6;
constexpr uint32_t kTimestamp = 8;
constexpr uint32_t kTrustedSequenceId = 10;
constexpr uint32_t kTrackEvent = 11;
constexpr uint32_t kInternedData = 12;
constexpr uint32_t kSequenceFlags = 13;
// bytes: a zlib stream (RFC 1950: deflate inside zlib's header and Adler-32
// trailer) of a serialized Trace, its packets each framed as Trace.packet (1).
// The tracing service writes it with deflateInit (src/tracing/service/
// zlib_compressor.cc); trace_processor inflates with windowBits 32 + 15, which
// takes a zlib or gzip header but not raw deflate (src/trace_processor/util/
// gzip_utils.cc), then parses each packet in its place. trace_packet.proto:
// each such outer packet "should be less than 512KB".
constexpr uint32_t kCompressedPackets = 50;
constexpr uint32_t kTimestampClockId = 58;
constexpr uint32_t kDefaults = 59;  // TracePacketDefaults
constexpr uint32_t kTrackDescriptor = 60;
// TracePacket.SequenceFlags
constexpr uint32_t kIncrementalStateCleared = 1;
constexpr uint32_t kNeedsIncrementalState = 2;
}  // namespace packet

namespace defaults {  // TracePacketDefaults
constexpr uint32_t kTimestampClockId = 58;
constexpr uint32_t kTrackEventDefaults = 11;
}  // namespace defaults

namespace track_event_defaults {  // TrackEventDefaults: the TrackEvent's own numbers
constexpr uint32_t kTrackUuid = 11;
constexpr uint32_t kExtraCounterTrackUuids = 31;
}  // namespace track_event_defaults

namespace clock_snapshot {  // ClockSnapshot
constexpr uint32_t kClocks = 1;
constexpr uint32_t kPrimaryTraceClock = 2;
}  // namespace clock_snapshot

namespace clock {  // ClockSnapshot.Clock
constexpr uint32_t kId = 1;
constexpr uint32_t kTimestamp = 2;
constexpr uint32_t kIsIncremental = 3;
// BuiltinClock; ids 64..127 are the writer's own, scoped to its sequence.
constexpr uint32_t kRealtime = 1;
constexpr uint32_t kMonotonic = 3;
constexpr uint32_t kFirstSequenceClock = 64;
}  // namespace clock

namespace track {  // TrackDescriptor
constexpr uint32_t kUuid = 1;
constexpr uint32_t kName = 2;
constexpr uint32_t kProcess = 3;
constexpr uint32_t kThread = 4;
constexpr uint32_t kParentUuid = 5;
constexpr uint32_t kCounter = 8;
}  // namespace track

namespace process {  // ProcessDescriptor
constexpr uint32_t kPid = 1;
constexpr uint32_t kName = 6;
}  // namespace process

namespace thread {  // ThreadDescriptor
constexpr uint32_t kPid = 1;
constexpr uint32_t kTid = 2;
constexpr uint32_t kName = 5;
}  // namespace thread

namespace counter {  // CounterDescriptor
constexpr uint32_t kUnit = 3;
constexpr uint32_t kUnitSizeBytes = 3;
}  // namespace counter

namespace event {  // TrackEvent
constexpr uint32_t kDebugAnnotations = 4;
constexpr uint32_t kType = 9;
constexpr uint32_t kNameIid = 10;
constexpr uint32_t kTrackUuid = 11;
constexpr uint32_t kExtraCounterValues = 12;
constexpr uint32_t kName = 23;
constexpr uint32_t kCounterValue = 30;
constexpr uint32_t kExtraCounterTrackUuids = 31;
// TrackEvent.Type
constexpr uint32_t kSliceBegin = 1;
constexpr uint32_t kSliceEnd = 2;
constexpr uint32_t kInstant = 3;
constexpr uint32_t kCounter = 4;
}  // namespace event

namespace annotation {  // DebugAnnotation
constexpr uint32_t kNameIid = 1;
constexpr uint32_t kUint = 3;
constexpr uint32_t kPointer = 7;
constexpr uint32_t kStringIid = 17;  // InternedData.debug_annotation_string_values
}  // namespace annotation

namespace interned {                              // InternedData and its entries
constexpr uint32_t kEventNames = 2;               // EventName
constexpr uint32_t kAnnotationNames = 3;          // DebugAnnotationName
constexpr uint32_t kAnnotationStringValues = 29;  // InternedString
constexpr uint32_t kIid = 1;                      // in all three
constexpr uint32_t kName = 2;                     // EventName.name, DebugAnnotationName.name, InternedString.str
}  // namespace interned

}  // namespace psc::perfetto
