-- SQS JSON-protocol helpers for the moto scripts (loaded after common.lua).

-- moto_server picks the service from the credential scope of the Authorization header; it does
-- not check the signature.
function sqs_headers(action)
   return {
      ["Content-Type"] = "application/x-amz-json-1.0",
      ["X-Amz-Target"] = "AmazonSQS." .. action,
      ["Authorization"] = "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/sqs/aws4_request, "
         .. "SignedHeaders=host;x-amz-target, Signature=0",
   }
end

-- A Lua string as a JSON string (enough for the ASCII payload used here).
function json_string(s)
   return '"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"') .. '"'
end
