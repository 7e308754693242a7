// The CUDA reference workload: a stack of LoRA layers trained with a
// full-recompute backward, in plain CUDA kernels (no cuBLAS, nothing that
// needs more than the runtime), so it runs on any GPU and "runs" on the test
// doubles, where every kernel launch goes through the nvcc-generated
// registration and launch path and nothing executes.
//
// Layer i (tokens T, width D, rank R, scale s = 2 / R):
//   u = x_i A_i            (T x R)
//   h = x_i W_i + s u B_i  (T x D)      W_i frozen, A_i and B_i trained
//   x_{i+1} = x_i + relu(h)
// loss = 0.5 / (T D) * |x_L - y|^2. Forward keeps only the layer inputs x_i
// (the boundaries); backward recomputes u and h per layer from x_i, then
//   g = dx_{i+1} * relu'(h), dB_i = s u^T g, du = s g B_i^T, dA_i = x_i^T du,
//   dx_i = dx_{i+1} + g W_i^T + du A_i^T.
// Adapter gradients stay until the optimizer step; x_i dies after layer i's
// backward. Ranges follow the design's convention (wave, forward/layer.<i>,
// head/loss, recompute/layer.<i>, backward/layer.<i>, optimizer/step).
//
// Every kernel body is a __host__ __device__ function, so `--device cpu`
// runs the same arithmetic on the host: the math is tested without a GPU
// (--gradcheck compares the gradients with finite differences), and on a GPU
// `--check` compares the GPU's losses with the CPU's.
//
// Prints "key value" lines: loss per step, the workload's own count of live
// bytes at its peak (workload_peak_bytes), kernel launches and allocations.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// ---- kernels -----------------------------------------------------------------------

// C (m x n) = alpha * op(A) op(B) + beta * C, row-major; op(A) is m x k.
struct Gemm {
  int m, n, k;
  const float* a;
  bool a_transposed;  // A stored k x m
  const float* b;
  bool b_transposed;  // B stored n x k
  float* c;
  float alpha, beta;
};
__host__ __device__ inline void gemm_element(const Gemm& g, int index) {
  const int row = index / g.n, col = index % g.n;
  float sum = 0.f;
  for (int p = 0; p < g.k; ++p) {
    const float av = g.a_transposed ? g.a[p * g.m + row] : g.a[row * g.k + p];
    const float bv = g.b_transposed ? g.b[col * g.k + p] : g.b[p * g.n + col];
    sum += av * bv;
  }
  g.c[index] = g.alpha * sum + (g.beta == 0.f ? 0.f : g.beta * g.c[index]);
}

struct Elementwise {
  int n;
  const float* x;
  const float* h;
  const float* y;
  float* out;
  float scale;
};
__host__ __device__ inline void residual_relu_element(const Elementwise& e, int i) {
  e.out[i] = e.x[i] + (e.h[i] > 0.f ? e.h[i] : 0.f);
}
// g = dx * relu'(h)
__host__ __device__ inline void relu_grad_element(const Elementwise& e, int i) {
  e.out[i] = e.h[i] > 0.f ? e.x[i] : 0.f;
}
// d = (x - y) * scale: the loss gradient.
__host__ __device__ inline void loss_grad_element(const Elementwise& e, int i) {
  e.out[i] = (e.x[i] - e.y[i]) * e.scale;
}
// p -= lr * g (x: the gradient, out: the parameter)
__host__ __device__ inline void sgd_element(const Elementwise& e, int i) { e.out[i] -= e.scale * e.x[i]; }

__global__ void gemm_kernel(Gemm g) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < g.m * g.n) gemm_element(g, i);
}
__global__ void residual_relu_kernel(Elementwise e) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < e.n) residual_relu_element(e, i);
}
__global__ void relu_grad_kernel(Elementwise e) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < e.n) relu_grad_element(e, i);
}
__global__ void loss_grad_kernel(Elementwise e) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < e.n) loss_grad_element(e, i);
}
__global__ void sgd_kernel(Elementwise e) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < e.n) sgd_element(e, i);
}

// ---- options -----------------------------------------------------------------------

