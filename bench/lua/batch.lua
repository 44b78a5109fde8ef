-- Batch enqueue: POST /queues/<queue>/messages with {"messages": [...]} of <n> messages.
-- Arguments: [queue] [n] (defaults "bench", 100). items counts messages enqueued.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

local n = 100

function init(args)
   n = tonumber(args[2] or "100")
   local one = '{"payload":' .. PAYLOAD .. '}'
   local parts = {}
   for i = 1, n do
      parts[i] = one
   end
   wrk.method = "POST"
   wrk.path = "/queues/" .. (args[1] or "bench") .. "/messages"
   wrk.headers["Content-Type"] = "application/json"
   wrk.body = '{"messages":[' .. table.concat(parts, ",") .. ']}'
end

function response(status, headers, body)
   if ok(status, body) then
      items = items + n
   end
end
