-- SQS JSON protocol on moto_server: ReceiveMessage (MaxNumberOfMessages <n>), then one
-- DeleteMessageBatch for what it got; with "refill", the deleted messages are then sent again
-- with one SendMessageBatch, holding the depth constant (like pollack.lua's refill).
-- Arguments: <queue url> [n] [refill]. items counts messages deleted; empty counts receives
-- that got nothing; errors counts failed batch entries.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "sqs.lua")

local receive_req, url
local refill = false
local refills = {}

function init(args)
   url = args[1]
   local n = tonumber(args[2] or "10")
   refill = args[3] == "refill"
   receive_req = wrk.format("POST", "/", sqs_headers("ReceiveMessage"),
      '{"QueueUrl":"' .. url .. '","MaxNumberOfMessages":' .. n .. '}')
   local entries = {}
   for i = 1, n do
      entries[i] = '{"Id":"' .. i .. '","MessageBody":' .. json_string(PAYLOAD) .. '}'
      refills[i] = wrk.format("POST", "/", sqs_headers("SendMessageBatch"),
         '{"QueueUrl":"' .. url .. '","Entries":[' .. table.concat(entries, ",") .. ']}')
   end
end

function request()
   return pop() or receive_req
end

local function count(body, pattern)
   local c = 0
   for _ in body:gmatch(pattern) do
      c = c + 1
   end
   return c
end

function response(status, headers, body)
   if not ok(status, body) then
      return
   end
   errors = errors + count(body, '"SenderFault"')
   if body:find('"ReceiptHandle"', 1, true) then -- ReceiveMessage with messages
      local entries, n = {}, 0
      for handle in body:gmatch('"ReceiptHandle":%s*"([^"]+)"') do
         n = n + 1
         entries[n] = '{"Id":"' .. n .. '","ReceiptHandle":"' .. handle .. '"}'
      end
      push(wrk.format("POST", "/", sqs_headers("DeleteMessageBatch"),
         '{"QueueUrl":"' .. url .. '","Entries":[' .. table.concat(entries, ",") .. ']}'))
      if refill then
         push(refills[n])
      end
   elseif body:find('"MessageId"', 1, true) then -- SendMessageBatch (the refill)
      return
   elseif body:find('"Successful"', 1, true) then -- DeleteMessageBatch
      items = items + count(body, '"Id":%s*"')
   else -- ReceiveMessage that got nothing: {}
      empty = empty + 1
   end
end