struct Options {
  int tokens = 64, dim = 128, rank = 8, layers = 4, steps = 2;
  std::string device = "cuda";    // cuda | cpu
  std::string alloc = "malloc";   // malloc | async
  std::string annotate = "nvtx";  // nvtx | psc | none
  bool gradcheck = false, check = false;
  bool meminfo = false;  // sample cudaMemGetInfo after every allocation
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "lora_workload: %s\nusage: lora_workload [--tokens T] [--dim D] [--rank R] [--layers L] [--steps S]\n"
               "  [--device cuda|cpu] [--alloc malloc|async] [--annotate nvtx|psc|none] [--gradcheck] [--check]\n"
               "  [--meminfo]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    auto positive = [&]() {
      const int v = std::atoi(value().c_str());
      if (v <= 0) usage(("bad value for " + a).c_str());
      return v;
    };
    if (a == "--tokens")
      o.tokens = positive();
    else if (a == "--dim")
      o.dim = positive();
    else if (a == "--rank")
      o.rank = positive();
    else if (a == "--layers")
      o.layers = positive();
    else if (a == "--steps")
      o.steps = positive();
    else if (a == "--device")
      o.device = value();
    else if (a == "--alloc")
      o.alloc = value();
    else if (a == "--annotate")
      o.annotate = value();
    else if (a == "--gradcheck")
      o.gradcheck = true;
    else if (a == "--meminfo")
      o.meminfo = true;
    else if (a == "--check")
      o.check = true;
    else
      usage(("unknown option " + a).c_str());
  }
  if (o.device != "cuda" && o.device != "cpu") usage("--device must be cuda or cpu");
  if (o.alloc != "malloc" && o.alloc != "async") usage("--alloc must be malloc or async");
  if (o.annotate != "nvtx" && o.annotate != "psc" && o.annotate != "none")
    usage("--annotate must be nvtx, psc or none");
  if (o.gradcheck && o.device != "cpu") usage("--gradcheck runs on --device cpu");
  return o;
}

#define CUDA_OK(call)                                                                             \
  do {                                                                                            \
    const cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(3);                                                                               \
    }                                                                                             \
  } while (0)

// ---- annotations ---------------------------------------------------------------------

class Annotations {
 public:
  explicit Annotations(const std::string& mode) : mode_(mode) {
    if (mode_ == "psc") {
      push_ = reinterpret_cast<void (*)(const char*)>(dlsym(RTLD_DEFAULT, "psc_range_push"));
      pop_ = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "psc_range_pop"));
      mark_ = reinterpret_cast<void (*)(const char*, const char*)>(dlsym(RTLD_DEFAULT, "psc_mark"));
    }
  }
  void push(const std::string& name) {
    if (mode_ == "nvtx") nvtxRangePushA(name.c_str());
    if (push_) push_(name.c_str());
  }
  void pop() {
    if (mode_ == "nvtx") nvtxRangePop();
    if (pop_) pop_();
  }
  // The wave payload: NVTX carries one string, "<name> <json>" (see docs/python.md).
  void mark(const std::string& name, const std::string& json) {
    if (mode_ == "nvtx") nvtxMarkA((name + " " + json).c_str());
    if (mark_) mark_(name.c_str(), json.c_str());
  }

 private:
  std::string mode_;
  void (*push_)(const char*) = nullptr;
  void (*pop_)() = nullptr;
  void (*mark_)(const char*, const char*) = nullptr;
};

// ---- device: memory, copies, launches ------------------------------------------------

class Device {
 public:
  explicit Device(const Options& o) : cpu_(o.device == "cpu"), async_(o.alloc == "async"), meminfo_(o.meminfo) {
    if (!cpu_) {
      CUDA_OK(cudaSetDevice(0));
      CUDA_OK(cudaStreamCreate(&stream_));
      if (meminfo_) baseline_used_ = device_used();
    }
  }
  ~Device() {
    if (!cpu_) cudaStreamDestroy(stream_);
  }
  bool cpu() const { return cpu_; }

