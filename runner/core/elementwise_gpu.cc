// The GPU build's element-wise ops of ops.h: fills, copies, sums, residual connections, GeLU and
// its gradient, a bias added to every row, the 16-bit conversions; each a grid-stride loop over
// the elements (kernels.h's maths).
#include <cstdint>

#include "runner/core/gpu_launch.h"
#include "runner/core/gpu_runtime.h"
#include "runner/core/kernels.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

using gpu::Blocks;
using gpu::Check;
using gpu::ComputeStream;
using gpu::kThreads;

__global__ void FillKernel(real* p, int64_t n, real value) {
  TP_FOR_EACH(i, n) p[i] = value;
}
__global__ void ScaleKernel(real* p, int64_t n, real factor) {
  TP_FOR_EACH(i, n) p[i] *= factor;
}
__global__ void AddKernel(real* out, const real* a, const real* b, int64_t n) {
  TP_FOR_EACH(i, n) out[i] = a[i] + b[i];
}
__global__ void AccumulateKernel(real* a, const real* b, int64_t n) {
  TP_FOR_EACH(i, n) a[i] += b[i];
}
__global__ void RoundKernel(real* p, int64_t n, int precision) {
  TP_FOR_EACH(i, n) p[i] = RoundTo(p[i], precision);
}
__global__ void ResidualAddKernel(real* out, const real* x, const real* branch, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = RoundTo(x[i] + RoundTo(branch[i], precision), precision);
}
__global__ void ResidualAdd16Kernel(uint16_t* out, const uint16_t* x, const real* branch, int64_t n, int precision) {
  TP_FOR_EACH(i, n) {
    const real sum = From16BitValue(x[i], precision) + RoundTo(branch[i], precision);
    out[i] = To16BitValue(RoundTo(sum, precision), precision);
  }
}
__global__ void GeluForwardKernel(real* out, const real* inp, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = RoundTo(Gelu(inp[i]), precision);
}
__global__ void GeluBackwardKernel(real* dinp, const real* inp, const real* dout, int64_t n, int precision) {
  TP_FOR_EACH(i, n) dinp[i] = RoundTo(GeluGrad(inp[i]) * dout[i], precision);
}
__global__ void GeluForward16Kernel(uint16_t* out, const uint16_t* inp, int64_t n, int precision) {
  const SixteenBitOutputs o{out, precision};
  TP_FOR_EACH(i, n) o.Set(i, Gelu(From16BitValue(inp[i], precision)));
}
__global__ void GeluBackward16Kernel(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int64_t n,
                                     int precision) {
  const SixteenBitOutputs d{dinp, precision};
  TP_FOR_EACH(i, n) d.Set(i, GeluGrad(From16BitValue(inp[i], precision)) * From16BitValue(dout[i], precision));
}

// SwiGLU and rotary positions (kernels.h): reals or 16-bit numbers through the Values/Outputs
// accessors, one element (or rotated pair) per thread.
template <typename Values, typename Outputs>
__global__ void SwigluForwardKernel(Outputs out, Values inp, int64_t n, int Fl) {
  TP_FOR_EACH(i, n) {
    const int64_t at = SwigluGateIndex(i, Fl);
    out.Set(i, Swiglu(inp[at], inp[at + Fl]));
  }
}
template <typename Values, typename Outputs>
__global__ void SwigluBackwardKernel(Outputs dinp, Values inp, Values dout, int64_t n, int Fl) {
  TP_FOR_EACH(i, n) {
    const int64_t at = SwigluGateIndex(i, Fl);
    const real a = inp[at], u = inp[at + Fl], d = dout[i];
    dinp.Set(at, d * SwigluGateGrad(a, u));
    dinp.Set(at + Fl, d * SwigluUpGrad(a));
  }
}
// Their instantiations by name (a template's argument list would split TP_LAUNCH's arguments).
constexpr auto SwigluForwardRealKernel = SwigluForwardKernel<const real*, RealOutputs>;
constexpr auto SwigluBackwardRealKernel = SwigluBackwardKernel<const real*, RealOutputs>;
constexpr auto SwigluForward16Kernel = SwigluForwardKernel<SixteenBitValues, SixteenBitOutputs>;
constexpr auto SwigluBackward16Kernel = SwigluBackwardKernel<SixteenBitValues, SixteenBitOutputs>;

template <typename Outputs>
__global__ void RotaryKernel(Outputs x, int64_t pairs, int T, int rotated, int ld, int hs, bool inverse,
                             int position0) {
  TP_FOR_EACH(i, pairs) RotatePair(x, i, rotated, ld, T, hs, inverse, position0);
}
__global__ void AddBiasTo16BitKernel(uint16_t* out, const real* sums, const real* bias, int64_t n, int OC,
                                     int precision) {
  const SixteenBitOutputs o{out, precision};
  TP_FOR_EACH(i, n) o.Set(i, bias != nullptr ? sums[i] + bias[i % OC] : sums[i]);
}
__global__ void AddBiasKernel(real* out, const real* bias, int64_t n, int OC, int precision) {
  TP_FOR_EACH(i, n) out[i] = RoundTo(out[i] + bias[i % OC], precision);
}

