// libpeakscope_estimator.so: the C ABI of include/peakscope/estimator.h
// over estimator/predict.h. Every price is predict()'s and every admission
// admit_wave()'s; this file only converts, checks the structs' sizes and keeps
// exceptions on this side.
//
// Built with -fvisibility=hidden; PSC_EXPORT marks the ABI, and the version
// script (peakscope_estimator.map) keeps everything else local.
#include "peakscope/estimator.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_file.h"
#include "estimator/calibration.h"
#include "estimator/predict.h"

#define PSC_EXPORT extern "C" __attribute__((visibility("default")))

struct psc_calibration {
  psc::Calibration calibration;
};

namespace {

using psc::pricing::Bytes;

// The first version of each struct ends here; anything shorter is bad input.
constexpr size_t kRequestV1 = offsetof(psc_wave_request, gradients_exist) + sizeof(int);
constexpr size_t kPriceV1 = offsetof(psc_price, extrapolated) + sizeof(int32_t);
constexpr size_t kRequestV2 = offsetof(psc_wave_request, group_sequence_counts) + sizeof(const size_t*);
constexpr size_t kRequestV3 = offsetof(psc_wave_request, backward_order_count) + sizeof(size_t);
constexpr size_t kAdmissionV1 = offsetof(psc_admission, price) + kPriceV1;

class BadInput : public std::exception {
 public:
  explicit BadInput(std::string text) : text_(std::move(text)) {}
  const char* what() const noexcept override { return text_.c_str(); }

 private:
  std::string text_;
};

// Copies `text` into the caller's buffer, cut to fit, always NUL-terminated.
void write_text(char* buffer, size_t size, std::string_view text) {
  if (buffer == nullptr || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}

// What one thread reuses from call to call: the request (its vectors keep
// their capacity) and the last slots string split.
struct Scratch {
  psc::WaveRequest request;
  std::string slots_text;
  bool slots_parsed = false;
};
thread_local Scratch scratch;

void split_slots(const char* text, std::vector<std::string>& into) {
  into.clear();
  if (text == nullptr || *text == '\0') return;
  const char* start = text;
  for (const char* p = text;; ++p) {
    if (*p == ',' || *p == '\0') {
      into.emplace_back(start, static_cast<size_t>(p - start));
      if (*p == '\0') break;
      start = p + 1;
    }
  }
}

// Version 2's groups, each with its slot from the request's slots.
void read_groups(const psc_wave_request& in, bool with_sequences, psc::WaveRequest& r) {
  if (in.group_tokens == nullptr)
    throw BadInput("groups: NULL tokens with a count of " + std::to_string(in.group_count));
  if (!r.slots.empty() && r.slots.size() != in.group_count)
    throw BadInput("slots: " + std::to_string(r.slots.size()) + " slots for " + std::to_string(in.group_count) +
                   " groups");
  size_t at = 0;
  for (size_t g = 0; g < in.group_count; ++g) {
    psc::GroupRequest group;
    group.tokens = in.group_tokens[g];
    if (g < r.slots.size()) group.slot = r.slots[g];
    const size_t count = in.group_sequence_counts ? in.group_sequence_counts[g] : 0;
    if (count > 0 && in.group_sequence_lengths == nullptr)
      throw BadInput("groups[" + std::to_string(g) + "].sequences: NULL with a count of " + std::to_string(count));
    if (with_sequences && count > 0)
      group.sequence_lengths.assign(in.group_sequence_lengths + at, in.group_sequence_lengths + at + count);
    at += count;
    r.groups.push_back(std::move(group));
  }
  r.slots.clear();
  r.sequence_lengths.clear();
  scratch.slots_parsed = false;  // r.slots no longer holds the split string
}

// The request as predict() takes it, in this thread's scratch.
const psc::WaveRequest& to_request(const psc_wave_request* in, bool with_sequences) {
  if (in == nullptr) throw BadInput("request: NULL");
  if (in->size < kRequestV1)
    throw BadInput("request.size: " + std::to_string(in->size) + " is smaller than the first version's " +
                   std::to_string(kRequestV1) + " bytes");
  psc::WaveRequest& r = scratch.request;
  r.tokens = in->tokens;
  r.sequence_lengths.clear();
  if (with_sequences && in->sequence_count > 0) {
    if (in->sequence_lengths == nullptr)
      throw BadInput("sequences: NULL with a count of " + std::to_string(in->sequence_count));
    r.sequence_lengths.assign(in->sequence_lengths, in->sequence_lengths + in->sequence_count);
  }
  const char* slots = in->slots == nullptr ? "" : in->slots;
  if (!scratch.slots_parsed || scratch.slots_text != slots) {
    scratch.slots_parsed = false;
    scratch.slots_text = slots;
    split_slots(slots, r.slots);
    scratch.slots_parsed = true;
  }
  if (in->cold != 0 && in->cold != PSC_COLD && in->cold != PSC_COLD_AFTER_FIRST_WAVE)
    throw BadInput("cold: " + std::to_string(in->cold) + " is none of 0, PSC_COLD (1), PSC_COLD_AFTER_FIRST_WAVE (2)");
  r.cold = in->cold != 0;
  r.after_first_wave = in->cold == PSC_COLD_AFTER_FIRST_WAVE;
  r.gradients_exist = in->gradients_exist != 0;
  r.groups.clear();
  if (in->size >= kRequestV2 && in->group_count > 0) read_groups(*in, with_sequences, r);
  r.backward_order.clear();
  if (in->size >= kRequestV3 && in->backward_order_count > 0) {
    if (in->backward_order == nullptr)
      throw BadInput("backward_order: NULL with a count of " + std::to_string(in->backward_order_count));
    r.backward_order.assign(in->backward_order, in->backward_order + in->backward_order_count);
  }
  return r;
}

int32_t moment_code(psc::pricing::Moment moment) {
  switch (moment) {
    case psc::pricing::Moment::kHead: return PSC_MOMENT_HEAD;
    case psc::pricing::Moment::kBeforeGradient: return PSC_MOMENT_BEFORE_GRADIENT;
    case psc::pricing::Moment::kAfterGradient: return PSC_MOMENT_AFTER_GRADIENT;
    case psc::pricing::Moment::kForward: return PSC_MOMENT_FORWARD;
    case psc::pricing::Moment::kNone: break;
  }
  return PSC_MOMENT_NONE;
}

int32_t extrapolated_flags(const psc::Extrapolation& e) {
  return (e.outside.empty() ? 0 : PSC_EXTRAPOLATED_OUTSIDE) | (e.few_sizes.empty() ? 0 : PSC_EXTRAPOLATED_FEW_SIZES) |
         (e.waiting_assumed ? PSC_EXTRAPOLATED_WAITING : 0) | (e.unbounded() ? PSC_EXTRAPOLATED_UNBOUNDED : 0);
}

psc_price to_price(const psc::pricing::Price& p, const psc::Extrapolation& e) {
  psc_price out{};
  out.size = sizeof(psc_price);
  out.raw_bytes = p.raw_bytes;
  out.required_bytes = p.required_bytes;
  out.output = p.components.output;
  out.retained = p.components.retained;
  out.workspace = p.components.workspace;
  out.input_gradient = p.components.input_gradient;
  out.adapter_gradient = p.components.adapter_gradient;
  out.moment = p.components.moment;
  out.transient = p.components.transient;
  out.peak_layer = p.peak.layer;
  out.peak_moment = moment_code(p.peak.moment);
  out.extrapolated = extrapolated_flags(e);
  out.waiting = p.components.waiting;
  return out;
}

// Writes `price` into a caller's struct of `size` bytes (>= kPriceV1), leaving
// its size as the caller set it.
void store_price(const psc_price& price, psc_price* out) {
  const size_t size = out->size;
  const size_t n = std::min(size, sizeof(psc_price)) - sizeof(size_t);
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t), reinterpret_cast<const char*>(&price) + sizeof(size_t), n);
}

