-- wrk script for tidemark's bench: PUT /v1/documents/<prefix><i> with a
-- small body and a Fencing-Token header. Usage:
--   wrk ... -s fence.lua URL -- MODE PREFIX RESOURCES THREADS TOKEN CONNS [BODY]
-- BODY: the request body's size in bytes (default: an 18-byte JSON body).
-- PREFIX "@FILE": resource i is line i (mod the lines) of FILE instead of
-- PREFIX..i (names chosen for the run, as tests/bench/aimed.py writes).
-- MODE equal or stale: every request carries TOKEN; resources cycle.
-- MODE carried: as equal, on PUT /v1/carried/..., with no token: the
-- route's lease gives it one.
-- MODE rising: TOKEN is a base above every earlier mark. Thread t of T
-- only uses resources i with i % T == t, and sends token base + n*T + t
-- for its n-th request: so each request raises its resource's mark and
-- one resource is never in flight twice (a thread has far fewer
-- connections than resources).
-- MODE handover: the hot lock handed on at every write: every request
-- writes resource PREFIX0 with the next token (base + n*T + t, as
-- rising), so each waits in tidemark's order gate for every lower one in
-- flight: the gate's queue holds about as many writes as there are
-- connections. Run with one thread, so that tokens leave in the order
-- they are made (a lower one that arrives after a higher was accepted
-- is refused, 409).
-- done() prints one WRK_RESULT line that run.sh parses, with "lost": the
-- requests whose connection was closed without an answer (wrk reconnects
-- silently and counts no error for that), at least issued - answered -
-- CONNS, as each connection has at most one request in flight at the end.

-- Globals, not locals: setup() and done() reach them through thread:set()
-- and thread:get().
bench_tid = 0
bench_issued = 0
bench_conns = 0
local created = 0
local threads = {}
local mode, prefix, nres, nthreads, token, per
local names -- PREFIX "@FILE": the file's lines
local body = '{"state":"bench"}\n'

function setup(thread)
    thread:set("bench_tid", created)
    created = created + 1
    table.insert(threads, thread)
end

function init(args)
    mode, prefix = args[1], args[2]
    nres, nthreads = tonumber(args[3]), tonumber(args[4])
    token = tonumber(args[5])
    bench_conns = math.floor((tonumber(args[6]) or 0) / nthreads)
    if mode ~= "equal" and mode ~= "stale" and mode ~= "rising" and
        mode ~= "carried" and mode ~= "handover" then
        error("fence.lua: unknown mode " .. tostring(mode))
    end
    if not (nres and nthreads and token) or nres < 1 or
        (mode == "rising" and nres < nthreads) then
        error("fence.lua: usage MODE PREFIX RESOURCES THREADS TOKEN CONNS " ..
            "[BODY] (rising: RESOURCES >= THREADS)")
    end
    if string.sub(prefix, 1, 1) == "@" then
        names = {}
        for line in io.lines(string.sub(prefix, 2)) do
            table.insert(names, line)
        end
        if #names == 0 then
            error("fence.lua: no names in " .. string.sub(prefix, 2))
        end
    end
    local size = tonumber(args[7])
    if size then
        body = string.rep("x", size)
    end
    -- Resources owned by this thread in rising mode.
    per = math.floor((nres - 1 - bench_tid) / nthreads) + 1
end

function request()
    local n = bench_issued
    bench_issued = bench_issued + 1
    local i, tok
    if mode == "rising" then
        i = bench_tid + (n % per) * nthreads
        tok = token + n * nthreads + bench_tid
    elseif mode == "handover" then
        i = 0
        tok = token + n * nthreads + bench_tid
    else
        i = (n * nthreads + bench_tid) % nres
        tok = token
    end
    local headers = {["Content-Type"] = "application/json"}
    local name = prefix .. i
    if names then
        name = names[i % #names + 1]
    end
    if mode == "carried" then
        return wrk.format("PUT", "/v1/carried/" .. name, headers, body)
    end
    -- %.0f: Lua numbers are doubles; tokens stay below 2^53, so exact.
    headers["Fencing-Token"] = string.format("%.0f", tok)
    return wrk.format("PUT", "/v1/documents/" .. name, headers, body)
end

function done(summary, latency, requests)
    local e = summary.errors
    local issued, conns = 0, 0
    for _, t in ipairs(threads) do
        issued = issued + t:get("bench_issued")
        conns = conns + t:get("bench_conns")
    end
    local lost = math.max(0, issued - summary.requests - conns)
    io.write(string.format(
        "WRK_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d " ..
        "mean_us=%d status_errors=%d socket_errors=%d lost=%d\n",
        summary.requests, summary.duration,
        latency:percentile(50), latency:percentile(99), latency.mean,
        e.status, e.connect + e.read + e.write + e.timeout, lost))
end
