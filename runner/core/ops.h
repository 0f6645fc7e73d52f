// The operations of a transformer training step on one rank's shard (llm.c style: free
// functions, row-major arrays, shapes in comments). Two backends, one API: ops_cpu.cc (OpenMP
// loops over the row kernels of kernels.h, GEMMs by Eigen) and the GPU build (device_gpu.cc and
// one *_gpu.cc file per family of ops: the same row kernels as GPU kernels with warp and block
// reductions; gemm_gpu.cc: GEMMs by cuBLAS/hipBLAS).
// The linear layers and attention are written once over Gemm (gemm_layers.cc), so the CPU tests
// pin every transpose, leading dimension and batch stride the GPU hands its BLAS. Pointers are
// device memory: host memory on the CPU backend. B micro-batch, T sequence, C hidden,
// Cl = C / tp, NHl heads per rank, F MLP width, Fl = F / tp, V vocabulary, Vl = V / tp.
// `precision` (0 fp32, 1 fp16, 2 bf16): the storage grid the inputs lie on, and the outputs are
// rounded to where the op says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/core/real.h"

namespace tunepar::core {

// A device runtime or library call failed (the trial ends as a crash, with this message).
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- Backend: device discovery and memory.
std::string BackendName();     // "cpu" | "hip" | "cuda"
std::string BackendVersion();  // e.g. "Eigen 3.4.0, OpenMP 201511"
// Devices visible to this process (the CPU backend has one: the host).
int DeviceCount();
// Memory of device `index` in bytes (0: not a device of its own; the CPU backend's host).
double MemoryOfDevice(int index);
// Device `index`'s PCI bus id ("0000:3b:00.0"; "" for the CPU backend's host), where sysfs says
// which CPUs are near it (device_cpus.h).
std::string DevicePciBusId(int index);
// Binds this process to a device; returns a description ("cpu", "hip:0 AMD Instinct MI250X").
std::string UseDevice(int index);
// Device memory, zeroed unless `zeroed` is false (then its contents are undefined: the CPU
// backend fills it with NaN, so a read before the first write shows in the tests); nullptr when
// the device is out of memory.
void* DeviceAllocate(size_t bytes, bool zeroed = true);
void DeviceFree(void* p);
void Upload(void* device, const void* host, size_t bytes);
void Download(void* host, const void* device, size_t bytes);
// Upload queued on the compute stream without waiting for it: `host` may be reused on return
// (the GPU copies it into page-locked staging first, reused once its copy has run), so the host
// keeps queueing work ahead of the device (a micro-batch's tokens).
void UploadAsync(void* device, const void* host, size_t bytes);
void Synchronize();
// Device scratch for one op's intermediates, by slot: 0 attention's scores (forward) and dP
// (backward), 1 its widened probabilities (16-bit backward), 2 and 3 the 16-bit weight vectors
// widened for the ops that read fp32 vectors (block.h StageWeights). Valid until the slot's next
// use; not tracked, like a framework's library workspace (it was never part of the memory
// accounting).
inline constexpr int kOpScratchSlots = 4;
real* OpScratch(size_t values, int slot = 0);

// Threads per rank for the loops and GEMMs (the cores a rank owns; CPU backend).
void SetThreads(int threads);

// ---- Streams and events. Every kernel, GEMM, copy and stream-ordered collective runs on the
// compute stream, in the order the host queues them; the communication stream runs what
// overlaps them (the bucketed data-parallel all-reduce with nccl). An event marks a point in one
// stream's queued work: another stream can wait for it without the host waiting, and the time
// between two events is device time, which is what the step's phases are made of (parallel.h).
// The CPU backend runs everything in order on the host: an event is the time it was recorded,
// it is always done, and waiting for it is nothing.
enum class Stream { kCompute, kComm };
class DeviceEvent {
 public:
  DeviceEvent() = default;
  ~DeviceEvent();
  DeviceEvent(DeviceEvent&& other) noexcept;
  DeviceEvent& operator=(DeviceEvent&& other) noexcept;
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;

