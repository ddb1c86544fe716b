-- A form POST: method, body and a header set once; no function is called per request.
wrk.method = "POST"
wrk.body = "user=archbench&note=static+body"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
