#include "exchange/perfetto/perfetto_packets.h"

#include <algorithm>
#include <stdexcept>

namespace psc::perfetto {
namespace {

constexpr const char* kArgNames[] = {"bytes", "address", "range", "payload"};

}  // namespace

uint64_t Interning::category(Category c) {
  bool fresh = false;
  const uint64_t iid = event_names_.iid(static_cast<size_t>(c), &fresh);
  if (fresh) add(interned::kEventNames, iid, category_name(c));
  return iid;
}

uint64_t Interning::name(StringId id, const TraceMeta& meta) {
  bool fresh = false;
  const uint64_t iid = event_names_.iid(kCategoryCount + size_t{id.value}, &fresh);
  if (fresh) add(interned::kEventNames, iid, meta.string(id));
  return iid;
}

uint64_t Interning::arg(Arg arg) {
  bool fresh = false;
  const uint64_t iid = arg_names_.iid(arg, &fresh);
  if (fresh) add(interned::kAnnotationNames, iid, kArgNames[arg]);
  return iid;
}

uint64_t Interning::string_value(StringId id, const TraceMeta& meta) {
  bool fresh = false;
  const uint64_t iid = string_values_.iid(id.value, &fresh);
  if (fresh) add(interned::kAnnotationStringValues, iid, meta.string(id));
  return iid;
}

void Interning::add(uint32_t table, uint64_t iid, std::string_view name) {
  entry_.clear();
  entry_.varint(interned::kIid, iid);
  entry_.string(interned::kName, name);
  pending_.message(table, entry_);
}

PacketBundles::PacketBundles(OutputFile& out) : out_(out) {
  const unsigned processors = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = std::clamp(processors - 1, 1u, kMaxThreads);
  max_in_flight_ = threads + 2;  // a bundle per thread, one being written, one waiting
  for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

PacketBundles::~PacketBundles() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

// One compressor per thread; each bundle is a zlib stream of its own, as the
// tracing service writes them.
void PacketBundles::work() {
  const std::unique_ptr<libdeflate_compressor, void (*)(libdeflate_compressor*)> compressor(
      libdeflate_alloc_compressor(kLevel), libdeflate_free_compressor);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stop_ || !todo_.empty(); });
    if (stop_) break;
    Job* job = todo_.front();
    todo_.pop_front();
    lock.unlock();
    try {
      if (!compressor) throw std::runtime_error("libdeflate: cannot allocate a compressor");
      const size_t bound = libdeflate_zlib_compress_bound(compressor.get(), job->packets.size());
      if (job->compressed.size() < bound) job->compressed.resize(bound);
      // With room for the bound, compressing cannot run out of room (0).
      job->size = libdeflate_zlib_compress(compressor.get(), job->packets.data(), job->packets.size(),
                                           job->compressed.data(), job->compressed.size());
      if (job->size == 0) throw std::runtime_error("libdeflate: compression failed");
    } catch (...) {
      job->error = std::current_exception();
    }
    lock.lock();
    job->done = true;
    job_done_.notify_all();
  }
}

void PacketBundles::flush() {
  if (!pending_.empty()) {
    std::unique_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!spare_.empty()) {
        job = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    if (!job) job = std::make_unique<Job>();
    job->packets.clear();
    pending_.swap_data(job->packets);
    job->done = false;
    job->error = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      todo_.push_back(job.get());
      line_.push_back(std::move(job));
    }
    work_ready_.notify_one();
  }
  write_done(false);
}

void PacketBundles::finish() {
  flush();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (line_.empty()) return;
    }
    write_done(true);
  }
}

void PacketBundles::write_done(bool wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (line_.empty()) return;
    // The line is full: the packets being made wait for the oldest bundle.
    const bool must = wait || line_.size() >= max_in_flight_;
    if (!line_.front()->done) {
      if (!must) return;
      job_done_.wait(lock, [&] { return line_.front()->done; });
    }
    std::unique_ptr<Job> job = std::move(line_.front());
    line_.pop_front();
    lock.unlock();
    if (job->error) std::rethrow_exception(job->error);
    write_outer(*job);
    lock.lock();
    spare_.push_back(std::move(job));
    wait = false;  // the one waited for is written; the rest as they are
  }
}

void PacketBundles::write_outer(const Job& job) {
  field_.clear();
  field_.key(packet::kCompressedPackets, proto::kWireBytes);
  field_.raw_varint(job.size);
  outer_.clear();
  outer_.key(trace::kPacket, proto::kWireBytes);
  outer_.raw_varint(field_.size() + job.size);
  out_.write(outer_.data());
  out_.write(field_.data());
  out_.write(job.compressed.data(), job.size);
}

}  // namespace psc::perfetto
