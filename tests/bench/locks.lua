-- wrk script for the lock service: POST /v1/locks/<name>?ttl_ms=N on the
-- control port, then DELETE with the token the 201 returned. Usage:
--   wrk ... -s locks.lua http://ADMIN -- MODE TTL_MS
-- MODE pairs: each acquire takes a name no one holds (a thread's own
-- rotating names), so every pair is one lock and one release.
-- MODE hot: every acquire is on one name; a win is released at once.
-- done() prints one LOCKS_RESULT line per run with the counts by status.

bench_tid = 0
local created = 0
local threads = {}
local mode, ttl
local pending = {}      -- releases to send: {name, token}
local n = 0
c201, c204, c423, cother = 0, 0, 0, 0

function setup(thread)
    thread:set("bench_tid", created)
    created = created + 1
    table.insert(threads, thread)
end

function init(args)
    mode, ttl = args[1], tonumber(args[2] or "10000")
    if mode ~= "pairs" and mode ~= "hot" then
        error("locks.lua: MODE must be pairs or hot")
    end
end

function request()
    local p = table.remove(pending)
    if p ~= nil then
        return wrk.format("DELETE", "/v1/locks/" .. p[1] .. "?token=" .. p[2])
    end
    local name = "hot"
    if mode == "pairs" then
        n = n + 1
        name = "bench/" .. bench_tid .. "/" .. (n % 100000)
    end
    return wrk.format("POST", "/v1/locks/" .. name .. "?ttl_ms=" .. ttl)
end

function response(status, headers, body)
    if status == 201 then
        c201 = c201 + 1
        local name = string.match(body, '"name":"([^"]*)"')
        local token = string.match(body, '"token":"([^"]*)"')
        table.insert(pending, {name, token})
    elseif status == 204 then
        c204 = c204 + 1
    elseif status == 423 then
        c423 = c423 + 1
    else
        cother = cother + 1
    end
end

function done(summary, latency, requests)
    local t = {c201 = 0, c204 = 0, c423 = 0, cother = 0}
    for _, th in ipairs(threads) do
        for k, _ in pairs(t) do
            t[k] = t[k] + th:get(k)
        end
    end
    local secs = summary.duration / 1e6
    io.write(string.format(
        "LOCKS_RESULT secs=%.2f requests=%d 201=%d 204=%d 423=%d " ..
        "other=%d acquires_per_s=%.0f releases_per_s=%.0f tries_per_s=%.0f " ..
        "p99_ms=%.2f\n",
        secs, summary.requests, t.c201, t.c204, t.c423, t.cother,
        t.c201 / secs, t.c204 / secs, (t.c201 + t.c423) / secs,
        latency:percentile(99) / 1000))
end
