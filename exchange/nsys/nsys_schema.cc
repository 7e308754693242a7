#include "exchange/nsys/nsys_schema.h"

#include <string>
#include <utility>

#include "traces/reader.h"

namespace psc::nsys {

Api api_of(std::string_view function) {
  // Nsight names runtime functions with their version: "cudaMalloc_v3020".
  const size_t v = function.rfind("_v");
  if (v != std::string_view::npos && v + 2 < function.size() &&
      function.find_first_not_of("0123456789", v + 2) == std::string_view::npos)
    function = function.substr(0, v);
  for (int a = 16; a < 64; ++a) {
    const Api api = static_cast<Api>(a);
    if (function == api_name(api)) return api;
  }
  return Api::kImported;
}

bool is_driver_api(Api api) {
  const int a = static_cast<int>(api);
  return a >= static_cast<int>(Api::kCuMemAlloc) && a <= static_cast<int>(Api::kCuMemUnmap);
}

namespace {

// Column names, order and comments as Nsight Systems 2024.6.2 exports them:
// the tables before the ENUM tables, then (after them) their values and the
// tables that follow.
constexpr const char* kTablesBeforeEnums = R"SQL(
CREATE TABLE StringIds (
    -- Consolidation of repetitive string values.
    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- ID reference value.
    value                       TEXT      NOT NULL                     -- String value.
);
CREATE TABLE ThreadNames (
    nameId                      INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Thread name
    priority                    INTEGER,                               -- Priority of the thread.
    globalTid                   INTEGER                                -- Serialized GlobalId.
);
CREATE TABLE PROCESSES (
    -- Names and identifiers of processes captured in the report.
    globalPid                   INTEGER,                               -- Serialized GlobalId.
    pid                         INTEGER,                               -- The process ID.
    name                        TEXT                                   -- The process name.
);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (
    utcEpochNs                  INTEGER,                               -- UTC Epoch timestamp at start of the capture (ns).
    utcTime                     TEXT,                                  -- Start of the capture in UTC.
    localTime                   TEXT                                   -- Start of the capture in local time of target.
);
CREATE TABLE META_DATA_EXPORT (
    -- information about nsys export process
    name                        TEXT      NOT NULL,                    -- Name of meta-data record
    value                       TEXT                                   -- Value of meta-data record
);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER   NOT NULL,                    -- Event end timestamp (ns).
    eventClass                  INTEGER   NOT NULL,                    -- REFERENCES ENUM_NSYS_EVENT_CLASS(id)
    globalTid                   INTEGER,                               -- Serialized GlobalId.
    correlationId               INTEGER,                               -- ID used to identify events that this function call has triggered.
    nameId                      INTEGER   NOT NULL,                    -- REFERENCES StringIds(id) -- Function name
    returnValue                 INTEGER   NOT NULL,                    -- Return value of the function call.
    callchainId                 INTEGER                                -- REFERENCES CUDA_CALLCHAINS(id)
);
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    globalPid                   INTEGER   NOT NULL,                    -- Serialized GlobalId.
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    address                     INTEGER   NOT NULL,                    -- Virtual address of the allocation/deallocation.
    pc                          INTEGER   NOT NULL,                    -- Program counter of the allocation/deallocation.
    bytes                       INTEGER   NOT NULL,                    -- Number of bytes allocated/deallocated (B).
    memKind                     INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUDA_MEM_KIND(id)
    memoryOperationType         INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUDA_DEV_MEM_EVENT_OPER(id)
    name                        TEXT,                                  -- Variable name, if available.
    correlationId               INTEGER,                               -- REFERENCES CUPTI_ACTIVITY_KIND_RUNTIME(correlationId)
    streamId                    INTEGER,                               -- Stream ID.
    localMemoryPoolAddress      INTEGER,                               -- Base address of the local memory pool used
    localMemoryPoolReleaseThreshold   INTEGER,                         -- Release threshold of the local memory pool used
    localMemoryPoolSize         INTEGER,                               -- Size of the local memory pool used
    localMemoryPoolUtilizedSize   INTEGER,                             -- Utilized size of the local memory pool used
    importedMemoryPoolAddress   INTEGER,                               -- Base address of the imported memory pool used
    importedMemoryPoolProcessId   INTEGER                              -- Process ID of the imported memory pool used
);
CREATE TABLE NVTX_EVENTS (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    end                         INTEGER,                               -- Event end timestamp (ns).
    eventType                   INTEGER   NOT NULL,                    -- REFERENCES ENUM_NSYS_EVENT_TYPE(id)
    rangeId                     INTEGER,                               -- Correlation ID returned from a nvtxRangeStart call.
    category                    INTEGER,                               -- User-controlled ID that can be used to group events.
    color                       INTEGER,                               -- Encoded ARGB color value.
    text                        TEXT,                                  -- Explicit name/text (non-registered string)
    globalTid                   INTEGER,                               -- Serialized GlobalId.
    endGlobalTid                INTEGER,                               -- Serialized GlobalId.
    textId                      INTEGER,                               -- REFERENCES StringIds(id) -- Registered NVTX domain/string
    domainId                    INTEGER,                               -- User-controlled ID that can be used to group events.
    uint64Value                 INTEGER,                               -- One of possible payload value union members.
    int64Value                  INTEGER,                               -- One of possible payload value union members.
    doubleValue                 REAL,                                  -- One of possible payload value union members.
    uint32Value                 INTEGER,                               -- One of possible payload value union members.
    int32Value                  INTEGER,                               -- One of possible payload value union members.
    floatValue                  REAL,                                  -- One of possible payload value union members.
    jsonTextId                  INTEGER,                               -- One of possible payload value union members.
    jsonText                    TEXT,                                  -- One of possible payload value union members.
    binaryData                  TEXT                                   -- Binary payload. See docs for format.
);
)SQL";

