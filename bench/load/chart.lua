-- wrk script: a chart read while metrics arrive, as the job page does it
-- (GET /jobs/<id>/metrics/?width=W, the owner's session), one viewer per connection. Run
--   wrk -t N -c N -d D -s chart.lua URL -- VIEWERS_FILE PERIOD_MS WIDTH SECONDS START_MS
-- VIEWERS_FILE: one line per connection, "JOB_ID COOKIE" (COOKIE: name=value). Each
-- connection reads its chart every PERIOD_MS from START_MS (staggered) for SECONDS.
-- done() prints one "chart_result" line of key=value.
package.path = debug.getinfo(1, "S").source:match("@?(.*/)") .. "?.lua;" .. package.path
local pace = require("pace")

local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("index", #threads)
end

function init(args)
  local total = 0
  for _ in io.lines(args[1]) do total = total + 1 end
  local words = pace.line(args[1], index)
  local period, width = tonumber(args[2]), args[3]
  local seconds, start = tonumber(args[4]), tonumber(args[5])
  schedule = pace.schedule(start + period * (index - 1) / total, period, start + seconds * 1000)
  path = "/jobs/" .. words[1] .. "/metrics/?width=" .. width
  headers = { ["Cookie"] = words[2], ["Accept"] = "application/json" }
  ok, refused, late, lag, sent = 0, 0, 0, 0, 0
end

function delay()
  local d = schedule.delay()
  late, lag = schedule.late, schedule.lag
  return d
end

function request()
  schedule.sent()
  sent = schedule.k
  return wrk.format("GET", path, headers)
end

function response(status, hdrs, body)
  if status == 200 and body:find('"series"', 1, true) then
    ok = ok + 1
  else
    refused = refused + 1
  end
end

function done(summary, latency, requests)
  local sum = { ok = 0, refused = 0, late = 0, lag = 0, sent = 0 }
  for _, t in ipairs(threads) do
    sum.ok = sum.ok + t:get("ok")
    sum.refused = sum.refused + t:get("refused")
    sum.late = sum.late + t:get("late")
    if t:get("lag") > sum.lag then sum.lag = t:get("lag") end
    sum.sent = sum.sent + t:get("sent")
  end
  local e = summary.errors
  io.write(string.format(
    "chart_result requests=%d sent=%d ok=%d refused=%d late=%d max_lag_ms=%.1f connect=%d "
      .. "read=%d write=%d timeout=%d status=%d p50=%.1f p90=%.1f p99=%.1f max=%.1f mean=%.1f "
      .. "duration_us=%d\n",
    summary.requests, sum.sent, sum.ok, sum.refused, sum.late, sum.lag, e.connect, e.read,
    e.write, e.timeout, e.status, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, summary.duration
  ))
end
