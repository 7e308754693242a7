// The C ABI of libpeakscope_estimator.so (include/peakscope/estimator.h),
// linked in directly: every price and admission is predict()'s and
// admit_wave()'s on the same calibration, errors come back as codes and
// messages, structs are read and written only as far as their size says, and
// one handle serves several threads at once.
#include "peakscope/estimator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "estimator/calibration.h"
#include "estimator/predict.h"
#include "tests/support/test_support.h"

namespace psc {
namespace {

constexpr int kLayers = 3;

GrowthTerm term(double intercept, double per_token, double per_square_token) {
  GrowthTerm t;
  t.intercept = intercept;
  t.per_token = per_token;
  t.per_square_token = per_square_token;
  t.margin_bytes = 8;
  t.points = 4;
  t.sizes = 3;
  t.growth = per_square_token > 0 ? Growth::kQuadratic : Growth::kLinear;
  // Calibrated on waves of 16..256 tokens per group, single sequences and
  // packs of up to 4 (the longest holding at least a quarter of the squares).
  t.smallest = unpacked(16);
  t.largest = unpacked(256);
  t.largest.sequences = 4;
  t.longest_share = 1;
  t.least_longest_share = 0.25;
  t.has_beyond = true;
  t.beyond = {intercept, per_token, per_square_token + 1};
  return t;
}

MomentFit moment(double scale) {
  MomentFit m;
  m.method = "events";
  m.events = {term(512 * scale, 1024 * scale, 0), term(0, 256 * scale, 3 * scale)};
  return m;
}

Calibration synthetic() {
  Calibration c;
  c.layers = kLayers;
  c.safety_factor = 1.1;
  for (int i = 0; i < kLayers; ++i) c.boundary.push_back(term(0, 1024 + 128 * i, 0));
  c.workspace = term(4096, 4096, 2);
  c.input_gradient = term(0, 512, 0);
  c.output = term(256, 256, 0);
  c.head_saved = term(0, 128, 0);
  MomentFits fits;
  fits.head = moment(2);
  for (int i = 0; i < kLayers; ++i) {
    fits.before_gradient.push_back(moment(1 + 0.1 * i));
    fits.after_gradient.push_back(moment(0.5 + 0.1 * i));
  }
  c.moments = std::move(fits);
  c.adapter_gradient_bytes["a"] = std::vector<uint64_t>(kLayers, 1 << 16);
  c.adapter_gradient_bytes["b"] = std::vector<uint64_t>(kLayers, 1 << 14);
  c.first_execution_bytes = 1 << 12;
  return c;
}

class EstimatorCapi : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = scratch_.path("cal.json");
    std::ofstream(path_) << calibration_to_json(synthetic()).dump(1);
    // What the library reads is the file: compare with the file's calibration.
    std::ifstream in(path_);
    expected_ = calibration_from_json(CalibrationJson::parse(in));
    char error[256];
    handle_ = psc_calibration_load(path_.c_str(), error, sizeof error);
    ASSERT_NE(handle_, nullptr) << error;
  }
  void TearDown() override { psc_calibration_free(handle_); }

  static psc_wave_request request(int64_t tokens, const char* slots = nullptr) {
    psc_wave_request r{};
    r.size = sizeof r;
    r.tokens = tokens;
    r.slots = slots;
    return r;
  }
  static psc_price empty_price() {
    psc_price p{};
    p.size = sizeof p;
    return p;
  }

  test_support::Scratch scratch_;
  std::string path_;
  Calibration expected_;
  psc_calibration* handle_ = nullptr;
};

