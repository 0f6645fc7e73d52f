#include "search/acquisition.h"

#include <cmath>
#include <limits>

namespace tunepar::search {

namespace {

constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kLogSqrt2Pi = 0.91893853320467274178;

// erfcx(x) = exp(x^2) erfc(x), for x >= 0.
double Erfcx(double x) {
  if (x < 25.0) return std::exp(x * x) * std::erfc(x);
  // Asymptotic series: 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6)).
  const double x2 = x * x;
  return 0.56418958354775628695 / x * (1.0 - 0.5 / x2 + 0.75 / (x2 * x2) - 1.875 / (x2 * x2 * x2));
}

}  // namespace

double NormalPdf(double z) {
  return kInvSqrt2Pi * std::exp(-0.5 * z * z);
}

double NormalCdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double LogNormalCdf(double z) {
  if (z > -5.0) return std::log(NormalCdf(z));
  // Phi(z) = phi(z) sqrt(pi/2) erfcx(-z / sqrt 2) / sqrt(pi/2)... = 0.5 exp(-z^2/2) erfcx(-z/sqrt2)
  return -0.5 * z * z + std::log(0.5 * Erfcx(-z / std::sqrt(2.0)));
}

double LogH(double z) {
  if (z > -1.0) return std::log(NormalPdf(z) + z * NormalCdf(z));
  // h(z) = phi(z) (1 + z Phi(z)/phi(z)), Phi(z)/phi(z) = sqrt(pi/2) erfcx(-z/sqrt2).
  const double ratio = 1.2533141373155002512 * Erfcx(-z / std::sqrt(2.0));
  const double factor = 1.0 + z * ratio;  // positive, ~1/z^2 for z << 0
  if (z > -1e3 && factor > 1e-12) return -0.5 * z * z - kLogSqrt2Pi + std::log(factor);
  return -0.5 * z * z - kLogSqrt2Pi - 2.0 * std::log(-z);  // h(z) ~ phi(z) / z^2
}

double LogExpectedImprovement(double mean, double sd, double best) {
  if (!(sd > 0)) {
    const double improvement = best - mean;
    return improvement > 0 ? std::log(improvement) : -std::numeric_limits<double>::infinity();
  }
  return std::log(sd) + LogH((best - mean) / sd);
}

}  // namespace tunepar::search
