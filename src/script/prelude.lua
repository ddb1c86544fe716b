-- The global `wrk` table of wrk's scripting API (its SCRIPTING document), written for
-- archbench. The Rust side fills in scheme, host, port, path, headers, lookup and connect
-- before the user's script runs, and calls resolve, setup and init as wrk does.
local wrk = {
  scheme = "http",
  host = "localhost",
  port = nil,
  method = "GET",
  path = "/",
  headers = {},
  body = nil,
  thread = nil,
}

-- The addresses of host:service that accept a connection, as wrk.addrs.
function wrk.resolve(host, service)
  local found = wrk.lookup(host, service)
  local usable = {}
  for _, addr in ipairs(found) do
    if wrk.connect(addr) then
      usable[#usable + 1] = addr
    end
  end
  wrk.addrs = usable
end

-- In the setup state, once per thread: its address, then the script's setup().
function wrk.setup(thread)
  thread.addr = wrk.addrs[1]
  if type(setup) == "function" then
    setup(thread)
  end
end

-- In a thread's own state before it starts: the Host header, the script's init(), and the
-- request built once for scripts without request().
function wrk.init(args)
  if wrk.headers["Host"] == nil then
    local host = wrk.host
    if host:find(":", 1, true) then
      host = "[" .. host .. "]"
    end
    if wrk.port then
      host = host .. ":" .. wrk.port
    end
    wrk.headers["Host"] = host
  end
  if type(init) == "function" then
    init(args)
  end
  local built = wrk.format()
  wrk.request = function()
    return built
  end
end

-- A request as bytes; what is not given comes from the wrk table.
function wrk.format(method, path, headers, body)
  method = method or wrk.method
  path = path or wrk.path
  headers = headers or wrk.headers
  body = body or wrk.body
  if headers["Host"] == nil then
    headers["Host"] = wrk.headers["Host"]
  end
  headers["Content-Length"] = body and string.len(body)
  local lines = { string.format("%s %s HTTP/1.1", method, path) }
  for name, value in pairs(headers) do
    lines[#lines + 1] = string.format("%s: %s", name, value)
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = body or ""
  return table.concat(lines, "\r\n")
end

return wrk