void expect_same(const psc_price& got, const Prediction& want) {
  const pricing::Price& p = want.price;
  EXPECT_EQ(got.raw_bytes, p.raw_bytes);
  EXPECT_EQ(got.required_bytes, p.required_bytes);
  EXPECT_EQ(got.output, p.components.output);
  EXPECT_EQ(got.retained, p.components.retained);
  EXPECT_EQ(got.workspace, p.components.workspace);
  EXPECT_EQ(got.input_gradient, p.components.input_gradient);
  EXPECT_EQ(got.adapter_gradient, p.components.adapter_gradient);
  EXPECT_EQ(got.moment, p.components.moment);
  EXPECT_EQ(got.waiting, p.components.waiting);
  EXPECT_EQ(got.transient, p.components.transient);
  EXPECT_EQ(got.peak_layer, p.peak.layer);
  EXPECT_EQ(got.peak_moment, static_cast<int32_t>(p.peak.moment));
  EXPECT_EQ(got.extrapolated, (want.extrapolation.outside.empty() ? 0 : PSC_EXTRAPOLATED_OUTSIDE) |
                                  (want.extrapolation.few_sizes.empty() ? 0 : PSC_EXTRAPOLATED_FEW_SIZES) |
                                  (want.extrapolation.waiting_assumed ? PSC_EXTRAPOLATED_WAITING : 0) |
                                  (want.extrapolation.unbounded() ? PSC_EXTRAPOLATED_UNBOUNDED : 0));
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

TEST_F(EstimatorCapi, PricesArePredictions) {
  const std::vector<int64_t> packed = {64, 64, 32};
  struct Case {
    int64_t tokens;
    const char* slots;  // as the ABI takes them
    std::vector<std::string> slot_list;
    std::vector<int64_t> sequences;
    bool cold, gradients_exist;
  };
  const std::vector<Case> cases = {
      {64, "a", {"a"}, {}, false, false},        {160, "a", {"a"}, packed, true, false},
      {96, "a,b", {"a", "b"}, {}, false, false}, {96, "b,a", {"b", "a"}, {}, true, true},
      {4, "a", {"a"}, {}, false, false},         {4000, "b", {"b"}, {}, false, false},
      {64, nullptr, {}, {}, false, false},  // two slots calibrated: predict() refuses, and so must the ABI
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::to_string(k.tokens) + " " + (k.slots ? k.slots : "(null)"));
    WaveRequest want;
    want.tokens = k.tokens;
    want.sequence_lengths = k.sequences;
    want.slots = k.slot_list;
    want.cold = k.cold;
    want.gradients_exist = k.gradients_exist;
    psc_wave_request r = request(k.tokens, k.slots);
    r.sequence_lengths = k.sequences.empty() ? nullptr : k.sequences.data();
    r.sequence_count = k.sequences.size();
    r.cold = k.cold;
    r.gradients_exist = k.gradients_exist;
    psc_price out = empty_price();
    char message[1024];
    const int rc = psc_calibration_price(handle_, &r, &out, message, sizeof message);
    if (!k.slots) {
      EXPECT_EQ(rc, PSC_BAD_INPUT);
      EXPECT_EQ(std::string(message).rfind("slots: ", 0), 0u) << message;
      EXPECT_THROW(predict(expected_, want), PredictError);
      continue;
    }
    ASSERT_EQ(rc, PSC_OK) << message;
    const Prediction p = predict(expected_, want);
    expect_same(out, p);
    EXPECT_EQ(message, joined(p.extrapolation.warnings(expected_)));
    if (k.slot_list.size() == 1) {                           // one group: its size is the wave's
      const bool outside = k.tokens < 16 || k.tokens > 256;  // the synthetic terms' range
      EXPECT_EQ((out.extrapolated & PSC_EXTRAPOLATED_OUTSIDE) != 0, outside) << message;
      EXPECT_EQ(message[0] != '\0', outside);
    }
  }
}

TEST_F(EstimatorCapi, AdmissionIsAdmitWave) {
  int admitted = 0;
  WaveRequest shape;
  shape.slots = {"a"};
  shape.cold = true;
  for (int64_t max_sequence_length : {0, 48}) {
    for (pricing::Bytes budget : {pricing::Bytes{1000}, pricing::Bytes{3} << 20, pricing::Bytes{40} << 20}) {
      const pricing::Admission want = admit_wave(expected_, shape, max_sequence_length, 1 << 16, budget);
      psc_wave_request r = request(0, "a");
      r.cold = 1;
      psc_admission out{};
      out.size = sizeof out;
      out.price.size = sizeof out.price;
      char message[1024];
      ASSERT_EQ(psc_calibration_admit(handle_, &r, budget, 1 << 16, max_sequence_length, &out, message, sizeof message),
                PSC_OK)
          << message;
      EXPECT_EQ(out.admitted_tokens, want.tokens);
      EXPECT_EQ(out.search_prices, want.search_prices);
      EXPECT_EQ(out.next_required_bytes, want.next_required_bytes ? *want.next_required_bytes : -1);
      if (want.tokens == 0) {
        EXPECT_EQ(out.price.raw_bytes, 0);
        EXPECT_EQ(out.price.required_bytes, 0);
        EXPECT_EQ(out.price.size, sizeof out.price);
        continue;
      }
      WaveRequest at = shape;
      at.tokens = want.tokens;
      if (max_sequence_length > 0) at.sequence_lengths = packed_sequences(want.tokens, max_sequence_length);
      const Prediction p = predict(expected_, at);
      expect_same(out.price, p);
      EXPECT_LE(out.price.required_bytes, budget);
      EXPECT_EQ(message, joined(p.extrapolation.warnings(expected_)));
      ++admitted;
    }
  }
  EXPECT_EQ(admitted, 4);  // the 1000-byte budget admits nothing
}

