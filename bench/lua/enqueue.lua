-- Single enqueue: POST /queues/<queue>/messages with a ~200-byte JSON payload (201 expected).
-- Arguments: [queue] (default "bench").
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

function init(args)
   wrk.method = "POST"
   wrk.path = "/queues/" .. (args[1] or "bench") .. "/messages"
   wrk.headers["Content-Type"] = "application/json"
   authorize(wrk.headers)
   wrk.body = '{"payload":' .. PAYLOAD .. '}'
end

function response(status, headers, body)
   if ok(status, body) then
      items = items + 1
   end
end
