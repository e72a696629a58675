-- wrk script for targets (a) edge Bearer, (c) bare fasthttp proxy and
-- (d) nginx: POST /v2/verify/bank with Authorization: Bearer <key> and a
-- small JSON body. The request never changes, so wrk builds it once and
-- sends the same bytes every time (no Lua on the request path).
--
-- Environment: BENCH_KEY, the branch key (UUID v4).
local key = os.getenv("BENCH_KEY") or error("BENCH_KEY is not set")

wrk.method = "POST"
wrk.path = "/v2/verify/bank"
wrk.body = '{"payload":"0041000600000101030040220015353134529BPM054705102TH9104C0D5","amount":1500}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. key