TEST_F(EstimatorCapi, BadInputIsACodeAndAMessage) {
  char message[256];
  psc_price out = empty_price();
  psc_wave_request r = request(64, "a,c");
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("slots[1]: ", 0), 0u) << message;
  EXPECT_EQ(out.raw_bytes, 0);  // left as it was
  const int64_t lengths[] = {10, 20};
  r = request(64, "a");
  r.sequence_lengths = lengths;
  r.sequence_count = 2;
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("sequences: ", 0), 0u) << message;
  r.sequence_lengths = nullptr;
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("sequences: ", 0), 0u) << message;
  // cold is 0, PSC_COLD or PSC_COLD_AFTER_FIRST_WAVE: a count or a mask is refused, not read as a kind.
  r = request(64, "a");
  r.cold = 3;
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("cold: 3 ", 0), 0u) << message;
  r.cold = PSC_COLD_AFTER_FIRST_WAVE;
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_OK) << message;
  r.sequence_lengths = nullptr;
  EXPECT_EQ(psc_calibration_price(nullptr, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(psc_calibration_price(handle_, nullptr, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(psc_calibration_price(handle_, &r, nullptr, message, sizeof message), PSC_BAD_INPUT);
  r = request(0, "a");
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, nullptr, 0), PSC_BAD_INPUT);  // no buffer: just the code
  char small[7];
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, small, sizeof small), PSC_BAD_INPUT);
  EXPECT_STREQ(small, "tokens");  // cut to fit, terminated
  psc_admission admission{};
  admission.size = sizeof admission;
  admission.price.size = sizeof admission.price;
  r = request(0, "a");
  EXPECT_EQ(psc_calibration_admit(handle_, &r, 1 << 20, 0, 0, &admission, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("max_tokens: ", 0), 0u) << message;
  EXPECT_EQ(psc_calibration_admit(handle_, &r, 1 << 20, 10, -1, &admission, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("max_sequence_length: ", 0), 0u) << message;
  admission.price.size = 8;
  EXPECT_EQ(psc_calibration_admit(handle_, &r, 1 << 20, 10, 0, &admission, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("out.price.size: ", 0), 0u) << message;
}

TEST_F(EstimatorCapi, LoadNamesTheFileAndTheField) {
  char error[512];
  EXPECT_EQ(psc_calibration_load(nullptr, error, sizeof error), nullptr);
  EXPECT_STREQ(error, "path: NULL");
  const std::string missing = scratch_.path("missing.json");
  EXPECT_EQ(psc_calibration_load(missing.c_str(), error, sizeof error), nullptr);
  EXPECT_EQ(std::string(error), missing + ": cannot read: No such file or directory");
  const std::string broken = scratch_.path("broken.json");
  std::ofstream(broken) << "{\"format\": ";
  EXPECT_EQ(psc_calibration_load(broken.c_str(), error, sizeof error), nullptr);
  EXPECT_EQ(std::string(error).rfind(broken + ": not valid JSON", 0), 0u) << error;
  CalibrationJson j = calibration_to_json(synthetic());
  j["version"] = 99;
  const std::string future = scratch_.path("future.json");
  std::ofstream(future) << j.dump();
  EXPECT_EQ(psc_calibration_load(future.c_str(), error, sizeof error), nullptr);
  EXPECT_NE(std::string(error).find(future + ": calibration.version: 99"), std::string::npos) << error;
  EXPECT_EQ(std::strchr(error, '\n'), nullptr);
  psc_calibration_free(nullptr);  // like free(NULL)
}

TEST_F(EstimatorCapi, StructsAreReadAndWrittenAsFarAsTheirSize) {
  char message[256];
  psc_wave_request r = request(64, "a");
  psc_price out = empty_price();
  r.size = offsetof(psc_wave_request, gradients_exist);  // shorter than the first version
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("request.size: ", 0), 0u) << message;
  r.size = sizeof r;
  out.size = offsetof(psc_price, extrapolated);  // shorter than the first version
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("out.size: ", 0), 0u) << message;
  // A caller built against a later version: a longer struct, its tail untouched.
  struct Later {
    psc_price price;
    int64_t added[4];
  } later;
  std::memset(&later, 0x5a, sizeof later);
  later.price.size = sizeof later;
  ASSERT_EQ(psc_calibration_price(handle_, &r, &later.price, message, sizeof message), PSC_OK) << message;
  EXPECT_EQ(later.price.size, sizeof later);
  WaveRequest want;
  want.tokens = 64;
  want.slots = {"a"};
  expect_same(later.price, predict(expected_, want));
  for (int64_t v : later.added) EXPECT_EQ(v, 0x5a5a5a5a5a5a5a5a);
  // A caller of the first version: its struct ends before `waiting`, which is not written.
  struct First {
    psc_price price;
  } first;
  std::memset(&first, 0x5a, sizeof first);
  first.price.size = offsetof(psc_price, extrapolated) + sizeof(int32_t);
  ASSERT_EQ(psc_calibration_price(handle_, &r, &first.price, message, sizeof message), PSC_OK) << message;
  EXPECT_EQ(first.price.raw_bytes, later.price.raw_bytes);
  EXPECT_EQ(first.price.waiting, 0x5a5a5a5a5a5a5a5a);
  // A request of the first version: no groups read past its size.
  psc_wave_request old = request(64, "a,b");
  old.size = offsetof(psc_wave_request, gradients_exist) + sizeof(int);
  old.group_count = 3;  // beyond its size: never read
  psc_price priced = empty_price();
  ASSERT_EQ(psc_calibration_price(handle_, &old, &priced, message, sizeof message), PSC_OK) << message;
  WaveRequest halves;
  halves.tokens = 64;
  halves.slots = {"a", "b"};
  expect_same(priced, predict(expected_, halves));
}