  void Record(Stream stream);       // after the work queued on `stream` so far
  bool Done() const;                // the stream has run past it (true when never recorded)
  void Await(Stream stream) const;  // `stream`'s later work waits for it; the host does not
  // Seconds from `from` to `to` (waits for both; negative when `to` came first).
  friend double SecondsBetween(const DeviceEvent& from, const DeviceEvent& to);

 private:
  void* event_ = nullptr;  // the GPU's event, made on first Record
  [[maybe_unused]] double time_ = 0;  // the CPU backend's: when it was recorded
};

// ---- Element-wise.
void Fill(real* p, int64_t n, real value);
void Copy(real* dst, const real* src, int64_t n);
void Scale(real* p, int64_t n, real factor);
void Add(real* out, const real* a, const real* b, int64_t n);  // out = a + b
// A residual connection at storage width: out = round(x + round(branch)) (the branch is rounded
// first, as when it was stored on its own).
void ResidualAdd(real* out, const real* x, const real* branch, int64_t n, int precision);
void Accumulate(real* a, const real* b, int64_t n);            // a += b
// Values kept in 16 bits are rounded in place (precision 0 = fp32: nothing to do).
void RoundStorage(real* p, int64_t n, int precision);

// ---- GEMM in BLAS terms: column-major, as BLAS, cuBLAS and hipBLAS see memory. For each of
// batch.count problems i: C_i = alpha op(A_i) op(B_i) + beta C_i, with op(A_i) m x k, op(B_i)
// k x n, C_i m x n, X_i = X + i batch.stride_x, leading dimensions lda, ldb, ldc (a row-major
// (r, c) array is a column-major (c, r) one with ld c). `precision`: the grid A and B lie on;
// with 1 or 2 the GPU multiplies them in 16 bits on tensor/matrix cores (exact: the values are
// 16-bit values) with fp32 accumulation; the CPU always multiplies in fp32.
enum class Op { kN, kT };
struct GemmBatch {
  int count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};
void Gemm(Op op_a, Op op_b, int m, int n, int k, real alpha, const real* A, int lda, const real* B, int ldb,
          real beta, real* C, int ldc, const GemmBatch& batch = {}, int precision = 0);
// The values a GEMM operand spans from its first: op(X) is rows x cols, stored transposed when
// op is kT, `count` problems `stride` apart (what a backend copies to convert it).
inline int64_t OperandSpan(Op op, int rows, int cols, int ld, int count, int64_t stride) {
  const int stored_rows = op == Op::kT ? cols : rows, stored_cols = op == Op::kT ? rows : cols;
  return int64_t{count - 1} * stride + int64_t{stored_cols - 1} * ld + stored_rows;
}

// ---- 16-bit operands: values on the fp16 (precision 1) or bf16 (2) grid held as 16-bit numbers,
// what tensor/matrix cores read. To16Bit is exact for such values; Gemm16 is Gemm with A and B
// given so (the CPU reads them back to fp32, exactly). OpScratch16: device scratch per purpose.
void To16Bit(uint16_t* out, const real* in, int64_t n, int precision);
void From16Bit(real* out, const uint16_t* in, int64_t n, int precision);  // exact
// To16Bit of values not on the grid yet: each rounded to nearest even first (fp32 master weights
// to 16-bit storage).
void Round16Bit(uint16_t* out, const real* in, int64_t n, int precision);
void Gemm16(Op op_a, Op op_b, int m, int n, int k, real alpha, const uint16_t* A, int lda, const uint16_t* B,
            int ldb, real beta, real* C, int ldc, const GemmBatch& batch, int precision);
// The same with C in 16-bit storage: C = round(alpha op(A) op(B) + beta C), summed in fp32 and
// rounded once (the GPU's BLAS writes 16-bit outputs itself; C read first when beta != 0).
void Gemm16(Op op_a, Op op_b, int m, int n, int k, real alpha, const uint16_t* A, int lda, const uint16_t* B,
            int ldb, real beta, uint16_t* C, int ldc, const GemmBatch& batch, int precision);
// A linear layer's 16-bit output with its bias: C (m x n, 16-bit, ld m) = round(op(A) op(B) + bias),
// bias (m values on the grid, one per row of C: a layer's output features; may be null), added to
// the fp32 sums before their one rounding (a second rounding, of the product before the bias is
// added, is off by many steps of the result's grid where the bias cancels most of the product).
// The CUDA build adds it in cublasLt's epilogue; the others sum into fp32 scratch and round with
// AddBiasTo16Bit.
void Gemm16Bias(Op op_a, Op op_b, int m, int n, int k, const uint16_t* A, int lda, const uint16_t* B, int ldb,
                const real* bias, uint16_t* C, int precision);
// out (N, OC) = round(sums (N, OC) + bias (OC; may be null)) as 16-bit numbers: fp32 addition,
// one rounding.
void AddBiasTo16Bit(uint16_t* out, const real* sums, const real* bias, int N, int OC, int precision);
// Slots: a layer's input (or attention's qkv), the gradient of its output, its weights (or
// attention's probabilities), attention's score gradients, an op's 16-bit output handed back
// as reals (the real-held forms of the 16-bit ops).
enum class Scratch16 { kInput, kOutputGrad, kMatrix, kScoreGrads, kOutput, kCount };
void Copy16(uint16_t* dst, const uint16_t* src, int64_t n);
void Zero16(uint16_t* p, int64_t n);  // +0 in both formats
uint16_t* OpScratch16(Scratch16 slot, size_t values);

// out (N, OC) += bias (OC) on every row, then rounded to `precision`.
void AddBias(real* out, const real* bias, int N, int OC, int precision = 0);
// dbias (OC) += the column sums of dout (N, OC).
void BiasBackward(real* dbias, const real* dout, int N, int OC);

// Causal softmax over `rows` rows of T scores (row r is query position r % T), in place, outputs
// rounded to `precision`: p = softmax(s) over t2 <= t, zeros past t; also as 16-bit numbers into
// out16 when it is not null (precision 1 or 2).
void CausalSoftmaxForward(real* att, int64_t rows, int T, int precision, uint16_t* out16 = nullptr);
// In place: dp (rows, T) becomes scale * p (dp - sum_j p_j dp_j), rounded to `precision` (and
// into out16 as above).
void CausalSoftmaxBackward(real* dp, const real* p, int64_t rows, int T, real scale, int precision,
                           uint16_t* out16 = nullptr);

// ---- Layers (gemm_layers.cc: Gemm and the ops above, the same code on every backend).
// out (N, OC) = inp (N, C) w^T (w: (OC, C)) + bias (OC, may be null), rounded to `round_to`
// (0: left in fp32, e.g. a partial sum to be all-reduced before it is rounded).
void MatmulForward(real* out, const real* inp, const real* w, const real* bias, int N, int C, int OC,
                   int precision = 0, int round_to = 0);
// dinp (N, C) = dout w (overwritten; rounded to `round_dinp_to`); dw (OC, C) += dout^T inp and
// dbias (OC) += column sums of dout (accumulated over micro-batches). dinp, dbias may be null.
void MatmulBackward(real* dinp, real* dw, real* dbias, const real* dout, const real* inp, const real* w,
                    int N, int C, int OC, int precision = 0, int round_dinp_to = 0);
// The same with the layer's input, weights and output gradient in 16-bit storage (precision 1 or
// 2), as block.h holds them: the GEMMs read them as they are. The output into reals (rounded to
// `round_to`: 0 for a row-parallel layer's partial sum and for the logits, which the
// cross-entropy rounds as it reads them) or straight into
// 16-bit storage (Gemm16Bias: the bias added to the fp32 sums, one rounding); the gradient
// of the input written as 16-bit numbers, or (real dinp) left in fp32 unrounded: a
// column-parallel layer's partial sum, all-reduced over TP before it is rounded.
void MatmulForward16(real* out, const uint16_t* inp, const uint16_t* w, const real* bias, int N, int C, int OC,
                     int precision, int round_to);
void MatmulForward16(uint16_t* out, const uint16_t* inp, const uint16_t* w, const real* bias, int N, int C, int OC,
                     int precision);
void MatmulBackward16(uint16_t* dinp, real* dw, real* dbias, const uint16_t* dout, const uint16_t* inp,
                      const uint16_t* w, int N, int C, int OC, int precision);
void MatmulBackward16(real* dinp, real* dw, real* dbias, const uint16_t* dout, const uint16_t* inp,
                      const uint16_t* w, int N, int C, int OC, int precision);

// out (N, C) = layernorm(inp); mean, rstd (N) saved for the backward. dinp, dw, db accumulate
// (dinp holds the residual branch's gradient already). RMSNorm when mean is null (and then b and
// db are null: kernels.h LayerNormRow).
// `precision`: out, and dinp after the accumulation, are rounded to it.
void LayerNormForward(real* out, real* mean, real* rstd, const real* inp, const real* w, const real* b, int N,
                      int C, int precision = 0);
void LayerNormBackward(real* dinp, real* dw, real* db, const real* dout, const real* inp, const real* w,
                       const real* mean, const real* rstd, int N, int C, int precision = 0);

// qkv (B, T, 3 Cl) -> att (B, NHl, T, T) probabilities and y (B, T, Cl), both rounded to
// `precision`; causal. Per sequence, one strided-batched GEMM over the heads for S = Q K^T / sqrt(hs), the
// row softmax, one for y = P V.
// Grouped-query attention when KVl < NHl (the last argument; 0: KVl = NHl): qkv rows are
// [Q (NHl hs) | K (KVl hs) | V (KVl hs)], query head q reads K/V head q / (NHl / KVl) (Meta's
// repeat_kv order); a K/V head's gradients sum its group's in ascending order, no atomics.
void AttentionForward(real* y, real* att, const real* qkv, int B, int T, int Cl, int NHl, int precision = 0,
                      int KVl = 0);
// dqkv (B, T, 3 Cl) = the gradient from dy (B, T, Cl) (overwritten; rounded to `precision`).
// dP, then dS, one sequence at a time in OpScratch (NHl T T values).
void AttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* att, int B, int T, int Cl,
                       int NHl, int precision = 0, int KVl = 0);
