-- Log in once, then send the token the server handed out with every later request.
local token
function request()
  if token then
    return wrk.format("GET", "/s/private", { Authorization = "Bearer " .. token })
  end
  return wrk.format("GET", "/s/login")
end
function response(status, headers, body)
  if token == nil and status == 200 then
    token = headers["X-Token"]
  end
end
