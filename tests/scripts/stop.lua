-- Each thread stops itself after 40 responses.
local answered = 0
function response(status, headers, body)
  answered = answered + 1
  if answered == 40 then
    wrk.thread:stop()
  end
end
