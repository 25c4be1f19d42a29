-- SPDX-License-Identifier: Apache-2.0
-- PUT /v1/apps/bench/devices/<random token>, with the key in KEY; WITH_USER=1 adds a user id.
-- wrk runs on the same two cores as Herald, so a request costs it little: a random 32-byte token
-- is eight random 32-bit words in one format (not 64 draws and a concatenation: ~0.35 of a core
-- at 20k/s in an earlier stop's profile), and the headers and the body's fixed part are made once per thread.
local counter, user, headers = 0, false, nil
local rest = '"environment":"production","locale":"en_US","timeZone":"Europe/Paris","appVersion":"1.0","platform":"iOS"}'
local r = math.random
-- Each thread's tokens follow from SEED: a new SEED gives new devices, the same SEED again the
-- same tokens in the same order (wrk's own generator starts alike in every run).
math.randomseed(tonumber(os.getenv("SEED")))
function setup(thread) thread:set("seed", math.random(1, 1e9)) end
function init(args)
  math.randomseed(seed)
  user = os.getenv("WITH_USER") == "1"
  headers = { ["authorization"] = "Bearer " .. os.getenv("KEY"), ["content-type"] = "application/json" }
end
function request()
  counter = counter + 1
  local token = string.format("%08x%08x%08x%08x%08x%08x%08x%08x", r(0, 0xffffffff), r(0, 0xffffffff), r(0, 0xffffffff),
    r(0, 0xffffffff), r(0, 0xffffffff), r(0, 0xffffffff), r(0, 0xffffffff), r(0, 0xffffffff))
  local body = user and ('{"userId":"u' .. (counter % 5000) .. '",' .. rest) or ('{' .. rest)
  return wrk.format("PUT", "/v1/apps/bench/devices/" .. token, headers, body)
end