// The same with 16-bit storage (precision 1 or 2): qkv, the probabilities att, y, dy and dqkv
// are 16-bit numbers, read and written by the GEMMs as they are (the two above, given 16-bit
// values held in reals, run through these). A sequence's scores are computed in fp32 in
// OpScratch and the softmax writes them to att in 16 bits; the backward widens a sequence's
// probabilities into OpScratch slot 1.
void AttentionForward16(uint16_t* y, uint16_t* att, const uint16_t* qkv, int B, int T, int Cl, int NHl,
                        int precision, int KVl = 0);
void AttentionBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* att, int B, int T,
                         int Cl, int NHl, int precision, int KVl = 0);

// Fused causal attention (flash_attention.h: the tiling and the online softmax), no T x T array
// anywhere: y (B, T, Cl) from qkv (B, T, 3 Cl), rounded once to `precision`, and per (b, head,
// row) the log-sum-exp of the row's scaled scores, lse (B, NHl, T; fp32), saved for the backward
// in place of the probabilities. The backward recomputes the probabilities tile by tile from qkv
// and lse, with D = rowsum(dy o y) (so it reads y too); dqkv (B, T, 3 Cl) is overwritten, rounded
// to `precision`. The 16-bit forms read and write qkv, y, dy and dqkv as 16-bit numbers.
// KVl: K/V heads of grouped-query attention (0: NHl), as AttentionForward.
void FlashAttentionForward(real* y, real* lse, const real* qkv, int B, int T, int Cl, int NHl, int precision = 0,
                           int KVl = 0);
