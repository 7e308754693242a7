/* The calibrated predictor (estimator/predict.h) behind a C ABI:
 * libpeakscope_estimator.so, what python/peakscope/calibration.py calls
 * through ctypes. Prices of waves nobody recorded, from a cal.json written by
 * `peakscope calibrate`, and the largest wave that fits a budget.
 *
 * Structs are versioned: the caller sets `size` to sizeof the struct it was
 * compiled with. Fields are only ever appended, so the library reads (and
 * writes) a struct only as far as its `size` says, giving fields the caller
 * does not know their defaults. A struct shorter than its first version is
 * bad input.
 *
 * No C++ exception crosses these functions. Every text written into a
 * caller's buffer (error, message) is NUL-terminated and cut to fit.
 * A calibration is read-only once loaded: any number of threads may price
 * from one handle at once.
 */
#ifndef PEAKSCOPE_ESTIMATOR_H
#define PEAKSCOPE_ESTIMATOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PSC_ESTIMATOR_ABI_VERSION 3

/* Return codes. */
#define PSC_OK 0
#define PSC_BAD_INPUT 2 /* the message says which field and why */
#define PSC_INTERNAL 3  /* the estimator failed (out of memory, a bug): the message says what */

/* psc_price.peak_moment: which moment of the peak group's backward holds the peak. */
#define PSC_MOMENT_NONE 0 /* the peak group has no moments (or there is no group) */
#define PSC_MOMENT_HEAD 1
#define PSC_MOMENT_BEFORE_GRADIENT 2
#define PSC_MOMENT_AFTER_GRADIENT 3
#define PSC_MOMENT_FORWARD 4 /* the peak group's forward, in a known backward order */

/* psc_price.extrapolated: flags. */
#define PSC_EXTRAPOLATED_OUTSIDE 1   /* a term priced outside the sizes it was calibrated on */
#define PSC_EXTRAPOLATED_FEW_SIZES 2 /* a term calibrated from fewer than 3 sizes */
#define PSC_EXTRAPOLATED_WAITING 4   /* groups priced waiting with a bound: no calibration wave measured it (v2) */
/* a group no calibration wave bounds though each feature lies inside: one
   sequence against packed waves only or shorter than any calibrated, or a
   packing of shorter sequences than any calibrated (v3) */
#define PSC_EXTRAPOLATED_UNBOUNDED 8

/* psc_wave_request.cold: 0 a warm wave; PSC_COLD a shape not run before,
 * priced as if it were the process's first wave (the workspaces and modules a
 * process keeps from its first wave on); PSC_COLD_AFTER_FIRST_WAVE a shape
 * not run before in a process that has run a wave. */
#define PSC_COLD 1
#define PSC_COLD_AFTER_FIRST_WAVE 2

typedef struct psc_calibration psc_calibration;

/* One wave to price (or, for psc_calibration_admit, the shape of the waves). */
typedef struct psc_wave_request {
  size_t size; /* sizeof(psc_wave_request) */
  int64_t tokens;
  /* A packed wave's sequence lengths, adding up to `tokens`; NULL or 0: one sequence. */
  const int64_t* sequence_lengths;
  size_t sequence_count;
  /* The slots trained, one gradient group each, in forward order, comma-separated
   * ("a,b"); NULL or "": the calibration's only slot. */
  const char* slots;
  int cold;            /* a shape not run before: the first-execution allowance (PSC_COLD_*) */
  int gradients_exist; /* a later wave of gradient accumulation: nothing pending */
  /* Version 2: each gradient group's own size, in forward order, its slot the
   * entry of `slots` of the same index. With groups, `tokens` is 0 or their
   * sum and `sequence_lengths` is unused; group_count 0: `tokens` split
   * evenly between the slots. For psc_calibration_admit the group tokens are
   * relative shares of the wave. */
  const int64_t* group_tokens;
  size_t group_count;
  /* Each group's packed sequence lengths, one group after another,
   * group_sequence_counts[g] of them for group g (0: one sequence); NULL:
   * every group one sequence. */
  const int64_t* group_sequence_lengths;
  const size_t* group_sequence_counts;
  /* Version 3: the order the groups' backwards run, as indices into the
   * groups, when the trainer fixes it (every index once); NULL or 0: any
   * order, priced at the worst. For psc_calibration_admit, every width is
   * priced in that order. */
  const int32_t* backward_order;
  size_t backward_order_count;
} psc_wave_request;

/* A price, in bytes (pricing/pricing.h Price and Components). */
typedef struct psc_price {
  size_t size;            /* sizeof(psc_price) */
  int64_t raw_bytes;      /* the unscaled sum: compare with a measured peak */
  int64_t required_bytes; /* floor(raw_bytes x safety factor) */
  int64_t output;
  int64_t retained;
  int64_t workspace;
  int64_t input_gradient;
  int64_t adapter_gradient;
  int64_t moment;
  int64_t transient;
  int32_t peak_layer;   /* the layer whose recompute holds the peak; -1: none (or the head) */
  int32_t peak_moment;  /* PSC_MOMENT_* */
  int32_t extrapolated; /* PSC_EXTRAPOLATED_* flags; 0: every term within its calibration */
  /* Version 2: what the other groups' head state adds to the worst order. */
  int64_t waiting;
} psc_price;

typedef struct psc_admission {
  size_t size;                 /* sizeof(psc_admission) */
  int64_t admitted_tokens;     /* the largest width that fits; 0: not one token */
  int64_t search_prices;       /* exact prices the search evaluated */
  int64_t next_required_bytes; /* required_bytes one token wider; -1: max_tokens admitted */
  /* The price at admitted_tokens, all zero when 0 tokens are admitted. Its own
   * `size` is the caller's too (set it to sizeof(psc_price)). */
  psc_price price;
} psc_admission;

/* Reads a cal.json. NULL on failure, with one line naming the file and what is
 * wrong with it (unreadable, not JSON, a field missing or wrong) in `error`. */
psc_calibration* psc_calibration_load(const char* path, char* error, size_t error_size);

void psc_calibration_free(psc_calibration* calibration);

/* Prices one wave. PSC_OK: `out` holds the price and `message` the warnings
 * (one per line, "" when the price extrapolated nothing). PSC_BAD_INPUT:
 * `message` holds "field: reason" (tokens, sequences, slots[i], ...) and `out`
 * is left as it was. */
int psc_calibration_price(const psc_calibration* calibration, const psc_wave_request* request, psc_price* out,
                          char* message, size_t message_size);

/* The tokens each group of a wave of `tokens` tokens shaped like `shape`
 * gets (its group tokens taken as relative shares, as psc_calibration_admit
 * splits a wave): written to `group_tokens`, `count` entries (shape's
 * group_count). */
int psc_calibration_group_split(const psc_wave_request* shape, int64_t tokens, int64_t* group_tokens, size_t count,
                                char* message, size_t message_size);
/* The largest wave, 1..max_tokens tokens, shaped like `shape` (its tokens and
 * sequences ignored), whose required bytes fit `budget_bytes`; packed into
 * sequences of at most `max_sequence_length` tokens (0: one sequence).
 * `message` as for psc_calibration_price (warnings of the admitted price). */
int psc_calibration_admit(const psc_calibration* calibration, const psc_wave_request* shape, int64_t budget_bytes,
                          int64_t max_tokens, int64_t max_sequence_length, psc_admission* out, char* message,
                          size_t message_size);

#ifdef __cplusplus
}
#endif

#endif /* PEAKSCOPE_ESTIMATOR_H */
