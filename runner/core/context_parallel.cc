#include "runner/core/context_parallel.h"

#include <cmath>

#include "runner/core/comm.h"
#include "runner/core/ops.h"

namespace tunepar::core {

namespace {

constexpr int kKvTag = 0, kDkvTag = 1;  // cp_comm carries nothing else

// The shape of a rank's attention as the ring sees it.
struct RingShape {
  int B, T, Cl, NHl, KVl, hs, cp, rank, next, prev, precision;
  int64_t N;
  int QkvCols() const { return (NHl + 2 * KVl) * hs; }
  int KvCols() const { return 2 * KVl * hs; }  // a K/V block's row: K then V of the KVl heads
  int QueryCols() const { return NHl * hs; }
  size_t KvElement() const { return precision == 0 ? sizeof(real) : sizeof(uint16_t); }
  size_t KvBytes() const { return static_cast<size_t>(N) * KvCols() * KvElement(); }
  size_t DkvBytes() const { return static_cast<size_t>(N) * KvCols() * sizeof(real); }
  int KeyRank(int step) const { return (rank - step + cp) % cp; }  // whose block step `step` holds
};

RingShape RingShapeOf(const RingContext& ctx) {
  return {ctx.B, ctx.T, ctx.Cl, ctx.NHl, ctx.KVl, ctx.hs, ctx.cp, ctx.cp_rank, (ctx.cp_rank + 1) % ctx.cp,
          (ctx.cp_rank + ctx.cp - 1) % ctx.cp, ctx.precision, int64_t{ctx.B} * ctx.T};
}

// This rank's own K/V block: the columns of qkv after the queries.
void PackOwnBlock(const RingShape& r, const Buffer& qkv, Buffer& kv) {
  CopyColumns(kv.data(), qkv.data(), r.N, r.QkvCols(), r.QueryCols(), r.KvCols(), r.KvElement());
}

// Posts the next step's K/V block: the held one sent on to rank i + 1, the next received from
// rank i - 1 (nothing after the last step).
void PassBlock(const RingContext& ctx, const RingShape& r, int step, Buffer& held, Buffer& next, CommRequest& send,
               CommRequest& recv) {
  if (step + 1 >= r.cp) return;
  recv = DeviceIrecvBytes(next.data(), r.KvBytes(), r.prev, kKvTag, ctx.cp_comm);
  send = DeviceIsendBytes(held.data(), r.KvBytes(), r.next, kKvTag, ctx.cp_comm);
}

// Columns [first, first + width) of `to` (N, ld; storage) from fp32 `from` (N, width), rounded once.
void StoreSum(const RingShape& r, Buffer& to, const real* from, int ld, int first, int width) {
  if (r.precision == 0) {
    StoreColumns(to.data(), from, r.N, ld, first, width, 0);
  } else {
    StoreColumns16(to.bits16(), from, r.N, ld, first, width, r.precision);
  }
}

}  // namespace

RingBuffers AllocateRingBuffers(const RingContext& ctx) {
  const RingShape r = RingShapeOf(ctx);
  RingBuffers w;
  const size_t kv_values = static_cast<size_t>(r.N) * r.KvCols();
  for (Buffer& kv : w.kv) {
    kv = ctx.precision == 0 ? Buffer(*ctx.allocator, MemoryCategory::kCommBuffers, kv_values, 4.0, false)
                            : Buffer::SixteenBit(*ctx.allocator, MemoryCategory::kCommBuffers, kv_values);
  }
  w.sum = Buffer(*ctx.allocator, MemoryCategory::kWorkspace, static_cast<size_t>(r.N) * r.Cl, 4.0, false);
  for (Buffer& dkv : w.dkv) dkv = Buffer(*ctx.allocator, MemoryCategory::kCommBuffers, kv_values, 4.0, false);
  w.dkv_in = Buffer(*ctx.allocator, MemoryCategory::kCommBuffers, kv_values, 4.0, false);
  return w;
}

void RingAttentionForward(const RingContext& ctx, Buffer& y, Buffer& lse, const Buffer& qkv, RingBuffers& w) {
  const RingShape r = RingShapeOf(ctx);
  PackOwnBlock(r, qkv, w.kv[0]);
  Fill(w.sum.data(), r.N * r.Cl, 0);
  Fill(lse.data(), int64_t{r.B} * r.NHl * r.T, -INFINITY);
  for (int step = 0; step < r.cp; ++step) {
    Buffer& held = w.kv[step % 2];
    CommRequest send, recv;
    PassBlock(ctx, r, step, held, w.kv[(step + 1) % 2], send, recv);  // in flight during the kernel
    if (r.precision == 0) {
      FlashAttentionBlockForward(w.sum.data(), lse.data(), qkv.data(), held.data(), r.cp, r.rank,
                                 r.KeyRank(step), r.B, r.T, r.Cl, r.NHl, 0, r.KVl);
    } else {
      FlashAttentionBlockForward16(w.sum.data(), lse.data(), qkv.bits16(), held.bits16(), r.cp, r.rank,
                                   r.KeyRank(step), r.B, r.T, r.Cl, r.NHl, r.precision, r.KVl);
    }
    recv.Wait();
    send.Wait();
  }
  StoreSum(r, y, w.sum.data(), r.Cl, 0, r.Cl);
}

void RingAttentionBackward(const RingContext& ctx, Buffer& dqkv, const Buffer& dy, const Buffer& qkv,
                           const Buffer& y, const Buffer& lse, RingBuffers& w) {
  const RingShape r = RingShapeOf(ctx);
  const int64_t kv_values = r.N * r.KvCols();
  PackOwnBlock(r, qkv, w.kv[0]);
  Fill(w.sum.data(), r.N * r.Cl, 0);  // dQ
  CommRequest dkv_sent[2];
  for (int step = 0; step < r.cp; ++step) {
    Buffer& held = w.kv[step % 2];
    CommRequest send, recv;
    PassBlock(ctx, r, step, held, w.kv[(step + 1) % 2], send, recv);
    // The last step's block's dK/dV on to rank i + 1 (which holds that block now), and the held
    // block's so far (from the ranks that held it before) arriving meanwhile: posted with the K/V
    // pass, so that nccl issues each step's transfers as one group on every rank alike.
    CommRequest dkv_recv;
    if (step > 0) {
      dkv_sent[(step - 1) % 2] = DeviceIsendBytes(w.dkv[(step - 1) % 2].data(), r.DkvBytes(), r.next, kDkvTag, ctx.cp_comm);
      dkv_recv = DeviceIrecvBytes(w.dkv_in.data(), r.DkvBytes(), r.prev, kDkvTag, ctx.cp_comm);
    }
    Buffer& dkv = w.dkv[step % 2];
    dkv_sent[step % 2].Wait();  // sent last step, two blocks ago
    Fill(dkv.data(), kv_values, 0);
    if (r.precision == 0) {
      FlashAttentionBlockBackward(w.sum.data(), dkv.data(), dy.data(), qkv.data(), held.data(), y.data(),
                                  lse.data(), r.cp, r.rank, r.KeyRank(step), r.B, r.T, r.Cl, r.NHl, 0, r.KVl);
    } else {
      FlashAttentionBlockBackward16(w.sum.data(), dkv.data(), dy.bits16(), qkv.bits16(), held.bits16(),
                                    y.bits16(), lse.data(), r.cp, r.rank, r.KeyRank(step), r.B, r.T, r.Cl, r.NHl,
                                    r.precision, r.KVl);
    }
    if (step > 0) {
      dkv_recv.Wait();
      Accumulate(dkv.data(), w.dkv_in.data(), kv_values);
    }
    recv.Wait();
    send.Wait();
  }
  // The last block's dK/dV on to its owner, rank i + 1; this rank's own block comes home from
  // rank i - 1 with every rank's part summed.
  dkv_sent[(r.cp - 1) % 2] = DeviceIsendBytes(w.dkv[(r.cp - 1) % 2].data(), r.DkvBytes(), r.next, kDkvTag, ctx.cp_comm);
  CommRequest home = DeviceIrecvBytes(w.dkv_in.data(), r.DkvBytes(), r.prev, kDkvTag, ctx.cp_comm);
  home.Wait();
  for (CommRequest& sent : dkv_sent) sent.Wait();
  StoreSum(r, dqkv, w.sum.data(), r.QkvCols(), 0, r.QueryCols());
  StoreSum(r, dqkv, w.dkv_in.data(), r.QkvCols(), r.QueryCols(), r.KvCols());
}

}  // namespace tunepar::core
