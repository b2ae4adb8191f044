-- wrk script for the raises set's etcd reference: every request is one
-- put (POST /v3/kv/put, etcd's JSON gateway) of key "r<i>", i cycling
-- over 1000 keys, each a durable write (a WAL fsync, shared by a batch).

local b64chars =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function b64(s)
    local out = {}
    for i = 1, #s, 3 do
        local a, b, c = s:byte(i, i + 2)
        local n = a * 65536 + (b or 0) * 256 + (c or 0)
        local q = {}
        for k = 3, 0, -1 do
            q[#q + 1] = math.floor(n / 64 ^ k) % 64
        end
        out[#out + 1] = b64chars:sub(q[1] + 1, q[1] + 1) ..
            b64chars:sub(q[2] + 1, q[2] + 1) ..
            (b and b64chars:sub(q[3] + 1, q[3] + 1) or "=") ..
            (c and b64chars:sub(q[4] + 1, q[4] + 1) or "=")
    end
    return table.concat(out)
end

local bodies = {}
for i = 0, 999 do
    bodies[i] = '{"key":"' .. b64("r" .. i) .. '","value":"' .. b64("1") ..
        '"}'
end
local n = 0

function request()
    n = n + 1
    return wrk.format("POST", "/v3/kv/put",
        {["Content-Type"] = "application/json"}, bodies[n % 1000])
end
