-- wrk script: fetch every path of a list exactly once, each over a new connection, and time it.
--
--   WRK_PATHS=FILE WRK_BODY_BYTES=SIZE wrk -t1 -c32 -d300s -s bench/paths.lua http://127.0.0.1:PORT
--
-- FILE has one line per request: "PATH" or "PATH<TAB>AUTHORIZATION VALUE". An answer is good
-- when it is a 200 of SIZE body bytes (any 200 without WRK_BODY_BYTES). At the end it prints
--   paths: N ok: N other: N seconds: S
--   Fetches/sec: R
-- with S from the first request written to the last answer read, and R = ok / S. One thread
-- only (-t1); -d is a cap, the run ends as soon as every path has its answer.
--
-- Why it is built this way (wrk 4.1, which runs scripts on LuaJIT):
-- * Each request says "Connection: close". nginx answers with "Connection: close" and wrk
--   reconnects at once. A server that closes without saying so (Hummingbird does) leaves wrk
--   thinking the connection is kept alive: it would write the next request on it and lose it
--   to the closing socket. wrk calls request() once before the run, only to count pipelined
--   requests; answering that call with two makes wrk wait for two answers per connection, so
--   it never writes on a connection again after its one answer and reconnects when the server
--   closes. Only single requests ever go on the wire.
-- * Once every path is out, request() returns nothing to send: the other connections idle
--   instead of fetching a path twice.
-- * wrk.thread:stop() ends the thread, but wrk's main thread sleeps out all of -d and divides
--   by it; so the script keeps its own time (clock_gettime through LuaJIT's ffi) and sends wrk
--   SIGINT, which ends that sleep.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } paths_timespec;
int clock_gettime(int clock, paths_timespec *ts);
int getpid(void);
int kill(int pid, int sig);
]]
local timespec = ffi.new("paths_timespec")
local function now()
  ffi.C.clock_gettime(1, timespec) -- CLOCK_MONOTONIC
  return tonumber(timespec.tv_sec) + tonumber(timespec.tv_nsec) / 1e9
end

-- Main state: keep each thread to read its figures in done().
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  threads[#threads + 1] = thread
end

-- Thread state. Globals, so that done() can read them with thread:get().
paths, ok, other, started, finished = 0, 0, 0, 0, 0
local queue, probe = {}, nil
local calls = 0
local body_bytes = tonumber(os.getenv("WRK_BODY_BYTES") or "")

function init(args)
  if id ~= 0 then error("bench/paths.lua needs wrk -t1") end
  local file = os.getenv("WRK_PATHS")
  if not file then error("set WRK_PATHS to a file of paths") end
  local host = wrk.headers["Host"]
  for line in io.lines(file) do
    local path, authorization = line:match("^([^\t]+)\t?(.*)$")
    if path then
      local r = "GET " .. path .. " HTTP/1.1\r\nHost: " .. host .. "\r\nConnection: close\r\n"
      if authorization ~= "" then r = r .. "Authorization: " .. authorization .. "\r\n" end
      queue[#queue + 1] = r .. "\r\n"
    end
  end
  paths = #queue
  local one = "GET / HTTP/1.1\r\nHost: " .. host .. "\r\n\r\n"
  probe = one .. one
end

function request()
  calls = calls + 1
  if calls == 1 then return probe end -- wrk's count of pipelined requests: parsed, never sent
  local n = calls - 1
  if n == 1 then started = now() end
  if n > paths then return "" end
  return queue[n]
end

function response(status, headers, body)
  if status == 200 and (body_bytes == nil or #body == body_bytes) then ok = ok + 1 else other = other + 1 end
  if ok + other == paths then
    finished = now()
    wrk.thread:stop()
    ffi.C.kill(ffi.C.getpid(), 2) -- SIGINT
  end
end

function done(summary, latency, requests)
  for _, thread in ipairs(threads) do
    local n, good, bad = thread:get("paths"), thread:get("ok"), thread:get("other")
    local t0, t1 = thread:get("started"), thread:get("finished")
    local seconds = (t0 > 0 and t1 > t0) and (t1 - t0) or 0
    io.write(string.format("paths: %d ok: %d other: %d seconds: %.6f\n", n, good, bad, seconds))
    io.write(string.format("Fetches/sec: %.2f\n", seconds > 0 and good / seconds or 0))
  end
end
