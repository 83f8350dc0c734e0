-- Shared by the wrk scripts of scripts/bench: prints one machine-readable line after a
-- run, which bench.py parses (wrk's own text output stays on the lines above it).
local report = {}

function report.done(summary, latency, requests)
   local errors = summary.errors
   io.write(string.format(
      'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors_connect":%d,"errors_read":%d,' ..
      '"errors_write":%d,"errors_status":%d,"errors_timeout":%d,"latency_p50_us":%d,' ..
      '"latency_p99_us":%d,"latency_max_us":%d}\n',
      summary.requests, summary.duration, summary.bytes, errors.connect, errors.read,
      errors.write, errors.status, errors.timeout, latency:percentile(50),
      latency:percentile(99), latency.max))
end

return report
