// Acquisition functions for minimising a (log step time) objective, and the normal-distribution
// helpers they need, computed stably far into the tails.
#pragma once

namespace tunepar::search {

double NormalPdf(double z);
double NormalCdf(double z);
double LogNormalCdf(double z);  // log Phi(z), accurate for z << 0

// log of the expected improvement below `best` of a normal N(mean, sd^2):
//   EI = sd h((best - mean) / sd),  h(z) = phi(z) + z Phi(z)
// computed as log sd + log h(z) without underflow (Ament et al. 2023, "Unexpected improvements
// to expected improvement": logEI keeps a usable gradient of preference where EI underflows).
double LogExpectedImprovement(double mean, double sd, double best);

// log h(z) for any z.
double LogH(double z);

// A lower confidence bound on the objective: mean - beta sd (minimisation's UCB).
inline double LowerConfidenceBound(double mean, double sd, double beta) {
  return mean - beta * sd;
}

}  // namespace tunepar::search
