-- Single enqueue: POST /queues/<queue>/messages with a ~200-byte JSON payload (201 expected).
-- Arguments: [queue] (default "bench") [signature]: an X-Sqew-Signature header value for a queue
-- with an hmac_secret, computed by bench/server.py over this exact body just before the run
-- (valid 300 s; wrk's LuaJIT has no HMAC, and the body is the same on every request).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   wrk.method = "POST"
   wrk.path = "/queues/" .. (args[1] or "bench") .. "/messages"
   wrk.headers["Content-Type"] = "application/json"
   authorize(wrk.headers)
   wrk.body = '{"payload":' .. PAYLOAD .. '}'
   if args[2] then
      wrk.headers["X-Sqew-Signature"] = args[2]
   end
end

function response(status, headers, body)
   if ok(status, body) then
      items = items + 1
   end
end
