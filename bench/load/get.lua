-- wrk script for bench/load.py: GET the paths in LOAD_PATHS ('|'-separated, taken in
-- turn) with the session cookie in LOAD_COOKIE, and print the run's figures as one
-- JSON line (LOADJSON ...) that bench/load.py reads. LOAD_DELAY_MS (optional) paces each
-- connection: wrk waits that long before its next request (a fixed offered rate).
local paths = {}
for p in string.gmatch(os.getenv("LOAD_PATHS") or "/", "[^|]+") do
  paths[#paths + 1] = p
end
local cookie = os.getenv("LOAD_COOKIE")
local pause = tonumber(os.getenv("LOAD_DELAY_MS") or "0")
local i = 0

init = function(args)
  if cookie and cookie ~= "" then
    wrk.headers["Cookie"] = cookie
  end
  wrk.headers["Accept"] = "text/html,application/json"
end

request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end

if pause > 0 then
  delay = function()
    return pause
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'LOADJSON {"requests": %d, "duration_us": %d, "bytes": %d, "p50_us": %d, "p90_us": %d, ' ..
    '"p99_us": %d, "max_us": %d, "status_errors": %d, "connect_errors": %d, ' ..
    '"read_errors": %d, "timeouts": %d}\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50),
    latency:percentile(90), latency:percentile(99), latency.max, e.status, e.connect,
    e.read, e.timeout))
end