  float* alloc(size_t count) {
    const size_t bytes = count * sizeof(float);
    void* p = nullptr;
    if (cpu_) {
      p = std::calloc(count, sizeof(float));
      if (!p) std::exit(3);
    } else if (async_) {
      CUDA_OK(cudaMallocAsync(&p, bytes, stream_));
    } else {
      CUDA_OK(cudaMalloc(&p, bytes));
    }
    live_ += bytes;
    peak_ = live_ > peak_ ? live_ : peak_;
    ++allocations_;
    if (meminfo_ && !cpu_) {
      synchronize();  // stream-ordered allocations are made by the time the stream gets there
      const uint64_t used = device_used();
      used_peak_ = used > used_peak_ ? used : used_peak_;
    }
    sizes_[p] = bytes;
    return static_cast<float*>(p);
  }
  void free(float* p) {
    auto it = sizes_.find(p);
    if (it != sizes_.end()) {
      live_ -= it->second;
      sizes_.erase(it);
    }
    if (cpu_) {
      std::free(p);
    } else if (async_) {
      CUDA_OK(cudaFreeAsync(p, stream_));
    } else {
      CUDA_OK(cudaFree(p));
    }
  }
  void upload(float* dst, const std::vector<float>& src) {
    if (cpu_) {
      std::memcpy(dst, src.data(), src.size() * sizeof(float));
    } else {
      CUDA_OK(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
    }
  }
  std::vector<float> download(const float* src, size_t count) {
    std::vector<float> out(count);
    if (cpu_) {
      std::memcpy(out.data(), src, count * sizeof(float));
    } else {
      CUDA_OK(cudaMemcpyAsync(out.data(), src, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
      CUDA_OK(cudaStreamSynchronize(stream_));
    }
    return out;
  }
  void synchronize() {
    if (!cpu_) CUDA_OK(cudaStreamSynchronize(stream_));
  }

  void gemm(const Gemm& g) {
    if (cpu_) {
      for (int i = 0; i < g.m * g.n; ++i) gemm_element(g, i);
      return;
    }
    gemm_kernel<<<blocks(g.m * g.n), kThreads, 0, stream_>>>(g);
    launched();
  }
  template <void (*Body)(const Elementwise&, int)>
  void elementwise(void (*kernel)(Elementwise), const Elementwise& e) {
    if (cpu_) {
      for (int i = 0; i < e.n; ++i) Body(e, i);
      return;
    }
    kernel<<<blocks(e.n), kThreads, 0, stream_>>>(e);
    launched();
  }

  uint64_t peak_bytes() const { return peak_; }
  uint64_t live_bytes() const { return live_; }
  uint64_t launches() const { return launches_; }
  uint64_t allocations() const { return allocations_; }
  // What cudaMemGetInfo saw at most above the level after context creation (--meminfo).
  uint64_t device_used_peak() const { return used_peak_ > baseline_used_ ? used_peak_ - baseline_used_ : 0; }

 private:
  static constexpr int kThreads = 256;
  static unsigned blocks(int n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
  void launched() {
    ++launches_;
    CUDA_OK(cudaGetLastError());
  }

  bool cpu_, async_;
  cudaStream_t stream_ = nullptr;
  uint64_t device_used() {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return total_bytes - free_bytes;
  }

  bool meminfo_;
  uint64_t baseline_used_ = 0, used_peak_ = 0;
  uint64_t live_ = 0, peak_ = 0, launches_ = 0, allocations_ = 0;
  std::unordered_map<void*, size_t> sizes_;
};

// ---- the model -------------------------------------------------------------------------

struct Layer {
  float *w, *a, *b;
};

// Deterministic values in [-scale, scale).
std::vector<float> values(size_t count, uint64_t seed, float scale) {
  std::vector<float> out(count);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : out) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = (static_cast<float>((s >> 40) & 0xffffff) / 16777216.f * 2.f - 1.f) * scale;
  }
  return out;
}

class Model {
 public:
  Model(const Options& o, Device& dev, Annotations& notes) : o_(o), dev_(dev), notes_(notes) {
    const int T = o.tokens, D = o.dim, R = o.rank;
    for (int i = 0; i < o.layers; ++i) {
      Layer l{dev.alloc(size_t(D) * D), dev.alloc(size_t(D) * R), dev.alloc(size_t(R) * D)};
      dev.upload(l.w, values(size_t(D) * D, 10 + i, 1.f / std::sqrt(float(D))));
      dev.upload(l.a, values(size_t(D) * R, 20 + i, 1.f / std::sqrt(float(D))));
      dev.upload(l.b, values(size_t(R) * D, 30 + i, 0.05f));
      layers_.push_back(l);
    }
    x0_ = dev.alloc(size_t(T) * D);
    y_ = dev.alloc(size_t(T) * D);
    dev.upload(x0_, values(size_t(T) * D, 1, 1.f));
    dev.upload(y_, values(size_t(T) * D, 2, 1.f));
  }
  ~Model() {
    for (Layer& l : layers_) {
      dev_.free(l.w);
      dev_.free(l.a);
      dev_.free(l.b);
    }
    dev_.free(x0_);
    dev_.free(y_);
  }

  // One training step; returns the loss (computed on the host from x_L; meaningless
  // on the test doubles, whose device memory holds nothing).
  float step(int index, bool update) {
    const int T = o_.tokens, D = o_.dim, L = o_.layers;
    notes_.push("wave");
    notes_.mark("wave", "{\"tokens\": " + std::to_string(T) +
                            ", \"slots\": [\"a\"], \"groups\": 1, \"cold\": " + (index == 0 ? "true" : "false") + "}");
    std::vector<float*> x(L + 1, nullptr);
    x[0] = x0_;
    for (int i = 0; i < L; ++i) {
      notes_.push("forward/layer." + std::to_string(i));
      float *u, *h;
      compute_layer(i, x[i], &u, &h);
      x[i + 1] = dev_.alloc(size_t(T) * D);
      dev_.elementwise<residual_relu_element>(residual_relu_kernel, {T * D, x[i], h, nullptr, x[i + 1], 0.f});
      dev_.free(u);
      dev_.free(h);
      notes_.pop();
    }
    notes_.push("head/loss");
    const std::vector<float> out = dev_.download(x[L], size_t(T) * D);
    const std::vector<float> target = dev_.download(y_, size_t(T) * D);
    double loss = 0;
    for (size_t k = 0; k < out.size(); ++k) loss += 0.5 * double(out[k] - target[k]) * double(out[k] - target[k]);
    loss /= double(T) * D;
    float* dx = dev_.alloc(size_t(T) * D);
    dev_.elementwise<loss_grad_element>(loss_grad_kernel, {T * D, x[L], nullptr, y_, dx, 1.f / float(T * D)});
    dev_.free(x[L]);
    notes_.pop();
    grads_.assign(L, {nullptr, nullptr});
    for (int i = L - 1; i >= 0; --i) dx = backward_layer(i, x[i], dx, i > 0);
    dev_.free(dx);
    notes_.pop();  // wave
    notes_.push("optimizer/step");
    for (int i = 0; i < L; ++i) {
      const int DR = o_.dim * o_.rank;
      if (update) {
        dev_.elementwise<sgd_element>(sgd_kernel, {DR, grads_[i].first, nullptr, nullptr, layers_[i].a, kLearningRate});
        dev_.elementwise<sgd_element>(sgd_kernel,
                                      {DR, grads_[i].second, nullptr, nullptr, layers_[i].b, kLearningRate});
      }
      dev_.free(grads_[i].first);
      dev_.free(grads_[i].second);
    }
    dev_.synchronize();
    notes_.pop();
    return static_cast<float>(loss);
  }

  // Analytic gradients of the last step (before the update): for --gradcheck.
  std::vector<std::pair<std::vector<float>, std::vector<float>>> gradient_snapshot() {
    const int L = o_.layers;
    std::vector<std::pair<std::vector<float>, std::vector<float>>> out;
    kept_ = true;
    step(0, false);
    kept_ = false;
    for (int i = 0; i < L; ++i) out.push_back(kept_grads_[i]);
    return out;
  }
  float* parameter(int layer, bool b) { return b ? layers_[layer].b : layers_[layer].a; }

 private:
  static constexpr float kLearningRate = 0.5f;
  float scale() const { return 2.f / float(o_.rank); }

  // u = x A, h = x W + s u B
  void compute_layer(int i, const float* x, float** u, float** h) {
    const int T = o_.tokens, D = o_.dim, R = o_.rank;
    *u = dev_.alloc(size_t(T) * R);
    *h = dev_.alloc(size_t(T) * D);
    dev_.gemm({T, R, D, x, false, layers_[i].a, false, *u, 1.f, 0.f});
    dev_.gemm({T, D, D, x, false, layers_[i].w, false, *h, 1.f, 0.f});
    dev_.gemm({T, D, R, *u, false, layers_[i].b, false, *h, scale(), 1.f});
  }

  // Recomputes layer i from its saved input, then its backward. Returns dx_i.
  float* backward_layer(int i, float* x, float* dx_next, bool free_input) {
    const int T = o_.tokens, D = o_.dim, R = o_.rank;
    notes_.push("recompute/layer." + std::to_string(i));
    float *u, *h;
    compute_layer(i, x, &u, &h);
    notes_.pop();
    notes_.push("backward/layer." + std::to_string(i));
    float* g = dev_.alloc(size_t(T) * D);
    dev_.elementwise<relu_grad_element>(relu_grad_kernel, {T * D, dx_next, h, nullptr, g, 0.f});
    float* db = dev_.alloc(size_t(R) * D);
    dev_.gemm({R, D, T, u, true, g, false, db, scale(), 0.f});  // dB = s u^T g
    float* du = dev_.alloc(size_t(T) * R);
    dev_.gemm({T, R, D, g, false, layers_[i].b, true, du, scale(), 0.f});  // du = s g B^T
    float* da = dev_.alloc(size_t(D) * R);
    dev_.gemm({D, R, T, x, true, du, false, da, 1.f, 0.f});  // dA = x^T du
    float* dx = dev_.alloc(size_t(T) * D);
    dev_.gemm({T, D, D, g, false, layers_[i].w, true, dx, 1.f, 0.f});                         // g W^T
    dev_.gemm({T, D, R, du, false, layers_[i].a, true, dx, 1.f, 1.f});                        // + du A^T
    dev_.elementwise<sgd_element>(sgd_kernel, {T * D, dx_next, nullptr, nullptr, dx, -1.f});  // + dx_next
    if (kept_) kept_grads_[i] = {dev_.download(da, size_t(D) * R), dev_.download(db, size_t(R) * D)};
    grads_[i] = {da, db};
    dev_.free(u);
    dev_.free(h);
    dev_.free(g);
    dev_.free(du);
    dev_.free(dx_next);
    if (free_input) dev_.free(x);  // the boundary of layer i dies with its backward
    notes_.pop();
    return dx;
  }

  const Options& o_;
  Device& dev_;
  Annotations& notes_;
  std::vector<Layer> layers_;
  float *x0_, *y_;
  std::vector<std::pair<float*, float*>> grads_;
  bool kept_ = false;
  std::vector<std::pair<std::vector<float>, std::vector<float>>> kept_grads_ =
      std::vector<std::pair<std::vector<float>, std::vector<float>>>(64);
};

// Central differences on a few entries of A_0 and B_{L-1}; the worst relative error.
double gradcheck(const Options& o) {
  Device dev(o);
  Annotations none("none");
  Model model(o, dev, none);
  const auto grads = model.gradient_snapshot();
  const float eps = 1e-2f;
  double worst = 0;
  auto probe = [&](int layer, bool b, int entry) {
    float* p = model.parameter(layer, b) + entry;
    const float saved = *p;
    *p = saved + eps;
    const double up = model.step(1, false);
    *p = saved - eps;
    const double down = model.step(1, false);
    *p = saved;
    const double numeric = (up - down) / (2.0 * eps);
    const double analytic = b ? grads[layer].second[entry] : grads[layer].first[entry];
    const double error = std::fabs(numeric - analytic) / std::max(1e-4, std::fabs(numeric) + std::fabs(analytic));
    std::printf("grad layer %d %s[%d] analytic %.6g numeric %.6g\n", layer, b ? "B" : "A", entry, analytic, numeric);
    worst = std::max(worst, error);
  };
  for (int entry : {0, 7, o.dim * o.rank / 2 + 3}) {
    probe(0, false, entry);
    probe(o.layers - 1, true, entry);
  }
  return worst;
}

std::vector<float> train(const Options& o, Device& dev, Annotations& notes) {
  std::vector<float> losses;
  Model model(o, dev, notes);
  for (int s = 0; s < o.steps; ++s) losses.push_back(model.step(s, true));
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.gradcheck) {
    const double worst = gradcheck(o);
    std::printf("gradcheck_worst_relative_error %.3g\n", worst);
    return worst < 2e-2 ? 0 : 1;
  }
  Annotations notes(o.annotate);
  Device dev(o);
  const std::vector<float> losses = train(o, dev, notes);
  for (size_t s = 0; s < losses.size(); ++s) std::printf("loss_step%zu %.6f\n", s, losses[s]);
  std::printf("workload_peak_bytes %llu\n", static_cast<unsigned long long>(dev.peak_bytes()));
  std::printf("workload_live_bytes_at_exit %llu\n", static_cast<unsigned long long>(dev.live_bytes()));
  std::printf("kernel_launches %llu\n", static_cast<unsigned long long>(dev.launches()));
  std::printf("allocations %llu\n", static_cast<unsigned long long>(dev.allocations()));
  if (o.meminfo) std::printf("device_used_peak_bytes %llu\n", static_cast<unsigned long long>(dev.device_used_peak()));
  if (o.check && !dev.cpu()) {
    // The same run on the host: the GPU's losses must agree.
    Options host = o;
    host.device = "cpu";
    Device cpu(host);
    Annotations none("none");
    const std::vector<float> expected = train(host, cpu, none);
    double worst = 0;
    for (size_t s = 0; s < losses.size(); ++s)
      worst =
          std::max(worst, std::fabs(double(losses[s]) - expected[s]) / std::max(1e-6, std::fabs(double(expected[s]))));
    std::printf("check_worst_relative_error %.3g\n", worst);
    return worst < 1e-3 ? 0 : 1;
  }
  return 0;
}
