-- SPDX-License-Identifier: Apache-2.0
-- Appended to each API benchmark's script: one line the scripts parse.
done = function(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT rate=%.0f p50=%.2f p99=%.2f errors=%d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors))
end