void FlashAttentionBackward(real* dqkv, const real* dy, const real* qkv, const real* y, const real* lse, int B,
                            int T, int Cl, int NHl, int precision = 0, int KVl = 0);
void FlashAttentionForward16(uint16_t* y, real* lse, const uint16_t* qkv, int B, int T, int Cl, int NHl,
                             int precision, int KVl = 0);
void FlashAttentionBackward16(uint16_t* dqkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* y,
                              const real* lse, int B, int T, int Cl, int NHl, int precision, int KVl = 0);

// Ring attention's blocks (context parallelism, context_parallel.h; flash_attention.h RingBlock):
// the queries of qkv (B, T, (NHl + 2 KVl) hs: this rank's T rows, two chunks of the sequence of
// cp ranks) against one K/V block kv (B, T, 2 KVl hs: rank key_rank's K then V columns), masked
// by sequence positions. Forward merges the block's output into the running output acc (B, T, Cl;
// fp32, zero before the first block) and its log-sum-exp lse (B, NHl, T; -inf before the first
// block). Backward (y and lse the final ones) adds the block's part of dQ to dq (B, T, Cl; fp32)
// and of dK, dV to dkv (B, T, 2 KVl hs; fp32). The 16-bit forms read qkv, kv, y, dy as 16-bit
// numbers. The CUDA build runs them on its CUDA-core flash kernels; the HIP build's refuse
// (supported_knobs.h pins cp 1 there).
void FlashAttentionBlockForward(real* acc, real* lse, const real* qkv, const real* kv, int cp, int query_rank,
                                int key_rank, int B, int T, int Cl, int NHl, int precision, int KVl);
