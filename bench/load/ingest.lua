-- wrk script: metric uploads as the in-job client (schedulers/on_node/portal_metrics.py) sends
-- them, one job per connection with that job's own metrics token. Run with
--   wrk -t N -c N -d D -s ingest.lua URL -- JOBS_FILE PERIOD_MS RECORDS METRICS SECONDS START_MS
-- JOBS_FILE: one line per connection, "JOB_ID TOKEN FIRST_SEQ". Every PERIOD_MS each
-- connection POSTs RECORDS records of METRICS metrics each (the client's one-second
-- batch), seq numbers rising, from START_MS (Unix ms, staggered over the connections)
-- for SECONDS. done() prints one "ingest_result" line of key=value.
package.path = debug.getinfo(1, "S").source:match("@?(.*/)") .. "?.lua;" .. package.path
local pace = require("pace")

local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("index", #threads)
end

local NAMES = { "loss", "acc", "lr", "grad_norm", "tokens_per_s", "val_loss", "val_acc", "epoch" }

function init(args)
  local total = 0
  for _ in io.lines(args[1]) do total = total + 1 end
  local words = pace.line(args[1], index)
  job, token, seq = words[1], words[2], tonumber(words[3])
  period, records, metrics = tonumber(args[2]), tonumber(args[3]), tonumber(args[4])
  local seconds, start = tonumber(args[5]), tonumber(args[6])
  local first = start + period * (index - 1) / total
  schedule = pace.schedule(first, period, start + seconds * 1000)
  path = "/api/v1/jobs/" .. job .. "/metrics/ingest/"
  headers = { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json" }
  names = {}
  for m = 1, metrics do names[m] = NAMES[m] or ("m" .. m) end
  ok, refused, inserted, duplicates, late, lag, sent = 0, 0, 0, 0, 0, 0, 0
end

function delay()
  local d = schedule.delay()
  late, lag = schedule.late, schedule.lag
  return d
end

function request()
  local now = pace.now_ms() / 1000
  local parts = {}
  for r = 1, records do
    local values = {}
    for m = 1, metrics do
      values[m] = string.format('"%s":%.6f', names[m], 1.0 / (seq + m))
    end
    parts[r] = string.format(
      '{"seq":%d,"attempt":0,"rank":0,"step":%d,"time":%.3f,"metrics":{%s}}',
      seq, seq, now, table.concat(values, ",")
    )
    seq = seq + 1
  end
  schedule.sent()
  sent = schedule.k
  return wrk.format("POST", path, headers, "[" .. table.concat(parts, ",") .. "]")
end

function response(status, hdrs, body)
  if status >= 200 and status < 300 then
    ok = ok + 1
    inserted = inserted + tonumber(body:match('"inserted":%s*(%d+)') or 0)
    duplicates = duplicates + tonumber(body:match('"duplicates":%s*(%d+)') or 0)
  else
    refused = refused + 1
  end
end

function done(summary, latency, requests)
  local sum = { ok = 0, refused = 0, inserted = 0, duplicates = 0, late = 0, lag = 0, sent = 0 }
  for _, t in ipairs(threads) do
    sum.ok = sum.ok + t:get("ok")
    sum.refused = sum.refused + t:get("refused")
    sum.inserted = sum.inserted + t:get("inserted")
    sum.duplicates = sum.duplicates + t:get("duplicates")
    sum.late = sum.late + t:get("late")
    if t:get("lag") > sum.lag then sum.lag = t:get("lag") end
    sum.sent = sum.sent + t:get("sent")
  end
  local e = summary.errors
  io.write(string.format(
    "ingest_result requests=%d sent=%d ok=%d refused=%d inserted=%d duplicates=%d late=%d "
      .. "max_lag_ms=%.1f connect=%d read=%d write=%d timeout=%d status=%d "
      .. "p50=%.1f p90=%.1f p99=%.1f max=%.1f mean=%.1f duration_us=%d\n",
    summary.requests, sum.sent, sum.ok, sum.refused, sum.inserted, sum.duplicates, sum.late,
    sum.lag, e.connect, e.read, e.write, e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, summary.duration
  ))
end
