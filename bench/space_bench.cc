// Speed of the legal-layout space and of the performance model (Google Benchmark, one core).
//   build/space_bench
// Goals: enumerating the default space for gpt-1t at world 3072 well under 100 ms.
#include <benchmark/benchmark.h>

#include "runner/hardware_profile.h"
#include "runner/performance_model.h"
#include "search/encoding.h"
#include "search/space.h"
#include "tuner/study/problem.h"

namespace {

tunepar::Problem LoadOrDie(const char* model) {
  tunepar::Result<tunepar::Problem> p = tunepar::LoadProblem(model, "frontier-mi250x", "default");
  if (!p.ok()) throw std::runtime_error(p.status().message());
  return *p;
}

void BM_EnumerateGpt1tWorld3072(benchmark::State& state) {
  const tunepar::Problem p = LoadOrDie("gpt-1t");
  const auto query = tunepar::MakeSpaceQuery(p, 3072);
  size_t legal = 0;
  for (auto _ : state) {
    auto e = tunepar::search::EnumerateSpace(query);
    legal = e->legal.size();
    benchmark::DoNotOptimize(e);
  }
  state.counters["legal_layouts"] = static_cast<double>(legal);
}
BENCHMARK(BM_EnumerateGpt1tWorld3072)->Unit(benchmark::kMillisecond);

void BM_EncodeGpt1tWorld3072(benchmark::State& state) {
  const tunepar::Problem p = LoadOrDie("gpt-1t");
  const auto e = tunepar::search::EnumerateSpace(tunepar::MakeSpaceQuery(p, 3072));
  for (auto _ : state) {
    const auto enc = tunepar::search::LayoutEncoder::Fit(e->legal);
    std::vector<double> x(enc.Dimension());
    for (const auto& l : e->legal) enc.Encode(l, x);
    benchmark::DoNotOptimize(x);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(e->legal.size()));
}
BENCHMARK(BM_EncodeGpt1tWorld3072)->Unit(benchmark::kMillisecond);

void BM_PredictGpt1tWorld3072(benchmark::State& state) {
  const tunepar::Problem p = LoadOrDie("gpt-1t");
  const auto e = tunepar::search::EnumerateSpace(tunepar::MakeSpaceQuery(p, 3072));
  const auto model = tunepar::runner::PerformanceModel::Create(p.model, p.hardware);
  double sink = 0;
  for (auto _ : state) {
    for (const auto& l : e->legal) sink += model->Predict(l).step_time_s;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(e->legal.size()));
}
BENCHMARK(BM_PredictGpt1tWorld3072)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