// The ENUM tables share one layout: their name and comment differ.
constexpr std::pair<const char*, const char*> kEnumTables[] = {
    {"ENUM_CUDA_MEM_KIND", "CUDA memory kind labels"},
    {"ENUM_CUDA_DEV_MEM_EVENT_OPER", "CUDA device mem event operation labels"},
    {"ENUM_NSYS_EVENT_TYPE", "Nsys event type labels"},
    {"ENUM_NSYS_EVENT_CLASS", "Nsys event class labels"},
};
constexpr const char* kEnumLayout =
    "    id                          INTEGER   NOT NULL   PRIMARY KEY,      -- Enum numerical value.\n"
    "    name                        TEXT,                                  -- Enum symbol name.\n"
    "    label                       TEXT                                   -- Enum human name.\n"
    ");\n";

constexpr const char* kTablesAfterEnums =
    R"SQL(INSERT INTO ENUM_CUDA_MEM_KIND VALUES(0,'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE','Pageable');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES(1,'CUDA_MEMOPR_MEMORY_KIND_PINNED','Pinned');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES(2,'CUDA_MEMOPR_MEMORY_KIND_DEVICE','Device');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES(3,'CUDA_MEMOPR_MEMORY_KIND_ARRAY','Array');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES(4,'CUDA_MEMOPR_MEMORY_KIND_MANAGED','Managed');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES(5,'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC','Device Static');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES(6,'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC','Managed Static');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES(7,'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN','Unknown');
INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES(0,'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION','Allocation');
INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES(1,'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION','Deallocation');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(33,'NvtxCategory','NvtxCategory');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(34,'NvtxMark','NvtxMark');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(39,'NvtxThread','NvtxThread');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(59,'NvtxPushPopRange','NvtxPushPopRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(60,'NvtxStartEndRange','NvtxStartEndRange');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(75,'NvtxDomainCreate','NvtxDomainCreate');
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES(76,'NvtxDomainDestroy','NvtxDomainDestroy');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES(0,'TRACE_PROCESS_EVENT_CUDA_RUNTIME','TRACE_PROCESS_EVENT_CUDA_RUNTIME');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES(1,'TRACE_PROCESS_EVENT_CUDA_DRIVER','TRACE_PROCESS_EVENT_CUDA_DRIVER');
CREATE TABLE ANALYSIS_DETAILS (
    globalVid                   INTEGER   NOT NULL,                    -- Serialized GlobalId.
    duration                    INTEGER   NOT NULL,                    -- The total time span of the entire trace (ns).
    startTime                   INTEGER   NOT NULL,                    -- Trace start timestamp in nanoseconds.
    stopTime                    INTEGER   NOT NULL                     -- Trace stop timestamp in nanoseconds.
);
CREATE TABLE EXPORT_META_DATA (
    name                        TEXT      NOT NULL,                    -- Name of export meta-data record
    value                       TEXT                                   -- Value of export meta-data record
);
CREATE TABLE PEAKSCOPE_HOST_MEMORY_EVENTS (
    -- Host memory (malloc, posix_memalign, ... of a --host recording): the
    -- columns of CUDA_GPU_MEMORY_USAGE_EVENTS, kept out of Nsight's CUDA
    -- tables; nameId names the call.
    start                       INTEGER   NOT NULL,
    globalTid                   INTEGER   NOT NULL,
    address                     INTEGER   NOT NULL,
    bytes                       INTEGER   NOT NULL,
    memoryOperationType         INTEGER   NOT NULL,                    -- REFERENCES ENUM_CUDA_DEV_MEM_EVENT_OPER(id)
    nameId                      INTEGER   NOT NULL                     -- REFERENCES StringIds(id)
);
CREATE TABLE PEAKSCOPE_INFO (
    -- peakscope: where this file came from, and what a round trip needs back.
    name                        TEXT      NOT NULL,
    value                       TEXT
);
CREATE TABLE PEAKSCOPE_EVENT_ORDER (
    -- peakscope: the order of the trace's events, which timestamps alone may
    -- not give (equal times). A row's start (and end) event's position.
    tableName                   TEXT      NOT NULL,
    rowId                       INTEGER   NOT NULL,
    startOrder                  INTEGER   NOT NULL,
    endOrder                    INTEGER
);
)SQL";

}  // namespace

const std::string& schema() {
  static const std::string text = [] {
    std::string s = kTablesBeforeEnums;
    for (const auto& [name, comment] : kEnumTables)
      s += std::string("CREATE TABLE ") + name + " (\n    -- " + comment + "\n" + kEnumLayout;
    return s + kTablesAfterEnums;
  }();
  return text;
}

}  // namespace psc::nsys
