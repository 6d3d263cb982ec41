-- wrk's script for the load benches (scripts/bench-load.sh, scripts/bench-server-instructions.sh):
-- POSTs the JSON file BODY names; with VARY (1 to 6, bench-load.sh) each request differs from the
-- last as BENCHMARKS.md's "Loopback load" says. Prints a RESULT line of rate, p50, p99, errors.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open(os.getenv("BODY"), "rb")
wrk.body = f:read("*all")
f:close()
local vary = os.getenv("VARY") or "0"
-- The body cut where a count goes in: each request is the parts joined by its count.
local parts
if vary == "1" then
  local _, at = wrk.body:find('"resourceVersion":"184467"', 1, true)
  assert(at, "VARY=1 needs a resourceVersion of 184467 in the body")
  parts = { wrk.body:sub(1, at - 7), wrk.body:sub(at) }
elseif vary == "2" then
  local _, at = wrk.body:find('"controller":{', 1, true)
  assert(at, "VARY=2 needs a controller in the body")
  parts = { wrk.body:sub(1, at) .. '"generation":', "," .. wrk.body:sub(at + 1) }
elseif vary == "3" then
  local _, at = wrk.body:find('"generation":', 1, true)
  assert(at, "VARY=3 needs a generation in the body")
  parts = { wrk.body:sub(1, at), wrk.body:sub(at + 1) }
elseif vary == "4" then
  parts = { '{"shape', '":0,' .. wrk.body:sub(2) }
elseif vary == "5" or vary == "6" then
  local put_in = vary == "5" and ".put-in.json" or ".put-in-twice.json"
  local f = io.open((os.getenv("BODY"):gsub("%.json$", put_in)), "rb")
  local text = f:read("*all")
  f:close()
  parts = {}
  local from = 1
  for at in text:gmatch("()@@") do
    parts[#parts + 1] = text:sub(from, at - 1)
    from = at + 2
  end
  parts[#parts + 1] = text:sub(from)
  assert(#parts >= 3, "VARY=" .. vary .. " needs a body with an object named @@ put in")
end
if parts then
  -- Each thread sends its own bodies, built before the run, in turn (building each as it was
  -- sent kept wrk's CPU busy, so that the echo floor measured wrk): more of them than the memo
  -- of decoded requests keeps (each counts at least twice its size against 8 MiB), so that none
  -- is still kept when it comes again.
  local count = math.max(16, math.ceil(8 * 1024 * 1024 / #wrk.body))
  local threads, bodies, n = 0, {}, 0
  setup = function(thread)
    threads = threads + 1
    thread:set("id", threads)
  end
  init = function()
    for i = 1, count do
      bodies[i] = wrk.format(nil, nil, nil, table.concat(parts, string.format("%d%05d", id, i)))
    end
  end
  request = function()
    n = n % count + 1
    return bodies[n]
  end
end
done = function(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %.1f %.3f %.3f %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, errors))
end
