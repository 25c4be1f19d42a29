-- SPDX-License-Identifier: Apache-2.0
-- GET with the key in KEY, if any (the API benchmarks' reads).
wrk.headers["authorization"] = os.getenv("KEY") ~= "" and ("Bearer " .. os.getenv("KEY")) or nil
