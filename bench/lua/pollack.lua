-- Poll then ack: POST /queues/<q>/poll?batch=<n>, then POST /queues/<q>/ack {"acks": [...]} for
-- every message it leased. With "refill", the acked messages are then enqueued again as one
-- batch, which holds the queue's depth constant (poll, ack, enqueue: a steady-state cycle).
-- Arguments: [queue] [batch] [refill]. items counts messages acked; empty counts polls that
-- found nothing (the queue ran dry: the run is not valid).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

local JSON = authorize({["Content-Type"] = "application/json"})
local poll_req, ack_path, enq_path
local refill = false
local refills = {}

function init(args)
   local queue = args[1] or "q"
   local batch = tonumber(args[2] or "10")
   refill = args[3] == "refill"
   poll_req = wrk.format("POST", "/queues/" .. queue .. "/poll?batch=" .. batch, JSON, "")
   ack_path = "/queues/" .. queue .. "/ack"
   enq_path = "/queues/" .. queue .. "/messages"
   local one = '{"payload":' .. PAYLOAD .. '}'
   local parts = {}
   for i = 1, batch do
      parts[i] = one
      refills[i] = wrk.format("POST", enq_path, JSON,
         '{"messages":[' .. table.concat(parts, ",") .. ']}')
   end
end

function request()
   return pop() or poll_req
end

function response(status, headers, body)
   if not ok(status, body) then
      return
   end
   if status == 201 then -- the refill enqueue
      return
   end
   if string.sub(body, 1, 12) == '{"messages":' then
      local acks, n = {}, 0
      -- A leased message: {"id":N,"queue":...,"token":"..."}; the payload has no such keys.
      for id, token in body:gmatch('"id":(%d+),"queue":.-"token":"([^"]+)"') do
         n = n + 1
         acks[n] = '{"id":' .. id .. ',"token":"' .. token .. '"}'
      end
      if n == 0 then
         empty = empty + 1
         return
      end
      push(wrk.format("POST", ack_path, JSON, '{"acks":[' .. table.concat(acks, ",") .. ']}'))
      if refill then
         push(refills[n])
      end
   else -- {"results":[{"id":N,"status":"acked"},...]}
      local all, acked = 0, 0
      for s in body:gmatch('"status":"(%a+)"') do
         all = all + 1
         if s == "acked" then
            acked = acked + 1
         end
      end
      items = items + acked
      errors = errors + (all - acked)
   end
end
