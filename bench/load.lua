-- wrk script for `npm run load`: a random product each request, a merge patch of its stock
-- `write_percent` percent of the time. Arguments: the file of product ids (one a line), the
-- percentage of writes. Every thread counts statuses, X-Cache values, 503s with Retry-After, and
-- good answers per wall-clock second; `done` prints them as lines bench/load-wrk.ts parses, with
-- the latency at each percentile of `quantiles` (finer towards the tail), to pool rounds by.
local quantiles = {}
for i = 1, 90 do quantiles[#quantiles + 1] = i end
for i = 1, 90 do quantiles[#quantiles + 1] = (900 + i) / 10 end
for i = 1, 99 do quantiles[#quantiles + 1] = (9900 + i) / 100 end
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("seed", #threads)
end

function init(args)
  ids = {}
  for line in io.lines(args[1]) do ids[#ids + 1] = line end
  write_percent = tonumber(args[2])
  math.randomseed(os.time() * 1000 + seed)
  statuses, caches, seconds, shed, bypassed, hits, retry_after = {}, {}, {}, {}, {}, {}, 0
end

function request()
  local id = ids[math.random(#ids)]
  if math.random(100) <= write_percent then
    return wrk.format("PATCH", "/api/products/" .. id, { ["Content-Type"] = "application/merge-patch+json" }, '{"stock":' .. math.random(0, 100000) .. '}')
  end
  return wrk.format("GET", "/api/products/" .. id)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  local cache = headers["X-Cache"] or headers["x-cache"]
  if cache then caches[cache] = (caches[cache] or 0) + 1 end
  if status == 503 and (headers["Retry-After"] or headers["retry-after"]) then retry_after = retry_after + 1 end
  local second = os.time()
  if status < 300 or status == 304 then
    seconds[second] = (seconds[second] or 0) + 1
  elseif status == 503 then
    shed[second] = (shed[second] or 0) + 1
  end
  if cache == "BYPASS" then bypassed[second] = (bypassed[second] or 0) + 1 end
  if cache == "HIT" then hits[second] = (hits[second] or 0) + 1 end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("summary %d %d %d %d %d %d %d\n", summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout))
  io.write(string.format("latency %d %d %d\n", latency:percentile(50), latency:percentile(99), latency.max))
  for _, p in ipairs(quantiles) do io.write(string.format("quantile %.2f %d\n", p, latency:percentile(p))) end
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do io.write(string.format("status %d %d\n", status, n)) end
    for cache, n in pairs(thread:get("caches")) do io.write(string.format("cache %s %d\n", cache, n)) end
    for second, n in pairs(thread:get("seconds")) do io.write(string.format("second %d %d\n", second, n)) end
    for second, n in pairs(thread:get("shed")) do io.write(string.format("shed %d %d\n", second, n)) end
    for second, n in pairs(thread:get("bypassed")) do io.write(string.format("bypassed %d %d\n", second, n)) end
    for second, n in pairs(thread:get("hits")) do io.write(string.format("hits %d %d\n", second, n)) end
    io.write(string.format("retryafter %d\n", thread:get("retry_after")))
  end
end