void write_warnings(const psc::Calibration& c, const psc::Extrapolation& e, char* message, size_t message_size) {
  if (message == nullptr || message_size == 0) return;
  if (extrapolated_flags(e) == 0) {
    message[0] = '\0';
    return;
  }
  std::string text;
  for (const std::string& line : e.warnings(c)) text += (text.empty() ? "" : "\n") + line;
  write_text(message, message_size, text);
}

// Runs `body`, turning every exception into a return code and a message.
template <typename Body>
int guarded(char* message, size_t message_size, Body body) {
  try {
    return body();
  } catch (const psc::PredictError& e) {
    write_text(message, message_size, e.what());
    return PSC_BAD_INPUT;
  } catch (const BadInput& e) {
    write_text(message, message_size, e.what());
    return PSC_BAD_INPUT;
  } catch (const std::bad_alloc&) {
    write_text(message, message_size, "out of memory");
    return PSC_INTERNAL;
  } catch (const std::exception& e) {
    write_text(message, message_size, e.what());
    return PSC_INTERNAL;
  } catch (...) {
    write_text(message, message_size, "unknown error");
    return PSC_INTERNAL;
  }
}

psc::Calibration read_calibration_file(const std::string& path) {
  try {
    return psc::read_calibration(path);
  } catch (const psc::CalibrationError& e) {
    throw BadInput(e.what());
  }
}

}  // namespace

