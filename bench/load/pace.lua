-- Shared by ingest.lua and chart.lua (wrk 4.1, LuaJIT): a wall clock in milliseconds and
-- the pacing of one connection. Each script runs with as many threads as connections
-- (-t N -c N), so thread i is connection i: its own job, token or cookie.
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } loadlive_timespec;
  int clock_gettime(int clk_id, loadlive_timespec *tp);
]]
local ts = ffi.new("loadlive_timespec")

local pace = {}

function pace.now_ms()
  ffi.C.clock_gettime(0, ts) -- CLOCK_REALTIME
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

-- Line ``n`` (1-based) of ``path``, split on spaces.
function pace.line(path, n)
  local i = 0
  for text in io.lines(path) do
    i = i + 1
    if i == n then
      local words = {}
      for w in text:gmatch("%S+") do words[#words + 1] = w end
      return words
    end
  end
  error(path .. " has no line " .. n)
end

-- A schedule: request k goes out at first + k * period (ms), none at or after stop.
-- delay() returns how long to wait for the next one (an hour once the run is over:
-- wrk ends it at -d; nothing is then in flight to be cut off).
function pace.schedule(first, period, stop)
  local s = { first = first, period = period, stop = stop, k = 0, late = 0, lag = 0 }
  function s.delay()
    local target = s.first + s.k * s.period
    if target >= s.stop then return 3600000 end
    local d = target - pace.now_ms()
    if d < 0 then
      -- Behind (the last answer came late): sent at once, counted.
      if -d > s.lag then s.lag = -d end
      if -d > 100 then s.late = s.late + 1 end
      return 0
    end
    return math.floor(d)
  end
  function s.sent() s.k = s.k + 1 end
  return s
end

return pace
