-- GET /healthz: the framework's ceiling on this machine (no body, no database).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

wrk.method = "GET"
wrk.path = "/healthz"

function response(status, headers, body)
   ok(status, body)
end