__global__ void To16BitKernel(uint16_t* out, const real* in, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = To16BitValue(in[i], precision);
}

__global__ void From16BitKernel(real* out, const uint16_t* in, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = From16BitValue(in[i], precision);
}

__global__ void Round16BitKernel(uint16_t* out, const real* in, int64_t n, int precision) {
  TP_FOR_EACH(i, n) out[i] = To16BitValue(RoundTo(in[i], precision), precision);
}

// Context parallelism's column moves (context_parallel.cc; the CPU versions in
// flash_attention_cpu.cc): element i of the packed (rows, width) side is column first + i % width
// of row i / width of the (rows, ld) side.
template <typename Element>
__global__ void CopyColumnsKernel(Element* dst, const Element* src, int64_t n, int64_t ld, int64_t first, int width) {
  TP_FOR_EACH(i, n) dst[i] = src[i / width * ld + first + i % width];
}
__global__ void StoreColumnsKernel(real* dst, const real* src, int64_t n, int ld, int first, int width, int precision) {
  TP_FOR_EACH(i, n) dst[i / width * ld + first + i % width] = RoundTo(src[i], precision);
}
__global__ void StoreColumns16Kernel(uint16_t* dst, const real* src, int64_t n, int ld, int first, int width,
                                     int precision) {
  const SixteenBitOutputs out{dst, precision};
  TP_FOR_EACH(i, n) out.Set(i / width * ld + first + i % width, src[i]);
}

}  // namespace

void Fill(real* p, int64_t n, real value) {
  if (n > 0) TP_LAUNCH(FillKernel, Blocks(n), kThreads, p, n, value);
}
void Copy(real* dst, const real* src, int64_t n) {
  if (n > 0) {
    gpu::ProfiledRegion profiled("copy (device)");
    Check(hipMemcpyAsync(dst, src, n * sizeof(real), hipMemcpyDeviceToDevice, ComputeStream()), "hipMemcpy (copy)");
  }
}
void Scale(real* p, int64_t n, real factor) {
  if (n > 0) TP_LAUNCH(ScaleKernel, Blocks(n), kThreads, p, n, factor);
}
void Add(real* out, const real* a, const real* b, int64_t n) {
  if (n > 0) TP_LAUNCH(AddKernel, Blocks(n), kThreads, out, a, b, n);
}
void ResidualAdd(real* out, const real* x, const real* branch, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(ResidualAddKernel, Blocks(n), kThreads, out, x, branch, n, precision);
}
void ResidualAdd16(uint16_t* out, const uint16_t* x, const real* branch, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(ResidualAdd16Kernel, Blocks(n), kThreads, out, x, branch, n, precision);
}
void Accumulate(real* a, const real* b, int64_t n) {
  if (n > 0) TP_LAUNCH(AccumulateKernel, Blocks(n), kThreads, a, b, n);
}
void RoundStorage(real* p, int64_t n, int precision) {
  if (precision != 0 && n > 0) TP_LAUNCH(RoundKernel, Blocks(n), kThreads, p, n, precision);
}

void AddBias(real* out, const real* bias, int N, int OC, int precision) {
  const int64_t n = int64_t{N} * OC;
  if (n > 0) TP_LAUNCH(AddBiasKernel, Blocks(n), kThreads, out, bias, n, OC, precision);
}

void AddBiasTo16Bit(uint16_t* out, const real* sums, const real* bias, int N, int OC, int precision) {
  const int64_t n = int64_t{N} * OC;
  if (n > 0) TP_LAUNCH(AddBiasTo16BitKernel, Blocks(n), kThreads, out, sums, bias, n, OC, precision);
}

void To16Bit(uint16_t* out, const real* in, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(To16BitKernel, Blocks(n), kThreads, out, in, n, precision);
}

void From16Bit(real* out, const uint16_t* in, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(From16BitKernel, Blocks(n), kThreads, out, in, n, precision);
}

void Round16Bit(uint16_t* out, const real* in, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(Round16BitKernel, Blocks(n), kThreads, out, in, n, precision);
}