PSC_EXPORT psc_calibration* psc_calibration_load(const char* path, char* error, size_t error_size) {
  write_text(error, error_size, "");
  if (path == nullptr) {
    write_text(error, error_size, "path: NULL");
    return nullptr;
  }
  psc_calibration* handle = nullptr;
  const int rc = guarded(error, error_size, [&] {
    handle = new psc_calibration{read_calibration_file(path)};
    return PSC_OK;
  });
  if (rc != PSC_OK) {
    // guarded() wrote the reason; a failure outside the file's content still names it.
    if (error != nullptr && error_size > 0 && std::strncmp(error, path, std::strlen(path)) != 0) {
      const std::string reason = error;
      write_text(error, error_size, std::string(path) + ": " + reason);
    }
    return nullptr;
  }
  return handle;
}

PSC_EXPORT void psc_calibration_free(psc_calibration* calibration) { delete calibration; }

PSC_EXPORT int psc_calibration_price(const psc_calibration* calibration, const psc_wave_request* request,
                                     psc_price* out, char* message, size_t message_size) {
  return guarded(message, message_size, [&] {
    if (calibration == nullptr) throw BadInput("calibration: NULL");
    if (out == nullptr) throw BadInput("out: NULL");
    if (out->size < kPriceV1)
      throw BadInput("out.size: " + std::to_string(out->size) + " is smaller than the first version's " +
                     std::to_string(kPriceV1) + " bytes");
    const psc::Calibration& c = calibration->calibration;
    const psc::Prediction p = psc::predict(c, to_request(request, true));
    store_price(to_price(p.price, p.extrapolation), out);
    write_warnings(c, p.extrapolation, message, message_size);
    return PSC_OK;
  });
}

PSC_EXPORT int psc_calibration_group_split(const psc_wave_request* shape, int64_t tokens, int64_t* group_tokens,
                                           size_t count, char* message, size_t message_size) {
  return guarded(message, message_size, [&] {
    const psc::WaveRequest& request = to_request(shape, false);
    if (group_tokens == nullptr) throw BadInput("group_tokens: NULL");
    if (count != request.groups.size())
      throw BadInput("count: " + std::to_string(count) + ", but the shape has " +
                     std::to_string(request.groups.size()) + " groups");
    if (tokens < 1 || tokens > psc::pricing::kMaxAdmissionTokens)
      throw BadInput("tokens: must be between 1 and 2^40, not " + std::to_string(tokens));
    const psc::WaveRequest at = psc::wave_at(request, tokens, 0);
    for (size_t g = 0; g < count; ++g) group_tokens[g] = at.groups[g].tokens;
    write_text(message, message_size, "");
    return PSC_OK;
  });
}

PSC_EXPORT int psc_calibration_admit(const psc_calibration* calibration, const psc_wave_request* shape,
                                     int64_t budget_bytes, int64_t max_tokens, int64_t max_sequence_length,
                                     psc_admission* out, char* message, size_t message_size) {
  return guarded(message, message_size, [&] {
    if (calibration == nullptr) throw BadInput("calibration: NULL");
    if (out == nullptr) throw BadInput("out: NULL");
    if (out->size < kAdmissionV1)
      throw BadInput("out.size: " + std::to_string(out->size) + " is smaller than the first version's " +
                     std::to_string(kAdmissionV1) + " bytes");
    if (out->price.size < kPriceV1)
      throw BadInput("out.price.size: " + std::to_string(out->price.size) + " is smaller than the first version's " +
                     std::to_string(kPriceV1) + " bytes");
    if (budget_bytes < 0) throw BadInput("budget_bytes: must be at least 0, not " + std::to_string(budget_bytes));
    if (max_tokens < 1 || max_tokens > psc::pricing::kMaxAdmissionTokens)
      throw BadInput("max_tokens: must be between 1 and 2^40, not " + std::to_string(max_tokens));
    if (max_sequence_length < 0)
      throw BadInput("max_sequence_length: must be 0 (one sequence) or a positive number of tokens, not " +
                     std::to_string(max_sequence_length));
    const psc::Calibration& c = calibration->calibration;
    const psc::WaveRequest& request = to_request(shape, false);
    const psc::pricing::Admission a = psc::admit_wave(c, request, max_sequence_length, max_tokens, budget_bytes);
    psc_price price{};
    price.size = sizeof(psc_price);
    psc::Extrapolation extrapolation;
    if (a.tokens > 0) {
      // The admitted price again, for what it extrapolated (the admission keeps only the price).
      psc::Prediction p = psc::predict(c, psc::wave_at(request, a.tokens, max_sequence_length));
      extrapolation = std::move(p.extrapolation);
      price = to_price(a.price ? *a.price : p.price, extrapolation);
    }
    out->admitted_tokens = a.tokens;
    out->search_prices = a.search_prices;
    out->next_required_bytes = a.next_required_bytes ? *a.next_required_bytes : -1;
    store_price(price, &out->price);
    write_warnings(c, extrapolation, message, message_size);
    return PSC_OK;
  });
}
