-- Shared by the sqew server benchmark scripts (loaded with dofile by each of them).
--
-- Every wrk thread has its own Lua state, so the counters below are per thread; setup() keeps
-- the thread objects and done() adds their counters up and prints one line that
-- bench/server.py parses:
--   BENCH bad=<non-2xx> errors=<failed items> items=<messages done> empty=<empty polls> first=<...>
-- A run with bad, errors or (for poll workloads) empty above zero is not a valid measurement.

bad, errors, items, empty = 0, 0, 0, 0
first = ""

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

-- Count a response status; true when it is a 2xx. The first bad answer is kept for the report.
function ok(status, body)
   if status >= 200 and status < 300 then
      return true
   end
   bad = bad + 1
   if first == "" then
      first = tostring(status) .. " " .. string.sub(body or "", 1, 200):gsub("%s+", " ")
   end
   return false
end

function done(summary, latency, requests)
   local total = {bad = 0, errors = 0, items = 0, empty = 0}
   local firsts = ""
   for _, thread in ipairs(threads) do
      for key in pairs(total) do
         total[key] = total[key] + (tonumber(thread:get(key)) or 0)
      end
      local f = thread:get("first")
      if firsts == "" and f and f ~= "" then
         firsts = f
      end
   end
   io.write(string.format("BENCH bad=%d errors=%d items=%d empty=%d first=%s\n",
      total.bad, total.errors, total.items, total.empty, firsts))
end

-- A FIFO of requests to send next, per thread. wrk asks a connection for its next request
-- right after that connection's response was handled, so a follow-up pushed by response()
-- is, in practice, sent next on the same connection: poll, then ack, on each connection.
local fifo, head, tail = {}, 1, 0

function push(req)
   tail = tail + 1
   fifo[tail] = req
end

function pop()
   if head > tail then
      return nil
   end
   local req = fifo[head]
   fifo[head] = nil
   head = head + 1
   return req
end

-- A ~200-byte JSON payload (an order-like document).
PAYLOAD = '{"order_id":1234567,"customer":"cust-000042","currency":"EUR","total_cents":129900,'
   .. '"items":[{"sku":"SKU-10001","qty":2},{"sku":"SKU-20002","qty":1}],'
   .. '"note":"leave the parcel at the back door, ring twice"}'

-- An API key to send (the auth workloads of bench/server.py): SQEW_BENCH_KEY in wrk's
-- environment. authorize(headers) adds it to a header table; without the variable, nothing.
BENCH_KEY = os.getenv("SQEW_BENCH_KEY")

function authorize(headers)
   if BENCH_KEY and BENCH_KEY ~= "" then
      headers["Authorization"] = "Bearer " .. BENCH_KEY
   end
   return headers
end
