-- Three requests in one write, built once in init.
local batch
function init(args)
  local parts = {}
  for _, p in ipairs({ "/s/one", "/s/two", "/s/three" }) do
    parts[#parts + 1] = wrk.format(nil, p)
  end
  batch = table.concat(parts)
end
function request()
  return batch
end
