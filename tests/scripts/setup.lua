-- setup() numbers the threads; each sends its number; done() reads every thread's counts.
local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
  thread:set("id", #threads)
end
function init(args)
  sent, seen = 0, 0
  wrk.headers["X-Thread"] = "t" .. id
end
function request()
  sent = sent + 1
  return wrk.request()
end
function response(status, headers, body)
  seen = seen + 1
end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    print(string.format("thread %d: %d sent, %d answered", t:get("id"), t:get("sent"), t:get("seen")))
  end
end