TEST_F(EstimatorCapi, GroupsOfTheirOwnSizes) {
  char message[256];
  psc_wave_request r = request(0, "a,b");
  const int64_t tokens[] = {40, 200};
  const int64_t lengths[] = {20, 20};
  const size_t counts[] = {2, 0};
  r.group_tokens = tokens;
  r.group_count = 2;
  r.group_sequence_lengths = lengths;
  r.group_sequence_counts = counts;
  psc_price out = empty_price();
  ASSERT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_OK) << message;
  WaveRequest want;
  want.groups = {{40, {20, 20}, "a"}, {200, {}, "b"}};
  expect_same(out, predict(expected_, want));
  // The same request again, now of equal parts: nothing of the groups stays behind.
  psc_wave_request plain = request(240, "a,b");
  ASSERT_EQ(psc_calibration_price(handle_, &plain, &out, message, sizeof message), PSC_OK) << message;
  WaveRequest halves;
  halves.tokens = 240;
  halves.slots = {"a", "b"};
  expect_same(out, predict(expected_, halves));
  // Two slots for three groups: refused, naming the field.
  const int64_t three[] = {10, 20, 30};
  r.group_tokens = three;
  r.group_count = 3;
  r.group_sequence_counts = nullptr;
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("slots: ", 0), 0u) << message;
  // The split an admission makes at shares 1:3.
  r.group_tokens = tokens;
  r.group_count = 2;
  int64_t split[2] = {0, 0};
  ASSERT_EQ(psc_calibration_group_split(&r, 400, split, 2, message, sizeof message), PSC_OK) << message;
  EXPECT_EQ(split[0], 67);  // round(400 x 40 / 240)
  EXPECT_EQ(split[1], 333);
}

TEST_F(EstimatorCapi, AGroupsBackwardOrderIsReadFromVersionThree) {
  char message[256];
  psc_wave_request r = request(0, "a,b");
  const int64_t tokens[] = {40, 200};
  const int32_t order[] = {1, 0};
  r.group_tokens = tokens;
  r.group_count = 2;
  r.backward_order = order;
  r.backward_order_count = 2;
  psc_price out = empty_price();
  ASSERT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_OK) << message;
  WaveRequest want;
  want.groups = {{40, {}, "a"}, {200, {}, "b"}};
  want.backward_order = {1, 0};
  expect_same(out, predict(expected_, want));
  // A caller of version 2: its struct ends before the order, which is not read.
  psc_wave_request v2 = r;
  v2.size = offsetof(psc_wave_request, group_sequence_counts) + sizeof(const size_t*);
  ASSERT_EQ(psc_calibration_price(handle_, &v2, &out, message, sizeof message), PSC_OK) << message;
  want.backward_order.clear();
  expect_same(out, predict(expected_, want));
  // An order that is not every group once, a NULL one with a count: refused, naming the field.
  const int32_t twice[] = {0, 0};
  r.backward_order = twice;
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("backward_order[1]", 0), 0u) << message;
  r.backward_order = nullptr;
  EXPECT_EQ(psc_calibration_price(handle_, &r, &out, message, sizeof message), PSC_BAD_INPUT);
  EXPECT_EQ(std::string(message).rfind("backward_order: NULL", 0), 0u) << message;
  // An admission prices every width in the order given, as admit_wave does.
  r.backward_order = order;
  psc_admission admission{};
  admission.size = sizeof admission;
  admission.price.size = sizeof admission.price;
  const int64_t budget = 1 << 20;
  ASSERT_EQ(psc_calibration_admit(handle_, &r, budget, 1 << 16, 0, &admission, message, sizeof message), PSC_OK)
      << message;
  WaveRequest shape;
  shape.groups = {{40, {}, "a"}, {200, {}, "b"}};
  shape.backward_order = {1, 0};
  const pricing::Admission in_order = admit_wave(expected_, shape, 0, 1 << 16, budget);
  EXPECT_EQ(admission.admitted_tokens, in_order.tokens);
  shape.backward_order.clear();
  EXPECT_GE(admission.admitted_tokens, admit_wave(expected_, shape, 0, 1 << 16, budget).tokens);
}

