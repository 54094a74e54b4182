// The cosine of RootedRP's rounds, written so that a loop over a run of values vectorises.
//
// float: the argument reduced by the nearest multiple j of pi (Cody-Waite: pi in three parts,
// exact products for |j| < 2^12), cos x = (-1)^j cos r with |r| <= pi/2, and cos r a polynomial
// of degree 5 in r^2 (a minimax fit on [0, (pi/2)^2], 2e-10 in exact arithmetic); the parity of
// j in exact small-integer arithmetic instead of a branch. Within 1.2e-7 of cos for |x| < 1e4
// (torch.cos: 4e-8; the rounds' pre-activations stay within a few units); infinities and NaN
// give NaN. About 17 vector operations per 8 values. double: std::cos.
#pragma once
#include <cmath>

#include "rpfast/device.hpp"

namespace rpfast {

// x + kRound - kRound rounds x to the nearest integer for |x| < 2^22 (float's ulp at kRound is
// 1): a rounding the vectoriser keeps in registers, where floorf may become a call.
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23

// The float formula on float or on a GCC vector of floats (every operation is elementwise, the
// constants broadcast): the rounds' inner loops call it on whole vector registers.
template <class V>
RPFAST_HD inline V cosine_float(V x) {
  const V j = (x * 0.318309886183790672f + kRound) - kRound;  // x = j pi + r, |r| <= pi/2
  V r = x - j * 3.140625f;
  r -= j * 9.67502593994140625e-4f;
  r -= j * 1.509957990978376432e-7f;
  const V z = r * r;
  const V even = 0.9999999997806625f +
                 z * (-0.4999999935847931f +
                      z * (0.04166663625819965f +
                           z * (-0.0013888361401072304f + z * (2.476016136756513e-05f + z * -2.605149516472233e-07f))));
  const V half = (j * 0.5f - 0.25f + kRound) - kRound;  // floor(j / 2): no ties for integer j
  return (1.0f - 2.0f * (j - 2.0f * half)) * even;      // (-1)^j
}

RPFAST_HD inline float cosine(float x) { return cosine_float(x); }

RPFAST_HD inline double cosine(double x) { return cos(x); }

}  // namespace rpfast