void FlashAttentionBlockForward16(real* acc, real* lse, const uint16_t* qkv, const uint16_t* kv, int cp,
                                  int query_rank, int key_rank, int B, int T, int Cl, int NHl, int precision, int KVl);
void FlashAttentionBlockBackward(real* dq, real* dkv, const real* dy, const real* qkv, const real* kv, const real* y,
                                 const real* lse, int cp, int query_rank, int key_rank, int B, int T, int Cl, int NHl,
                                 int precision, int KVl);
void FlashAttentionBlockBackward16(real* dq, real* dkv, const uint16_t* dy, const uint16_t* qkv, const uint16_t* kv,
                                   const uint16_t* y, const real* lse, int cp, int query_rank, int key_rank, int B,
                                   int T, int Cl, int NHl, int precision, int KVl);
// dst (rows, width) = columns [first, first + width) of src (rows, ld), elements of
// `element_bytes` copied as they are (a K/V block out of qkv).
void CopyColumns(void* dst, const void* src, int64_t rows, int ld, int first, int width, size_t element_bytes);
// Columns [first, first + width) of dst (rows, ld) = src (rows, width; fp32) rounded to
// `precision`, as reals or (StoreColumns16) as 16-bit numbers.
void StoreColumns(real* dst, const real* src, int64_t rows, int ld, int first, int width, int precision);
void StoreColumns16(uint16_t* dst, const real* src, int64_t rows, int ld, int first, int width, int precision);

// SwiGLU: out (N, Fl) = silu(gate) up from inp (N, 2 Fl) = [gate | up] per row (kernels.h);
// dinp (N, 2 Fl) overwritten from dout (N, Fl). Outputs rounded to `precision`.
void SwigluForward(real* out, const real* inp, int N, int Fl, int precision = 0);
void SwigluBackward(real* dinp, const real* inp, const real* dout, int N, int Fl, int precision = 0);
void SwigluForward16(uint16_t* out, const uint16_t* inp, int N, int Fl, int precision);
void SwigluBackward16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int N, int Fl, int precision);
// Rotary positions in place on qkv (N, ld): the first `rotated` columns (the Q and K heads of hs
// values; N rows of sequences of T) turned by their position's angles, or back (`inverse`: the
// backward pass, on dqkv). Rounded to `precision` as written. Row n is at position
// position0 + n % T (context parallelism: a chunk of the sequence starting at position0).
void Rotary(real* qkv, int N, int T, int rotated, int ld, int hs, bool inverse, int precision = 0, int position0 = 0);
void Rotary16(uint16_t* qkv, int N, int T, int rotated, int ld, int hs, bool inverse, int precision,
              int position0 = 0);
// Outputs rounded to `precision`.
void GeluForward(real* out, const real* inp, int64_t n, int precision = 0);
void GeluBackward(real* dinp, const real* inp, const real* dout, int64_t n, int precision = 0);  // gelu'(inp) dout

