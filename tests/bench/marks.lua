-- wrk script for marks.sh: PUT /v1/documents/m<i> with Fencing-Token 1
-- on a resource i drawn at random from 0..COUNT-1, every one of which
-- holds a higher mark: each request is refused (409). Usage:
--   wrk ... -s marks.lua URL -- COUNT
-- done() prints one MARKS_RESULT line that marks.sh parses.
local count
local body = '{"state":"bench"}\n'

function init(args)
    count = tonumber(args[1])
    if not count or count < 1 then
        error("marks.lua: usage COUNT")
    end
    math.randomseed(os.time() + math.floor(os.clock() * 1e6))
end

function request()
    return wrk.format("PUT", "/v1/documents/m" .. math.random(0, count - 1), {
        ["Fencing-Token"] = "1",
        ["Content-Type"] = "application/json",
    }, body)
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "MARKS_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d " ..
        "status_errors=%d socket_errors=%d\n",
        summary.requests, summary.duration, latency:percentile(50),
        latency:percentile(99), e.status,
        e.connect + e.read + e.write + e.timeout))
end
