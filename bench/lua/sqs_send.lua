-- SQS JSON protocol SendMessage (moto_server): POST / with X-Amz-Target AmazonSQS.SendMessage.
-- Arguments: <queue url>.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "sqs.lua")

function init(args)
   wrk.method = "POST"
   wrk.path = "/"
   for k, v in pairs(sqs_headers("SendMessage")) do
      wrk.headers[k] = v
   end
   wrk.body = '{"QueueUrl":"' .. args[1] .. '","MessageBody":' .. json_string(PAYLOAD) .. '}'
end

function response(status, headers, body)
   if ok(status, body) then
      items = items + 1
   end
end
