-- A report of its own after wrk's, from done()'s three arguments.
function done(summary, latency, requests)
  io.write("-- summary --\n")
  print(string.format("requests %d in %d us, %d bytes", summary.requests, summary.duration, summary.bytes))
  local e = summary.errors
  print(string.format("errors %d %d %d %d %d", e.connect, e.read, e.write, e.status, e.timeout))
  for _, p in ipairs({ 50, 99, 99.9 }) do
    print(string.format("p%g %d", p, latency:percentile(p)))
  end
  print(string.format("latency %d..%d mean %.2f stdev %.2f", latency.min, latency.max, latency.mean, latency.stdev))
  local value, count = latency(1)
  print(string.format("lowest %d seen %d times; %s distinct", value, count, #latency > 0 and "some" or "no"))
  print(string.format("rate max %d", requests.max))
end
