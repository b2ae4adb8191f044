-- wrk script for tidemark's bench: PUT /v1/documents/<prefix><i> with a
-- small body and a Fencing-Token header. Usage:
--   wrk ... -s fence.lua URL -- MODE PREFIX RESOURCES THREADS TOKEN
-- MODE equal or stale: every request carries TOKEN; resources cycle.
-- MODE rising: TOKEN is a base above every earlier mark. Thread t of T
-- only uses resources i with i % T == t, and sends token base + n*T + t
-- for its n-th request: so each request raises its resource's mark and
-- one resource is never in flight twice (a thread has far fewer
-- connections than resources).
-- done() prints one WRK_RESULT line that run.sh parses.

-- Globals, not locals: setup() fills bench_tid through thread:set().
bench_tid = 0
local created = 0
local counter = 0
local mode, prefix, nres, nthreads, token, per
local body = '{"state":"bench"}\n'

function setup(thread)
    thread:set("bench_tid", created)
    created = created + 1
end

function init(args)
    mode, prefix = args[1], args[2]
    nres, nthreads = tonumber(args[3]), tonumber(args[4])
    token = tonumber(args[5])
    if mode ~= "equal" and mode ~= "stale" and mode ~= "rising" then
        error("fence.lua: unknown mode " .. tostring(mode))
    end
    if not (nres and nthreads and token) or nres < nthreads then
        error("fence.lua: usage MODE PREFIX RESOURCES THREADS TOKEN")
    end
    -- Resources owned by this thread in rising mode.
    per = math.floor((nres - 1 - bench_tid) / nthreads) + 1
end

function request()
    local n = counter
    counter = counter + 1
    local i, tok
    if mode == "rising" then
        i = bench_tid + (n % per) * nthreads
        tok = token + n * nthreads + bench_tid
    else
        i = (n * nthreads + bench_tid) % nres
        tok = token
    end
    -- %.0f: Lua numbers are doubles; tokens stay below 2^53, so exact.
    return wrk.format("PUT", "/v1/documents/" .. prefix .. i, {
        ["Fencing-Token"] = string.format("%.0f", tok),
        ["Content-Type"] = "application/json",
    }, body)
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "WRK_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d " ..
        "status_errors=%d socket_errors=%d\n",
        summary.requests, summary.duration,
        latency:percentile(50), latency:percentile(99),
        e.status, e.connect + e.read + e.write + e.timeout))
end
