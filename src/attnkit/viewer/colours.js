"use strict";
// The colour scale of every attnkit page: matplotlib's viridis (the PNG figures use the same map),
// sampled at 9 stops and interpolated linearly. viridis(x) for x in [0, 1] -> [r, g, b].
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
                 [53, 183, 121], [110, 206, 88], [253, 231, 37]];
function viridis(x) {
  x = Math.max(0, Math.min(1, x)) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
  return VIRIDIS[i].map((v, k) => Math.round(v + f * (VIRIDIS[i + 1][k] - v)));
}