// ---- Activations and activation gradients in 16-bit storage (precision 1 or 2): the row ops
// above reading and writing 16-bit numbers as they are (kernels.h SixteenBitValues,
// SixteenBitOutputs), each output rounded once from fp32 arithmetic, so no fp32 copy of an
// activation or of its gradient is made. LayerNormBackward16 accumulates into dinp (16-bit:
// read, added to, rounded); its dout is the all-reduced fp32 gradient of the normalised output.
void ResidualAdd16(uint16_t* out, const uint16_t* x, const real* branch, int64_t n, int precision);
void LayerNormForward16(uint16_t* out, real* mean, real* rstd, const uint16_t* inp, const real* w, const real* b,
                        int N, int C, int precision);
void LayerNormBackward16(uint16_t* dinp, real* dw, real* db, const real* dout, const uint16_t* inp, const real* w,
                         const real* mean, const real* rstd, int N, int C, int precision);
void GeluForward16(uint16_t* out, const uint16_t* inp, int64_t n, int precision);
void GeluBackward16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int64_t n, int precision);
void BiasBackward16(real* dbias, const uint16_t* dout, int N, int OC, int precision);

// Vocabulary-parallel token embedding: out (B, T, C) = wte[token - v0] for tokens held here
// (v0 <= token < v0 + Vl), zero otherwise, + wpe[t] when wpe is not null. The TP all-reduce
// that completes the lookup is the caller's.
void EncoderForward(real* out, const int* tokens, const real* wte, const real* wpe, int v0, int Vl, int B,
                    int T, int C);
void EncoderBackward(real* dwte, real* dwpe, const real* dout, const int* tokens, int v0, int Vl, int B,
                     int T, int C);
// EncoderForward from a token-embedding table in 16-bit storage; EncoderBackward from a 16-bit
// gradient.
void EncoderForward16(real* out, const int* tokens, const uint16_t* wte, const real* wpe, int v0, int Vl, int B,
                      int T, int C, int precision);
void EncoderBackward16(real* dwte, real* dwpe, const uint16_t* dout, const int* tokens, int v0, int Vl, int B,
                       int T, int C, int precision);

// Vocabulary-parallel cross-entropy, rows of Vl logits (kernels.h): row_max (N), row_sum (N)
// of exp(logit - max), target_logit (N: the logit of the target when this rank holds it, else 0).
// The logits are the LM head's fp32 sums; with 16-bit storage (`precision` 1 or 2) each is
// rounded to the 16-bit grid as it is read (kernels.h RoundedValues), arithmetic in fp32: the
// result is that on logits rounded in place, with no pass over them before.
void CrossEntropyStats(real* row_max, real* row_sum, real* target_logit, const real* logits,
                       const int* targets, const real* global_max, int v0, int N, int Vl, int precision = 0);
// The loss from the all-reduced statistics, on the device: row_max (N) becomes log_sum =
// log(row_sum) + row_max per row, and *loss (one double, device memory) = the sum over the rows
// of log_sum - target_logit, accumulated in double (read back once per step, not per micro-batch).
void CrossEntropyLoss(real* row_max, const real* row_sum, const real* target_logit, int N, double* loss);
// dlogits (N, Vl) = (softmax - onehot) * scale, log_sum (N) over the whole vocabulary; the
// logits read rounded to `precision` as above, dlogits rounded to it (may be the logits' storage).
void CrossEntropyBackward(real* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                          real scale, int N, int Vl, int precision = 0);
// The same written as 16-bit numbers (precision 1 or 2), what the LM head's backward GEMMs read.
void CrossEntropyBackward16(uint16_t* dlogits, const real* logits, const real* log_sum, const int* targets, int v0,
                            real scale, int N, int Vl, int precision);

// ---- Optimizer. AdamW over n parameters (lr already scheduled; correction = 1 - beta^t).
void AdamWUpdate(real* params, const real* grads, real* m, real* v, int64_t n, real lr, real beta1,
                 real beta2, real eps, real weight_decay, real correction1, real correction2);
double SumOfSquares(const real* p, int64_t n);  // accumulated in double
// The same over several ranges (each summed as above, then added in order) with one wait for the
// device instead of one per range.
struct DeviceRange {
  const real* p;
  int64_t n;
};
double SumOfSquares(const std::vector<DeviceRange>& ranges);
int64_t CountNonFinite(const real* p, int64_t n);

}  // namespace tunepar::core