// A wave inside every calibrated feature that no calibration wave bounds
// (one sequence shorter than the calibration's shortest, knots at 100 and
// 200 tokens) comes back flagged, with the warning the CLI prints: a caller
// that shows warnings only for a flagged price sees it.
TEST_F(EstimatorCapi, AWaveNoCalibrationWaveBoundsIsFlaggedWithItsWarning) {
  Calibration c = synthetic();
  auto knots = [](GrowthTerm& t) { t.knots = {{100, t.line(int64_t{100})}, {200, t.line(int64_t{200})}}; };
  for (GrowthTerm* t : {&c.workspace, &c.input_gradient, &c.output, &c.head_saved}) knots(*t);
  for (GrowthTerm& t : c.boundary) knots(t);
  for (GrowthTerm& t : c.moments->head.events) knots(t);
  for (auto* fits : {&c.moments->before_gradient, &c.moments->after_gradient})
    for (MomentFit& m : *fits)
      for (GrowthTerm& t : m.events) knots(t);
  const std::string path = scratch_.path("knots.json");
  std::ofstream(path) << calibration_to_json(c).dump(1);
  char error[256];
  psc_calibration* handle = psc_calibration_load(path.c_str(), error, sizeof error);
  ASSERT_NE(handle, nullptr) << error;
  std::ifstream in(path);
  const Calibration file = calibration_from_json(CalibrationJson::parse(in));
  for (const int64_t tokens : {59, 150}) {
    SCOPED_TRACE(tokens);
    psc_wave_request r = request(tokens, "a");
    psc_price out = empty_price();
    char message[1024];
    ASSERT_EQ(psc_calibration_price(handle, &r, &out, message, sizeof message), PSC_OK) << message;
    WaveRequest want;
    want.tokens = tokens;
    want.slots = {"a"};
    const Prediction p = predict(file, want);
    expect_same(out, p);
    EXPECT_EQ((out.extrapolated & PSC_EXTRAPOLATED_UNBOUNDED) != 0, tokens < 100);
    EXPECT_EQ(message, joined(p.extrapolation.warnings(file)));
    EXPECT_EQ(
        std::string(message).find("a wave of one sequence of 59 tokens, shorter than the shortest calibrated (100)") !=
            std::string::npos,
        tokens < 100)
        << message;
  }
  psc_calibration_free(handle);
}

TEST_F(EstimatorCapi, OneHandleManyThreads) {
  const char* slots[] = {"a", "b", "a,b", "b,a"};
  std::vector<std::vector<int64_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t tokens = 16; tokens <= 512; tokens += 16) {
        psc_wave_request r = request(tokens, slots[t]);
        psc_price out = empty_price();
        char message[512];
        got[t].push_back(psc_calibration_price(handle_, &r, &out, message, sizeof message) == PSC_OK ? out.raw_bytes
                                                                                                     : -1);
      }
    });
  for (std::thread& t : threads) t.join();
  const std::vector<std::vector<std::string>> lists = {{"a"}, {"b"}, {"a", "b"}, {"b", "a"}};
  for (int t = 0; t < 4; ++t) {
    size_t i = 0;
    for (int64_t tokens = 16; tokens <= 512; tokens += 16, ++i) {
      WaveRequest want;
      want.tokens = tokens;
      want.slots = lists[t];
      EXPECT_EQ(got[t][i], predict(expected_, want).price.raw_bytes) << slots[t] << " " << tokens;
    }
  }
}

}  // namespace
}  // namespace psc
