-- Each thread connects to an address of its own choosing among the host's.
function setup(thread)
  local addrs = wrk.lookup(wrk.host, wrk.port or "http")
  thread.addr = addrs[#addrs]
  print("thread to " .. tostring(thread.addr))
end