// Elements of 2 or 4 bytes move as such, any other size byte by byte.
void CopyColumns(void* dst, const void* src, int64_t rows, int ld, int first, int width, size_t element_bytes) {
  if (rows <= 0 || width <= 0) return;
  if (element_bytes == 2 || element_bytes == 4) {
    const int64_t n = rows * width;
    if (element_bytes == 2) {
      TP_LAUNCH(CopyColumnsKernel<uint16_t>, Blocks(n), kThreads, static_cast<uint16_t*>(dst),
                static_cast<const uint16_t*>(src), n, ld, first, width);
    } else {
      TP_LAUNCH(CopyColumnsKernel<uint32_t>, Blocks(n), kThreads, static_cast<uint32_t*>(dst),
                static_cast<const uint32_t*>(src), n, ld, first, width);
    }
    return;
  }
  const auto bytes = static_cast<int64_t>(element_bytes);
  const int64_t n = rows * width * bytes;
  TP_LAUNCH(CopyColumnsKernel<unsigned char>, Blocks(n), kThreads, static_cast<unsigned char*>(dst),
            static_cast<const unsigned char*>(src), n, ld * bytes, first * bytes, static_cast<int>(width * bytes));
}
void StoreColumns(real* dst, const real* src, int64_t rows, int ld, int first, int width, int precision) {
  const int64_t n = rows * width;
  if (n > 0) TP_LAUNCH(StoreColumnsKernel, Blocks(n), kThreads, dst, src, n, ld, first, width, precision);
}
void StoreColumns16(uint16_t* dst, const real* src, int64_t rows, int ld, int first, int width, int precision) {
  const int64_t n = rows * width;
  if (n > 0) TP_LAUNCH(StoreColumns16Kernel, Blocks(n), kThreads, dst, src, n, ld, first, width, precision);
}

void Copy16(uint16_t* dst, const uint16_t* src, int64_t n) {
  if (n > 0) {
    gpu::ProfiledRegion profiled("copy (device, 16-bit)");
    Check(hipMemcpyAsync(dst, src, n * sizeof(uint16_t), hipMemcpyDeviceToDevice, ComputeStream()),
          "hipMemcpy (copy)");
  }
}

void Zero16(uint16_t* p, int64_t n) {
  if (n > 0) {
    gpu::ProfiledRegion profiled("memset (16-bit zeros)");
    Check(hipMemsetAsync(p, 0, n * sizeof(uint16_t), ComputeStream()), "hipMemsetAsync");
  }
}

void SwigluForward(real* out, const real* inp, int N, int Fl, int precision) {
  const int64_t n = int64_t{N} * Fl;
  if (n > 0) TP_LAUNCH(SwigluForwardRealKernel, Blocks(n), kThreads,
                       RealOutputs{out, precision}, inp, n, Fl);
}
void SwigluBackward(real* dinp, const real* inp, const real* dout, int N, int Fl, int precision) {
  const int64_t n = int64_t{N} * Fl;
  if (n > 0) TP_LAUNCH(SwigluBackwardRealKernel, Blocks(n), kThreads,
                       RealOutputs{dinp, precision}, inp, dout, n, Fl);
}
void SwigluForward16(uint16_t* out, const uint16_t* inp, int N, int Fl, int precision) {
  const int64_t n = int64_t{N} * Fl;
  if (n > 0) TP_LAUNCH(SwigluForward16Kernel, Blocks(n), kThreads,
                       SixteenBitOutputs{out, precision}, SixteenBitValues{inp, precision}, n, Fl);
}
void SwigluBackward16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int N, int Fl, int precision) {
  const int64_t n = int64_t{N} * Fl;
  if (n > 0) TP_LAUNCH(SwigluBackward16Kernel, Blocks(n), kThreads,
                       SixteenBitOutputs{dinp, precision}, SixteenBitValues{inp, precision},
                       SixteenBitValues{dout, precision}, n, Fl);
}
void Rotary(real* qkv, int N, int T, int rotated, int ld, int hs, bool inverse, int precision, int position0) {
  const int64_t pairs = int64_t{N} * (rotated / 2);
  if (pairs > 0) TP_LAUNCH(RotaryKernel<RealOutputs>, Blocks(pairs), kThreads, RealOutputs{qkv, precision}, pairs, T,
                           rotated, ld, hs, inverse, position0);
}
void Rotary16(uint16_t* qkv, int N, int T, int rotated, int ld, int hs, bool inverse, int precision, int position0) {
  const int64_t pairs = int64_t{N} * (rotated / 2);
  if (pairs > 0) TP_LAUNCH(RotaryKernel<SixteenBitOutputs>, Blocks(pairs), kThreads,
                           SixteenBitOutputs{qkv, precision}, pairs, T, rotated, ld, hs, inverse, position0);
}

void GeluForward(real* out, const real* inp, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(GeluForwardKernel, Blocks(n), kThreads, out, inp, n, precision);
}
void GeluBackward(real* dinp, const real* inp, const real* dout, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(GeluBackwardKernel, Blocks(n), kThreads, dinp, inp, dout, n, precision);
}
void GeluForward16(uint16_t* out, const uint16_t* inp, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(GeluForward16Kernel, Blocks(n), kThreads, out, inp, n, precision);
}
void GeluBackward16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, int64_t n, int precision) {
  if (n > 0) TP_LAUNCH(GeluBackward16Kernel, Blocks(n), kThreads, dinp, inp, dout, n, precision);
}

}  // namespace tunepar::core
