-- wrk script: print one machine-readable line at the end of a run.
-- "wrk <req/s> <errors> <mean> <p10> <p25> <p50> <p75> <p90> <p99>", latencies in microseconds.
done = function(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  local line = string.format("wrk %.0f %d %.0f", summary.requests / (summary.duration / 1e6), errors, latency.mean)
  for _, p in ipairs({10, 25, 50, 75, 90, 99}) do
    line = line .. " " .. latency:percentile(p)
  end
  io.write(line .. "\n")
end
