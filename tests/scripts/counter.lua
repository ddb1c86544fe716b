-- Each thread numbers its own requests in the path: request() runs for every request.
local sent = 0
function request()
  sent = sent + 1
  return wrk.format(nil, wrk.path .. "n" .. sent)
end
